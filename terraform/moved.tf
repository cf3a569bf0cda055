# Earlier addresses of objects a deployment already has. `moved` tells
# Terraform these are the same objects under new addresses, so applying this
# version to an existing deployment updates them in place instead of
# destroying and re-creating them (a service re-created would get a new URL:
# Gemini's webhook and Cloud Scheduler would point at nothing). deploy_test
# (TestMovedBlocksCoverEveryRenamedAddress) fails when an address of an
# earlier deployment is left to be destroyed.
#
# Keep them all: a deployment may upgrade from any earlier version.

# Before the services became one list (local.services, run.tf).

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

# Invoker grants were _iam_member resources: first one per service
# (webhook_public, reconcile_scheduler, then register_invokers and
# console_invokers keyed by member), then one per (service, invoker)
# (invoker["service/name"]). They are one authoritative
# google_cloud_run_v2_service_iam_binding.invoker per service now (run.tf),
# which moved cannot express (another resource type). `removed` with
# destroy = false forgets them without revoking anything, and each
# binding, created with the same members, takes the role over: no invoker
# loses access in between. (Destroying them instead could run after the
# binding was created and remove members it holds.)
removed {
  from = google_cloud_run_v2_service_iam_member.invoker

  lifecycle {
    destroy = false
  }
}

removed {
  from = google_cloud_run_v2_service_iam_member.webhook_public

  lifecycle {
    destroy = false
  }
}

removed {
  from = google_cloud_run_v2_service_iam_member.reconcile_scheduler

  lifecycle {
    destroy = false
  }
}

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

# Before the log metrics, TTL fields, grants and dead-letter setups were
# derived from one list each (issue 51): local.log_metrics (monitoring.tf),
# local.ttl_fields (firestore.tf), local.services' ledger, publishes and
# secrets (iam.tf), local.dead_letters (pubsub.tf).

moved {
  from = google_logging_metric.ingest_dropped
  to   = google_logging_metric.metric["ingest_dropped"]
}

moved {
  from = google_logging_metric.ingest_duplicates
  to   = google_logging_metric.metric["ingest_duplicates"]
}

moved {
  from = google_logging_metric.reconcile_completions
  to   = google_logging_metric.metric["reconcile_completions"]
}

moved {
  from = google_logging_metric.claims_recovered
  to   = google_logging_metric.metric["claims_recovered"]
}

moved {
  from = google_logging_metric.stuck_operations
  to   = google_logging_metric.metric["stuck_operations"]
}

moved {
  from = google_logging_metric.publish_failures
  to   = google_logging_metric.metric["publish_failures"]
}

moved {
  from = google_logging_metric.webhook_unauthorized
  to   = google_logging_metric.metric["webhook_unauthorized"]
}

moved {
  from = google_logging_metric.reconcile_passes
  to   = google_logging_metric.metric["reconcile_passes"]
}

moved {
  from = google_logging_metric.reconcile_lateness
  to   = google_logging_metric.metric["reconcile_lateness"]
}

moved {
  from = google_logging_metric.webhook_disabled
  to   = google_logging_metric.metric["webhook_disabled"]
}

moved {
  from = google_logging_metric.claim_missing
  to   = google_logging_metric.metric["claim_missing"]
}

moved {
  from = google_logging_metric.reconcile_job_failures
  to   = google_logging_metric.metric["reconcile_job_failures"]
}

moved {
  from = google_firestore_field.claims_expire_at
  to   = google_firestore_field.ttl["claims"]
}

moved {
  from = google_firestore_field.operations_expire_at
  to   = google_firestore_field.ttl["operations"]
}

moved {
  from = google_firestore_field.deliveries_expire_at
  to   = google_firestore_field.ttl["deliveries"]
}

moved {
  from = google_firestore_field.processed_expire_at[0]
  to   = google_firestore_field.ttl["processed"]
}

moved {
  from = google_project_iam_member.datastore_user["webhook"]
  to   = google_project_iam_member.ledger["webhook"]
}

moved {
  from = google_project_iam_member.datastore_user["reconcile"]
  to   = google_project_iam_member.ledger["reconcile"]
}

moved {
  from = google_project_iam_member.datastore_user["register"]
  to   = google_project_iam_member.ledger["register"]
}

moved {
  from = google_project_iam_member.console_datastore_viewer
  to   = google_project_iam_member.ledger["console"]
}

moved {
  from = google_pubsub_topic_iam_member.results_publisher["webhook"]
  to   = google_pubsub_topic_iam_member.publisher["webhook/results"]
}

moved {
  from = google_pubsub_topic_iam_member.results_publisher["reconcile"]
  to   = google_pubsub_topic_iam_member.publisher["reconcile/results"]
}

moved {
  from = google_pubsub_topic_iam_member.reconcile_fanout_publisher
  to   = google_pubsub_topic_iam_member.publisher["reconcile/reconcile_fanout"]
}

moved {
  from = google_secret_manager_secret_iam_member.webhook_secrets
  to   = google_secret_manager_secret_iam_member.accessor["webhook/webhook"]
}

moved {
  from = google_secret_manager_secret_iam_member.gemini_api_key
  to   = google_secret_manager_secret_iam_member.accessor["reconcile/gemini_api_key"]
}

moved {
  from = google_secret_manager_secret_iam_member.gemini_api_key_webhook
  to   = google_secret_manager_secret_iam_member.accessor["webhook/gemini_api_key"]
}

moved {
  from = google_pubsub_topic_iam_member.dead_letter_publisher
  to   = google_pubsub_topic_iam_member.dead_letter_publisher["results"]
}

moved {
  from = google_pubsub_topic_iam_member.reconcile_fanout_dead_letter_publisher
  to   = google_pubsub_topic_iam_member.dead_letter_publisher["reconcile_fanout"]
}

moved {
  from = google_pubsub_subscription_iam_member.dead_letter_subscriber
  to   = google_pubsub_subscription_iam_member.dead_letter_subscriber["results"]
}

moved {
  from = google_pubsub_subscription_iam_member.reconcile_fanout_dead_letter_subscriber
  to   = google_pubsub_subscription_iam_member.dead_letter_subscriber["reconcile_fanout"]
}
