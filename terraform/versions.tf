terraform {
  # 1.7: `removed` blocks (moved.tf); every later 1.x works.
  required_version = ">= 1.7"

  required_providers {
    google = {
      source = "hashicorp/google"
      # 7.45 is the release these files were written against
      # (cloud_run_v2_service deletion_protection and invoker_iam_disabled,
      # secret_manager_secret deletion_protection, firestore_database
      # deletion_policy, pubsub exactly-once); `~>` allows 7.x bug fixes only.
      version = "~> 7.45"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region

  default_labels = {
    app        = var.name_prefix
    managed-by = "terraform"
  }
}
