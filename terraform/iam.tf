# One service account per service, least privilege, resource-level grants
# wherever the resource supports IAM. Every grant of a runtime account is
# derived from its entry in local.services (run.tf): ledger, publishes,
# secrets.
#
# Not granted on purpose:
# - roles/logging.logWriter to the runtime accounts: Cloud Run collects the
#   containers' stdout/stderr itself; lrosink logs JSON lines to stdout and
#   does not call the Logging API.
# - roles/monitoring.metricWriter: lrosink writes no custom metrics; its
#   metrics are log-based (monitoring.tf).

locals {
  ledger_roles = {
    write = "roles/datastore.user"
    read  = "roles/datastore.viewer"
  }

  # One grant per (service, topic) and per (service, secret), keyed
  # "service/name".
  publisher_grants = merge([
    for svc, s in local.services : { for tp in s.publishes : "${svc}/${tp}" => { service = svc, topic = tp } }
  ]...)
  secret_grants = merge([
    for svc, s in local.services : { for k in s.secrets : "${svc}/${k}" => { service = svc, secret = k } }
  ]...)
}

# One runtime account per service of local.services (run.tf).
resource "google_service_account" "runtime" {
  for_each = local.services

  project      = var.project_id
  account_id   = "${var.name_prefix}-${each.key}"
  display_name = "lrosink ${each.value.target} (Cloud Run)"
  description  = each.value.description

  depends_on = [google_project_service.apis]
}

# Cloud Scheduler calls Reconcile with an OIDC token of this account.
resource "google_service_account" "scheduler" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-scheduler"
  display_name = "lrosink Reconcile invoker (Cloud Scheduler)"
  description  = "Identity of the Cloud Scheduler job; may only invoke the Reconcile service"

  depends_on = [google_project_service.apis]
}

# Firestore has no per-collection IAM: read/write documents
# (roles/datastore.user, no index or database admin) or read only
# (roles/datastore.viewer), granted on the project with an IAM condition on
# the one database, is the narrowest grant it supports (docs/DEPLOY.md,
# "Firestore access").
#
# create_before_destroy: deployments before the condition hold the same
# role unconditioned; the conditioned binding replaces it only once it
# exists, so no revision loses the ledger in between.
resource "google_project_iam_member" "ledger" {
  for_each = { for svc, s in local.services : svc => s.ledger if s.ledger != null }

  project = var.project_id
  role    = local.ledger_roles[each.value]
  member  = google_service_account.runtime[each.key].member

  condition {
    title       = "${var.name_prefix} ledger database only"
    description = "Documents of the lrosink ledger database, no other database of the project"
    expression  = "resource.name == \"${local.ledger_database_resource}\" || resource.name.startsWith(\"${local.ledger_database_resource}/\")"
  }

  lifecycle {
    create_before_destroy = true
  }
}

# The workers (var.results_subscribers) claim each result in the processed
# collection (package consume): read/write on the consumer database only,
# which is the ledger's unless var.separate_consumer_database.
resource "google_project_iam_member" "consumer" {
  for_each = var.consumer_processed_collection == "" ? toset([]) : toset(var.results_subscribers)

  project = var.project_id
  role    = "roles/datastore.user"
  member  = each.value

  condition {
    title       = "${var.name_prefix} consumer database only"
    description = "Documents of the database holding the workers' processed records, no other database of the project"
    expression  = "resource.name == \"${local.consumer_database_resource}\" || resource.name.startsWith(\"${local.consumer_database_resource}/\")"
  }
}

# Publishing: on each topic the service publishes to, nothing else.
resource "google_pubsub_topic_iam_member" "publisher" {
  for_each = local.publisher_grants

  project = var.project_id
  topic   = local.topics[each.value.topic].name
  role    = "roles/pubsub.publisher"
  member  = google_service_account.runtime[each.value.service].member
}

# Each secret is readable by the services that mount it, and only by them.
resource "google_secret_manager_secret_iam_member" "accessor" {
  for_each = local.secret_grants

  project   = var.project_id
  secret_id = google_secret_manager_secret.secret[each.value.secret].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.runtime[each.value.service].member
}
