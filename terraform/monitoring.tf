# Log-based metrics and alerts. lrosink logs one JSON line per ingest
# decision (message "ingest decision", fields outcome, reason, source,
# operation, and error when it failed) and one ERROR line per stuck operation
# per reconcile pass ("alert":"stuck"); Cloud Run turns these stdout lines
# into jsonPayload. What each metric means and what to do about it:
# docs/OPERATIONS.md.

locals {
  # Only lrosink's own services, in case other services in the project log
  # similar lines.
  run_logs  = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=~\"^${var.name_prefix}-(webhook|reconcile|register)$\""
  decisions = "${local.run_logs} AND jsonPayload.message=\"ingest decision\""

  runbook = "docs/OPERATIONS.md of the lrosink repository"
}

# Events dropped by the monotonic reducer (stale, lower rank, regress from a
# terminal, unknown state), by reason and by source.
resource "google_logging_metric" "ingest_dropped" {
  project     = var.project_id
  name        = "${var.name_prefix}_ingest_dropped"
  description = "Events the lrosink reducer dropped, by reason (lower-rank, stale-or-equal-update-time, regress-from-terminal, unknown-state) and source."
  filter      = "${local.decisions} AND jsonPayload.outcome=\"dropped\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "lrosink dropped events"

    labels {
      key         = "reason"
      value_type  = "STRING"
      description = "Why the reducer dropped the event"
    }

    labels {
      key         = "source"
      value_type  = "STRING"
      description = "webhook, reconcile or register"
    }
  }

  label_extractors = {
    reason = "EXTRACT(jsonPayload.reason)"
    source = "EXTRACT(jsonPayload.source)"
  }

  depends_on = [google_project_service.apis]
}

# The same terminal state again: Gemini redeliveries, or a webhook arriving
# after Reconcile settled the operation. Expected; a sudden rise means
# Gemini retries (our answers were slow or 5xx).
resource "google_logging_metric" "ingest_duplicates" {
  project     = var.project_id
  name        = "${var.name_prefix}_ingest_duplicates"
  description = "Duplicate terminal events (nothing owed, nothing published)."
  filter      = "${local.decisions} AND jsonPayload.outcome=\"duplicate\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "lrosink duplicate events"
  }

  depends_on = [google_project_service.apis]
}

# Operations settled by Reconcile rather than by a webhook: each one is a
# webhook that was lost, late or never sent (e.g. batch.cancelled).
resource "google_logging_metric" "reconcile_completions" {
  project     = var.project_id
  name        = "${var.name_prefix}_reconcile_completions"
  description = "Operations completed by the Reconcile poller (their webhook was lost, late or never sent)."
  filter      = "${local.decisions} AND jsonPayload.source=\"reconcile\" AND jsonPayload.outcome=\"completed\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "lrosink completions by Reconcile"
  }

  depends_on = [google_project_service.apis]
}

# Claims seized after their lease ran out or after a failed publish released
# them: the results message was (re)published by another attempt. A seizure
# after a crash between publish and DONE means consumers saw the same
# idempotency_key twice.
resource "google_logging_metric" "claims_recovered" {
  project     = var.project_id
  name        = "${var.name_prefix}_claims_recovered"
  description = "Released or lease-expired results claims seized and published again, by reason."
  filter      = "${local.decisions} AND jsonPayload.outcome=\"recovered\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "lrosink recovered claims"

    labels {
      key         = "reason"
      value_type  = "STRING"
      description = "lease-expired or released"
    }
  }

  label_extractors = {
    reason = "EXTRACT(jsonPayload.reason)"
  }

  depends_on = [google_project_service.apis]
}

# Stuck reports: an operation pending longer than LROSINK_STUCK_AFTER is
# reported when it becomes stuck, then 1 h, 6 h and 24 h later, then daily.
# Never auto-closed by lrosink.
resource "google_logging_metric" "stuck_operations" {
  project     = var.project_id
  name        = "${var.name_prefix}_stuck_operations"
  description = "Stuck-operation reports (pending longer than LROSINK_STUCK_AFTER): when an operation becomes stuck, then 1 h, 6 h and 24 h later, then daily."
  filter      = "${local.run_logs} AND jsonPayload.alert=\"stuck\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "lrosink stuck operation reports"
  }

  depends_on = [google_project_service.apis]
}

# A results publish that failed: the claim was released and the message is
# owed (the next delivery or reconcile pass retries it).
resource "google_logging_metric" "publish_failures" {
  project     = var.project_id
  name        = "${var.name_prefix}_publish_failures"
  description = "Ingest decisions that failed to publish the results message (retried by the next delivery or reconcile pass)."
  filter      = "${local.decisions} AND severity=ERROR AND jsonPayload.error=~\"publish\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "lrosink publish failures"
  }

  depends_on = [google_project_service.apis]
}

