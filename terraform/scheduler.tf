# Calls Reconcile every var.reconcile_schedule: the safety net for lost,
# late or never-sent webhooks (e.g. *.cancelled) and for publishes owed after
# a crash. Each call is one bounded pass; a missed or failed tick only delays
# recovery to the next one.
resource "google_cloud_scheduler_job" "reconcile" {
  project     = var.project_id
  region      = var.region
  name        = "${var.name_prefix}-reconcile"
  description = "POST to the lrosink Reconcile service (one bounded reconcile pass)"
  schedule    = var.reconcile_schedule
  time_zone   = var.reconcile_time_zone

  attempt_deadline = var.reconcile_attempt_deadline

  # One quick retry of a failed pass; anything longer would overlap the next
  # tick, which is the real retry.
  retry_config {
    retry_count          = 1
    min_backoff_duration = "10s"
    max_backoff_duration = "60s"
    max_doublings        = 2
  }

  http_target {
    uri         = google_cloud_run_v2_service.service["reconcile"].uri
    http_method = "POST"

    # Cloud Run checks the token's audience against the service URL and the
    # account's run.invoker grant (run.tf, local.services.reconcile.invokers).
    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = google_cloud_run_v2_service.service["reconcile"].uri
    }
  }

  depends_on = [
    google_project_service.apis,
    google_cloud_run_v2_service_iam_binding.invoker,
  ]
}
