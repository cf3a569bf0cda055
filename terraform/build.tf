# Build and rollout, apart: two accounts, two builds.
#
# The BUILD account runs cloudbuild.yaml: `make test` (apt packages,
# chromium, Go modules, tflint built from source: code this project did not
# write) and the image build. It may do exactly what that needs:
#   push the image            -> artifactregistry.writer on the repository
#   read the uploaded source  -> storage.objectViewer on the staging bucket
#   write build logs          -> logging.logWriter (options.logging:
#                                CLOUD_LOGGING_ONLY, required with a
#                                user-specified build account)
# and nothing on Cloud Run: a poisoned dependency in the tests can push an
# image, never deploy one as the Webhook (which reads the secrets).
#
# The DEPLOYER account runs the rollout: the google_cloudbuild_trigger
# below, started by Artifact Registry's notification of the pushed image
# (the `gcr` topic) and, by default, held for a human's approval. Its build
# is declared here, one step per service of local.services, so the list of
# services is written once. It may:
#   update the services       -> a custom role (get/update services,
#                                revisions, operations; no create, no
#                                delete, no IAM) on each service
#   run revisions as the
#   runtime accounts          -> iam.serviceAccountUser on each of them only
#   write build logs          -> logging.logWriter
# deploy_test (TestBuildCannotDeployAndDeployerCannotDelete) checks both
# accounts' grants and the rollout's steps.

resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-build"
  display_name = "lrosink Cloud Build (tests and image)"
  description  = "Runs cloudbuild.yaml: the tests and the image build; may push images and write logs, nothing else"

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

locals {
  # cloudbuild.yaml's substitutions, from the same variables as everything
  # else (the build trigger passes them; by hand: the build_substitutions
  # output).
  build_substitutions = {
    _IMAGE = local.image
  }
}

# The build on every push to the branch, when the repository is connected
# to Cloud Build (var.build_trigger); without it, builds are submitted by
# hand (docs/DEPLOY.md, step 11).
resource "google_cloudbuild_trigger" "build" {
  count = var.build_trigger == null ? 0 : 1

  project         = var.project_id
  location        = var.region
  name            = "${var.name_prefix}-build"
  description     = "Tests, builds and pushes the lrosink image (cloudbuild.yaml); never deploys"
  service_account = google_service_account.build.id
  filename        = "cloudbuild.yaml"
  substitutions   = local.build_substitutions

  repository_event_config {
    repository = var.build_trigger.repository
    push {
      branch = var.build_trigger.branch
    }
  }

  depends_on = [
    google_project_service.apis,
    google_artifact_registry_repository_iam_member.build_writer,
    google_project_iam_member.build_log_writer,
  ]
}

resource "google_service_account" "deployer" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-deployer"
  display_name = "lrosink rollout (Cloud Build)"
  description  = "Runs the rollout trigger: updates the image of the lrosink Cloud Run services; cannot create or delete them"

  depends_on = [google_project_service.apis]
}

# roles/run.developer would also create and delete services (and jobs):
# the rollout changes an image, nothing else. Role ids allow no hyphens.
resource "google_project_iam_custom_role" "deployer" {
  project     = var.project_id
  role_id     = "${replace(var.name_prefix, "-", "_")}_deployer"
  title       = "${var.name_prefix} rollout"
  description = "Update the image of a Cloud Run service: get and update services, read revisions and operations. No create, no delete, no IAM."
  permissions = [
    "run.operations.get",
    "run.operations.list",
    "run.revisions.get",
    "run.revisions.list",
    "run.services.get",
    "run.services.update",
  ]
}

# Granted on each service, not the project: the rollout reaches this
# instance's services only. (run.operations.* take effect on a project
# binding only; `gcloud run services update` waits on the service itself.)
resource "google_cloud_run_v2_service_iam_member" "deployer" {
  for_each = local.services

  project  = var.project_id
  location = google_cloud_run_v2_service.service[each.key].location
  name     = google_cloud_run_v2_service.service[each.key].name
  role     = google_project_iam_custom_role.deployer.name
  member   = google_service_account.deployer.member
}

# A revision runs as its service's runtime account: updating a service
# needs actAs on that account, on those accounts only.
resource "google_service_account_iam_member" "deployer_act_as" {
  for_each = local.services

  service_account_id = google_service_account.runtime[each.key].name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.deployer.member
}

resource "google_project_iam_member" "deployer_log_writer" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = google_service_account.deployer.member
}

# Who approves a held rollout: approval is on the build, a project
# resource, so the role has no narrower place to be granted.
resource "google_project_iam_member" "rollout_approver" {
  for_each = toset(var.rollout_approvers)

  project = var.project_id
  role    = "roles/cloudbuild.builds.approver"
  member  = each.value
}

# The rollout: when an image of local.image is pushed with a tag, Artifact
# Registry publishes to the project's `gcr` topic (it creates the topic when
# its API is enabled; https://cloud.google.com/artifact-registry/docs/configure-notifications),
# and this trigger runs under the deployer, after approval unless
# var.rollout_approval_required is false. One step per service updates its
# image to the pushed digest; env, secrets and accounts stay as Terraform
# set them. The filter takes only a tag pushed to this instance's image,
# digest and tag both: a message on the topic naming another image (or
# another instance's) starts nothing.
resource "google_cloudbuild_trigger" "rollout" {
  project         = var.project_id
  location        = var.region
  name            = "${var.name_prefix}-rollout"
  description     = "Rolls a pushed lrosink image out to every service of local.services"
  service_account = google_service_account.deployer.id

  pubsub_config {
    topic = "projects/${var.project_id}/topics/gcr"
  }

  substitutions = {
    _ACTION       = "$(body.message.data.action)"
    _IMAGE_TAG    = "$(body.message.data.tag)"
    _IMAGE_DIGEST = "$(body.message.data.digest)"
  }
  filter = "_ACTION == \"INSERT\" && _IMAGE_TAG.startsWith(\"${local.image}:\") && _IMAGE_DIGEST.startsWith(\"${local.image}@sha256:\")"

  approval_config {
    approval_required = var.rollout_approval_required
  }

  build {
    dynamic "step" {
      for_each = local.services
      content {
        id         = "update-${step.key}"
        name       = "gcr.io/google.com/cloudsdktool/cloud-sdk:slim"
        entrypoint = "gcloud"
        args = [
          "run", "services", "update", google_cloud_run_v2_service.service[step.key].name,
          "--project=${var.project_id}", "--region=${var.region}", "--image=$_IMAGE_DIGEST", "--quiet",
        ]
      }
    }

    timeout = "1200s"

    options {
      # Required with a user-specified build account.
      logging = "CLOUD_LOGGING_ONLY"
    }
  }

  # The grants must be there before the first image arrives.
  depends_on = [
    google_project_service.apis,
    google_cloud_run_v2_service_iam_member.deployer,
    google_service_account_iam_member.deployer_act_as,
    google_project_iam_member.deployer_log_writer,
  ]
}
