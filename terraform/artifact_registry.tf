# The Docker repository for the one lrosink image (all four services run
# it; FUNCTION_TARGET selects the function).
resource "google_artifact_registry_repository" "images" {
  project       = var.project_id
  location      = var.region
  repository_id = var.artifact_repository_id
  format        = "DOCKER"
  description   = "lrosink container images (cmd/server), built by Cloud Build from the Dockerfile"

  depends_on = [google_project_service.apis]
}

locals {
  # REGION-docker.pkg.dev/PROJECT/REPO: cloudbuild.yaml pushes REPO_PATH/lrosink:SHORT_SHA.
  image_repository = "${var.region}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.images.repository_id}"
}