# Webhook deliveries refused with 401 (bad signature, unknown secret, clock
# skew). A burst right after a secret rotation means the new secret is not
# in LROSINK_WEBHOOK_SECRETS yet.
resource "google_logging_metric" "webhook_unauthorized" {
  project     = var.project_id
  name        = "${var.name_prefix}_webhook_unauthorized"
  description = "Webhook requests answered 401 (signature or token not accepted)."
  filter      = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"${google_cloud_run_v2_service.webhook.name}\" AND log_id(\"run.googleapis.com/requests\") AND httpRequest.status=401"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "lrosink webhook 401s"
  }
}

# Gemini disabled a project webhook (after failed deliveries, or by hand):
# nothing is delivered, completions arrive only by polling. One line when
# Reconcile sees it disabled (again on a new instance while it stays so).
resource "google_logging_metric" "webhook_disabled" {
  project     = var.project_id
  name        = "${var.name_prefix}_webhook_disabled"
  description = "Project webhooks Gemini reports disabled (completions arrive only by Reconcile polling)."
  filter      = "${local.run_logs} AND jsonPayload.alert=\"webhook-disabled\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "lrosink webhook disabled"
  }

  depends_on = [google_project_service.apis]
}

# A settled operation whose results message may still be owed has lost its
# claim document: nothing is published until an operator acts.
resource "google_logging_metric" "claim_missing" {
  project     = var.project_id
  name        = "${var.name_prefix}_claim_missing"
  description = "Settled operations whose results claim is gone while the message may be owed (nothing is published until an operator acts)."
  filter      = "${local.run_logs} AND jsonPayload.alert=\"claim-missing\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "lrosink claim missing"
  }

  depends_on = [google_project_service.apis]
}

# Failed Cloud Scheduler attempts to run a reconcile pass.
resource "google_logging_metric" "reconcile_job_failures" {
  project     = var.project_id
  name        = "${var.name_prefix}_reconcile_job_failures"
  description = "Cloud Scheduler attempts to call Reconcile that failed (non-2xx, timeout, auth)."
  filter      = "resource.type=\"cloud_scheduler_job\" AND resource.labels.job_id=\"${google_cloud_scheduler_job.reconcile.name}\" AND severity>=ERROR"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "lrosink reconcile job failures"
  }
}

resource "google_monitoring_alert_policy" "stuck_operations" {
  project               = var.project_id
  display_name          = "lrosink: stuck operations"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "Reconcile reported a stuck operation"

    condition_threshold {
      filter          = "resource.type=\"cloud_run_revision\" AND metric.type=\"logging.googleapis.com/user/${google_logging_metric.stuck_operations.name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      An operation has been pending longer than LROSINK_STUCK_AFTER (${var.stuck_after}).
      lrosink never closes it on its own. Find it with `lrosink ops list --stuck`,
      then follow "Stuck operations" in ${local.runbook}.
    EOT
  }
}

resource "google_monitoring_alert_policy" "publish_failures" {
  project               = var.project_id
  display_name          = "lrosink: results publish failures"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "Results message could not be published"

    condition_threshold {
      filter          = "resource.type=\"cloud_run_revision\" AND metric.type=\"logging.googleapis.com/user/${google_logging_metric.publish_failures.name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "1800s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      lrosink failed to publish a results message to ${local.results_topic_path}.
      The claim was released, so the next delivery or reconcile pass retries it.
      Check Pub/Sub health and the publisher grant; see "Publish failures" in ${local.runbook}.
    EOT
  }
}

resource "google_monitoring_alert_policy" "reconcile_job_failures" {
  project               = var.project_id
  display_name          = "lrosink: reconcile job failing"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "Cloud Scheduler could not run Reconcile"

    condition_threshold {
      filter          = "resource.type=\"cloud_scheduler_job\" AND metric.type=\"logging.googleapis.com/user/${google_logging_metric.reconcile_job_failures.name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 2
      duration        = "0s"

      aggregations {
        alignment_period     = "900s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      Several reconcile passes failed in 15 minutes: lost webhooks are not being
      recovered and owed publishes are not retried. See "Reconcile job failing" in ${local.runbook}.
    EOT
  }
}

resource "google_monitoring_alert_policy" "webhook_disabled" {
  project               = var.project_id
  display_name          = "lrosink: project webhook disabled"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "Gemini reports a project webhook disabled"

    condition_threshold {
      filter          = "resource.type=\"cloud_run_revision\" AND metric.type=\"logging.googleapis.com/user/${google_logging_metric.webhook_disabled.name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "86400s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      Gemini disabled a project webhook: nothing is delivered and completions arrive
      only through Reconcile polling (minutes late, not lost). Check `lrosink webhooks list`,
      then follow "Alert: project webhook disabled" in ${local.runbook}.
    EOT
  }
}

resource "google_monitoring_alert_policy" "claim_missing" {
  project               = var.project_id
  display_name          = "lrosink: results claim missing"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "A settled operation's results claim is gone"

    condition_threshold {
      filter          = "resource.type=\"cloud_run_revision\" AND metric.type=\"logging.googleapis.com/user/${google_logging_metric.claim_missing.name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "86400s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      An operation settled, its results message may still be owed, and its claim
      document is gone: nothing is published for it until an operator acts. The log line
      names the operation; follow "Alert: claim missing" in ${local.runbook}.
    EOT
  }
}
