# The Docker repository for the one lrosink image (every service of
# local.services runs it; FUNCTION_TARGET selects the function).
#
# prevent_destroy: it holds the images the running revisions and every
# rollback target use; `terraform destroy` stops at plan time instead of
# deleting them (docs/DEPLOY.md, "Tearing down").
#
# Cleanup: every build pushes one image; keep the var.image_keep_count most
# recent versions (KEEP wins over DELETE, so the running image and the
# rollback candidates stay) and delete the others once 30 days old.
resource "google_artifact_registry_repository" "images" {
  project       = var.project_id
  location      = var.region
  repository_id = local.names.artifact_repository
  format        = "DOCKER"
  description   = "lrosink container images (cmd/server), built by Cloud Build from the Dockerfile"

  cleanup_policy_dry_run = false

  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = var.image_keep_count
    }
  }

  cleanup_policies {
    id     = "delete-old"
    action = "DELETE"
    condition {
      tag_state  = "ANY"
      older_than = "2592000s"
    }
  }

  lifecycle {
    prevent_destroy = true
  }

  depends_on = [google_project_service.apis]
}

locals {
  # REGION-docker.pkg.dev/PROJECT/REPO, and the image in it: cloudbuild.yaml
  # pushes local.image:SHORT_SHA (its _IMAGE substitution, build.tf), the
  # rollout trigger deploys what is pushed there.
  image_repository = "${var.region}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.images.repository_id}"
  image            = "${local.image_repository}/lrosink"
}
