# lrosink on Google Cloud. The configuration is split by concern:
#
#   versions.tf           Terraform and google provider pins, provider config
#   variables.tf          inputs (no secrets: secret values never pass through Terraform)
#   apis.tf               project services
#   artifact_registry.tf  the Docker repository of the one image
#   firestore.tf          the (default) database, TTL on claims, index exemptions
#   firestore_indexes.tf  composite indexes (cross-checked with queries.json)
#   pubsub.tf             results topic, worker subscription, dead letters
#   secrets.tf            webhook secrets and Gemini API key (secrets only, no versions)
#   iam.tf                one service account per service, least privilege
#   run.tf                THE list of services (local.services): the Cloud Run
#                         services and their invoker IAM, derived from it
#   moved.tf              earlier resource addresses, so upgrades move, not re-create
#   scheduler.tf          Cloud Scheduler -> Reconcile (OIDC)
#   monitoring.tf         log-based metrics and alert policies
#   build.tf              Cloud Build account and source bucket for cloudbuild.yaml
#   outputs.tf            URLs and names for the next deployment steps
#
# deploy_test/ checks the security and consistency rules of these files
# (distinct service accounts, only Webhook public, no secret values, indexes
# matching the code's queries, Scheduler -> Reconcile with OIDC, every
# rolled-out service granted to the build account, log filters matching the
# code's log lines) without a provider; scripts/check-deploy.sh runs it with terraform fmt and tflint.

# The project number names the Pub/Sub service agent (pubsub.tf).
data "google_project" "this" {
  project_id = var.project_id

  depends_on = [google_project_service.apis]
}
