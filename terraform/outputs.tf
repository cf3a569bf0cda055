output "webhook_url" {
  description = "Public URL of the Webhook service: register it with Gemini (lrosink webhooks create --uri ...)."
  value       = google_cloud_run_v2_service.webhook.uri
}

output "register_url" {
  description = "URL of the Register service (IAM-protected; call it with an identity token of a register_invokers member)."
  value       = google_cloud_run_v2_service.register.uri
}

output "reconcile_url" {
  description = "URL of the Reconcile service (IAM-protected; called by Cloud Scheduler)."
  value       = google_cloud_run_v2_service.reconcile.uri
}

output "results_topic" {
  description = "Full name of the results topic (LROSINK_RESULTS=pubsub:<this>)."
  value       = google_pubsub_topic.results.id
}

output "results_subscription" {
  description = "Full name of the example worker subscription (exactly-once, ordered, dead-lettered)."
  value       = google_pubsub_subscription.results.id
}

output "dead_letter_subscription" {
  description = "Full name of the subscription holding dead-lettered results messages."
  value       = google_pubsub_subscription.dead_letter.id
}

output "webhook_secret_name" {
  description = "Secret Manager secret for LROSINK_WEBHOOK_SECRETS (the name only; its versions are added out of band)."
  value       = google_secret_manager_secret.webhook.id
}

output "gemini_api_key_secret_name" {
  description = "Secret Manager secret for the Gemini API key used by Reconcile (the name only)."
  value       = google_secret_manager_secret.gemini_api_key.id
}

output "image_repository" {
  description = "Artifact Registry path images are pushed to (REGION-docker.pkg.dev/PROJECT/REPO)."
  value       = local.image_repository
}

output "build_service_account" {
  description = "Resource name of the Cloud Build account, for gcloud builds submit --service-account."
  value       = google_service_account.build.id
}

output "build_source_staging_dir" {
  description = "Value for gcloud builds submit --gcs-source-staging-dir."
  value       = "gs://${google_storage_bucket.build_source.name}/source"
}

output "service_names" {
  description = "Cloud Run service names, for gcloud run services update and the cloudbuild.yaml _SERVICE_PREFIX substitution."
  value = {
    webhook   = google_cloud_run_v2_service.webhook.name
    reconcile = google_cloud_run_v2_service.reconcile.name
    register  = google_cloud_run_v2_service.register.name
    console   = google_cloud_run_v2_service.console.name
  }
}

output "console_url" {
  description = "URL of the Console service (IAM-protected): open it with gcloud run services proxy (docs/OPERATIONS.md)."
  value       = google_cloud_run_v2_service.console.uri
}
