# Secrets are created here WITHOUT any version: a google_secret_manager_secret_version
# with secret_data would put the value into the Terraform state. The operator
# adds versions out of band (docs/DEPLOY.md):
#   lrosink webhooks create --secret projects/P/secrets/WEBHOOK_SECRET_ID ...
#   gcloud secrets versions add SECRET_ID --data-file=-
# Cloud Run reads them at instance start through env value_source (version
# "latest"), so a new version takes effect with the next revision.

# LROSINK_WEBHOOK_SECRETS: comma-separated whsec_ secrets (several during a
# rotation). Read by the Webhook service only.
resource "google_secret_manager_secret" "webhook" {
  project   = var.project_id
  secret_id = var.webhook_secret_id

  replication {
    auto {}
  }

  depends_on = [google_project_service.apis]
}

# GEMINI_API_KEY: used by the Reconcile service to ask Gemini for the state
# of overdue operations.
resource "google_secret_manager_secret" "gemini_api_key" {
  project   = var.project_id
  secret_id = var.gemini_api_key_secret_id

  replication {
    auto {}
  }

  depends_on = [google_project_service.apis]
}
