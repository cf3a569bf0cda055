output "reconcile_fanout_topic" {
  description = "Full name of the topic the reconcile coordinator publishes shard requests to (LROSINK_RECONCILE_FANOUT_TOPIC); publish {\"range\":\"LO-HI\"} there to re-run one range by hand."
  value       = google_pubsub_topic.reconcile_fanout.id
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
  value       = google_secret_manager_secret.secret["webhook"].id
}

output "gemini_api_key_secret_name" {
  description = "Secret Manager secret for the Gemini API key used by Reconcile (the name only)."
  value       = google_secret_manager_secret.secret["gemini_api_key"].id
}

output "image_repository" {
  description = "Artifact Registry path images are pushed to (REGION-docker.pkg.dev/PROJECT/REPO)."
  value       = local.image_repository
}

output "build_service_account" {
  description = "Resource name of the build account (tests and image; cannot deploy), for gcloud builds submit --service-account."
  value       = google_service_account.build.id
}

output "build_substitutions" {
  description = "cloudbuild.yaml's substitutions, derived from the variables, for gcloud builds submit --substitutions \"SHORT_SHA=...,<this>\" (the build trigger passes the same)."
  value       = join(",", [for k, v in local.build_substitutions : "${k}=${v}"])
}

output "deployer_service_account" {
  description = "Resource name of the rollout account (updates the services' image; cannot create or delete them)."
  value       = google_service_account.deployer.id
}

output "rollout_trigger" {
  description = "Name of the Cloud Build trigger that rolls a pushed image out to every service (gcloud builds list --region REGION --filter=\"buildTriggerId=<its id>\"; approve with gcloud builds approve)."
  value       = google_cloudbuild_trigger.rollout.name
}

output "build_source_staging_dir" {
  description = "Value for gcloud builds submit --gcs-source-staging-dir."
  value       = "gs://${google_storage_bucket.build_source.name}/source"
}

output "service_names" {
  description = "Cloud Run service names by key of local.services: what the rollout trigger updates and gcloud run services update takes."
  value       = { for k, s in google_cloud_run_v2_service.service : k => s.name }
}

output "service_urls" {
  description = "Cloud Run service URLs by key of local.services: webhook (register it with Gemini: lrosink webhooks create --uri ...; public), register (call it with an identity token of a register_invokers member), reconcile (called by Cloud Scheduler), console (open it with gcloud run services proxy, docs/OPERATIONS.md)."
  value       = { for k, s in google_cloud_run_v2_service.service : k => s.uri }
}
