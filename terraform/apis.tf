# APIs lrosink uses. disable_on_destroy = false: this configuration does not
# own the project, and disabling an API on destroy would break anything else
# in the project that uses it (and delete its resources).
#
# serviceusage and cloudresourcemanager must already be enabled for
# Terraform to enable these (docs/DEPLOY.md, "bootstrap APIs").
locals {
  # Not "services": run.tf's local.services is the Cloud Run services, and
  # a module may define a local once (terraform refuses it otherwise).
  apis = toset([
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudscheduler.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    # The Cloud Build source staging bucket (build.tf).
    "storage.googleapis.com",
  ])
}

resource "google_project_service" "apis" {
  for_each = local.apis

  project            = var.project_id
  service            = each.key
  disable_on_destroy = false
}
