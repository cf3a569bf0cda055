# Cloud Build: a dedicated build account instead of the project's default
# one (whose grants vary by project age and org policy), allowed exactly
# what cloudbuild.yaml does:
#   push the image            -> artifactregistry.writer on the repository
#   roll out the services     -> run.developer on each service, and
#                                iam.serviceAccountUser on each runtime
#                                account (a revision runs as that account);
#                                both for_each over local.services, the list
#                                cloudbuild.yaml rolls out (deploy_test)
#   read the uploaded source  -> storage.objectViewer on the staging bucket
#   write build logs          -> logging.logWriter (options.logging:
#                                CLOUD_LOGGING_ONLY, required with a
#                                user-specified build account)
# Submit builds with --service-account and --gcs-source-staging-dir from
# the outputs (docs/DEPLOY.md).

resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-build"
  display_name = "lrosink Cloud Build"
  description  = "Builds the lrosink image and rolls it out to the lrosink Cloud Run services"

  depends_on = [google_project_service.apis]
}

resource "google_storage_bucket" "build_source" {
  project                     = var.project_id
  name                        = "${var.project_id}-${var.name_prefix}-build-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true

  # Uploaded source archives are only needed while the build runs.
  lifecycle_rule {
    condition {
      age = 7
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.apis]
}

resource "google_storage_bucket_iam_member" "build_source_reader" {
  bucket = google_storage_bucket.build_source.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.build.member
}

resource "google_artifact_registry_repository_iam_member" "build_writer" {
  project    = var.project_id
  location   = google_artifact_registry_repository.images.location
  repository = google_artifact_registry_repository.images.name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.build.member
}

resource "google_project_iam_member" "build_log_writer" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = google_service_account.build.member
}

resource "google_cloud_run_v2_service_iam_member" "build_deployer" {
  for_each = local.services

  project  = var.project_id
  location = google_cloud_run_v2_service.service[each.key].location
  name     = google_cloud_run_v2_service.service[each.key].name
  role     = "roles/run.developer"
  member   = google_service_account.build.member
}

resource "google_service_account_iam_member" "build_act_as" {
  for_each = local.services

  service_account_id = google_service_account.runtime[each.key].name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.build.member
}
