# lrosink on Google Cloud. The configuration is split by concern:
#
#   versions.tf           Terraform and google provider pins, provider config
#   variables.tf          inputs (no secrets: secret values never pass through Terraform)
#   apis.tf               project services
#   artifact_registry.tf  the Docker repository of the one image
#   firestore.tf          the ledger database, TTL fields, index exemptions
#   firestore_indexes.tf  composite indexes (cross-checked with queries.json)
#   pubsub.tf             results topic, worker subscription, dead letters
#   secrets.tf            webhook secrets and Gemini API key (secrets only, no versions)
#   iam.tf                one service account per service, least privilege
#   run.tf                THE list of services (local.services): the Cloud Run
#                         services and their invoker IAM, derived from it
#   moved.tf              earlier resource addresses, so upgrades move, not re-create
#   scheduler.tf          Cloud Scheduler -> Reconcile (OIDC)
#   monitoring.tf         log-based metrics and alert policies
#   build.tf              build account (cloudbuild.yaml: tests, image) and
#                         deployer account (the rollout trigger), apart
#   outputs.tf            URLs and names for the next deployment steps
#
# deploy_test/ checks the security and consistency rules of these files
# without a provider (distinct service accounts, only Webhook public,
# authoritative invoker bindings, Firestore grants scoped to one database, a
# build account that cannot deploy and a deployer that cannot delete, no
# secret values, indexes matching the code's queries, Scheduler -> Reconcile
# with OIDC, two instances sharing no name, moved blocks for every renamed
# address, log and alert filters matching the code's lines and answers), and
# every attribute against the google provider's schema;
# scripts/check-deploy.sh runs terraform fmt, validate and tflint.

# The names that must be unique in the project, derived from
# var.name_prefix unless a variable sets one: two instances with different
# prefixes collide nowhere (deploy_test evaluates two side by side). The
# default prefix keeps the names deployments before these derivations had:
# the (default) database and the gemini-api-key secret.
locals {
  legacy_names = var.name_prefix == "lrosink"

  names = {
    artifact_repository   = coalesce(var.artifact_repository_id, var.name_prefix)
    results_topic         = coalesce(var.results_topic, "${var.name_prefix}-results")
    results_subscription  = coalesce(var.results_subscription, "${var.name_prefix}-results-worker")
    webhook_secret        = coalesce(var.webhook_secret_id, "${var.name_prefix}-webhook-secrets")
    gemini_api_key_secret = coalesce(var.gemini_api_key_secret_id, local.legacy_names ? "gemini-api-key" : "${var.name_prefix}-gemini-api-key")
    firestore_database    = coalesce(var.firestore_database, local.legacy_names ? "(default)" : "${var.name_prefix}-ledger")
  }
}

# The project number names the Pub/Sub service agent (pubsub.tf).
data "google_project" "this" {
  project_id = var.project_id

  depends_on = [google_project_service.apis]
}
