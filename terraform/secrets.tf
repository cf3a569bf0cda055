# Secrets are created here WITHOUT any version: a google_secret_manager_secret_version
# with secret_data would put the value into the Terraform state. The operator
# adds versions out of band (docs/DEPLOY.md):
#   lrosink webhooks create --secret projects/P/secrets/WEBHOOK_SECRET_ID ...
#   gcloud secrets versions add SECRET_ID --data-file=-
# Cloud Run reads them at instance start through env value_source (version
# "latest"), so a new version takes effect with the next revision.
#
# deletion_protection: deleting a secret deletes its versions, and the
# webhook signing secret cannot be fetched from Gemini again (only a new
# one, with a new webhook registration). Tearing down on purpose:
# docs/DEPLOY.md, "Tearing down".
#
# Replication: automatic unless var.secret_replica_locations names regions
# (an organization policy restricting resource locations refuses automatic
# replication).

# Each secret with the env var it becomes in the services that read it
# (local.services[*].secrets, run.tf); their accessor grants are derived
# from the same lists (iam.tf).
locals {
  secrets = {
    # LROSINK_WEBHOOK_SECRETS: comma-separated signing secrets (several during
    # a rotation).
    webhook = { id = local.names.webhook_secret, env = "LROSINK_WEBHOOK_SECRETS" }
    # GEMINI_API_KEY: Reconcile asks Gemini for the state of overdue
    # operations; the Webhook confirms dynamic-webhook hints.
    gemini_api_key = { id = local.names.gemini_api_key_secret, env = "GEMINI_API_KEY" }
  }
}

resource "google_secret_manager_secret" "secret" {
  for_each = local.secrets

  project             = var.project_id
  secret_id           = each.value.id
  deletion_protection = var.deletion_protection

  replication {
    dynamic "auto" {
      for_each = length(var.secret_replica_locations) == 0 ? [1] : []
      content {}
    }
    dynamic "user_managed" {
      for_each = length(var.secret_replica_locations) == 0 ? [] : [1]
      content {
        dynamic "replicas" {
          for_each = var.secret_replica_locations
          content {
            location = replicas.value
          }
        }
      }
    }
  }

  depends_on = [google_project_service.apis]
}
