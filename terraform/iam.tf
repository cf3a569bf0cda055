# One service account per service, least privilege, resource-level grants
# wherever the resource supports IAM.
#
# Not granted on purpose:
# - roles/logging.logWriter to the runtime accounts: Cloud Run collects the
#   containers' stdout/stderr itself; lrosink logs JSON lines to stdout and
#   does not call the Logging API.
# - roles/monitoring.metricWriter: lrosink writes no custom metrics; its
#   metrics are log-based (monitoring.tf).
# - roles/pubsub.publisher to Register: registering an operation never
#   settles it, so Register never publishes.

# One runtime account per service of local.services (run.tf).
resource "google_service_account" "runtime" {
  for_each = local.services

  project      = var.project_id
  account_id   = "${var.name_prefix}-${each.key}"
  display_name = "lrosink ${each.value.target} (Cloud Run)"
  description  = each.value.description

  depends_on = [google_project_service.apis]
}

# The console only reads: roles/datastore.viewer, never user (it cannot
# change an operation or a claim even if its handler had a bug), and no
# Pub/Sub or Secret Manager grant at all.
resource "google_project_iam_member" "console_datastore_viewer" {
  project = var.project_id
  role    = "roles/datastore.viewer"
  member  = google_service_account.runtime["console"].member
}

# Cloud Scheduler calls Reconcile with an OIDC token of this account.
resource "google_service_account" "scheduler" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-scheduler"
  display_name = "lrosink Reconcile invoker (Cloud Scheduler)"
  description  = "Identity of the Cloud Scheduler job; may only invoke the Reconcile service"

  depends_on = [google_project_service.apis]
}

# Firestore has no per-collection or per-database IAM for the data plane:
# roles/datastore.user (read/write documents, no index or database admin)
# at project level is the narrowest grant.
resource "google_project_iam_member" "datastore_user" {
  for_each = {
    webhook   = google_service_account.runtime["webhook"].member
    reconcile = google_service_account.runtime["reconcile"].member
    register  = google_service_account.runtime["register"].member
  }

  project = var.project_id
  role    = "roles/datastore.user"
  member  = each.value
}

# Publishing results: on the results topic only.
resource "google_pubsub_topic_iam_member" "results_publisher" {
  for_each = {
    webhook   = google_service_account.runtime["webhook"].member
    reconcile = google_service_account.runtime["reconcile"].member
  }

  project = var.project_id
  topic   = google_pubsub_topic.results.name
  role    = "roles/pubsub.publisher"
  member  = each.value
}

# Each secret is readable by the one service that needs it.
resource "google_secret_manager_secret_iam_member" "webhook_secrets" {
  project   = var.project_id
  secret_id = google_secret_manager_secret.secret["webhook"].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.runtime["webhook"].member
}

resource "google_secret_manager_secret_iam_member" "gemini_api_key" {
  project   = var.project_id
  secret_id = google_secret_manager_secret.secret["gemini_api_key"].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.runtime["reconcile"].member
}

# The Webhook confirms dynamic-webhook hints with Gemini (run.tf).
resource "google_secret_manager_secret_iam_member" "gemini_api_key_webhook" {
  project   = var.project_id
  secret_id = google_secret_manager_secret.secret["gemini_api_key"].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.runtime["webhook"].member
}
