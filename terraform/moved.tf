# Addresses before the services became one list (local.services, run.tf).
# `moved` tells Terraform these are the same objects under new addresses, so
# applying this version to an existing deployment updates them in place
# instead of destroying and re-creating them (a service re-created would get
# a new URL: Gemini's webhook and Cloud Scheduler would point at nothing).

moved {
  from = google_cloud_run_v2_service.webhook
  to   = google_cloud_run_v2_service.service["webhook"]
}

moved {
  from = google_cloud_run_v2_service.reconcile
  to   = google_cloud_run_v2_service.service["reconcile"]
}

moved {
  from = google_cloud_run_v2_service.register
  to   = google_cloud_run_v2_service.service["register"]
}

moved {
  from = google_cloud_run_v2_service.console
  to   = google_cloud_run_v2_service.service["console"]
}

moved {
  from = google_service_account.webhook
  to   = google_service_account.runtime["webhook"]
}

moved {
  from = google_service_account.reconcile
  to   = google_service_account.runtime["reconcile"]
}

moved {
  from = google_service_account.register
  to   = google_service_account.runtime["register"]
}

moved {
  from = google_service_account.console
  to   = google_service_account.runtime["console"]
}

moved {
  from = google_cloud_run_v2_service_iam_member.webhook_public
  to   = google_cloud_run_v2_service_iam_member.invoker["webhook/allUsers"]
}

moved {
  from = google_cloud_run_v2_service_iam_member.reconcile_scheduler
  to   = google_cloud_run_v2_service_iam_member.invoker["reconcile/scheduler"]
}

moved {
  from = google_monitoring_alert_policy.stuck_operations
  to   = google_monitoring_alert_policy.threshold["stuck_operations"]
}

moved {
  from = google_monitoring_alert_policy.publish_failures
  to   = google_monitoring_alert_policy.threshold["publish_failures"]
}

moved {
  from = google_monitoring_alert_policy.reconcile_job_failures
  to   = google_monitoring_alert_policy.threshold["reconcile_job_failures"]
}

moved {
  from = google_monitoring_alert_policy.webhook_disabled
  to   = google_monitoring_alert_policy.threshold["webhook_disabled"]
}

moved {
  from = google_monitoring_alert_policy.claim_missing
  to   = google_monitoring_alert_policy.threshold["claim_missing"]
}

moved {
  from = google_secret_manager_secret.webhook
  to   = google_secret_manager_secret.secret["webhook"]
}

moved {
  from = google_secret_manager_secret.gemini_api_key
  to   = google_secret_manager_secret.secret["gemini_api_key"]
}

# The Register and Console invoker grants were keyed by member; a moved
# block cannot name keys that come from a variable. `removed` with
# destroy = false forgets them without revoking anything, and the new
# google_cloud_run_v2_service_iam_member.invoker["register/<member>"]
# grants (the same role to the same members) are created over them: an
# _iam_member create of a binding that exists is a no-op, so no invoker
# loses access in between. (Destroying the old ones instead could run
# after the new ones were created and revoke the binding both manage.)
removed {
  from = google_cloud_run_v2_service_iam_member.register_invokers

  lifecycle {
    destroy = false
  }
}

removed {
  from = google_cloud_run_v2_service_iam_member.console_invokers

  lifecycle {
    destroy = false
  }
}
