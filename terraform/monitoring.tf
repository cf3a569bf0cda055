# Log-based metrics and alerts. lrosink logs one JSON line per ingest
# decision (message "ingest decision", fields outcome, reason, source,
# operation, and error and failure when it failed), one per webhook answer
# ("webhook answer", status, reason), one per reconcile pass ("reconcile
# pass") and one ERROR line per operator alert ("alert":"stuck",
# "webhook-disabled", "claim-missing"); Cloud Run turns these stdout lines
# into jsonPayload. Filters use structured fields only, never a match on
# error text: deploy_test (TestLogMetricFiltersMatchTheCodesLines) runs the
# code, captures the lines it writes and evaluates every filter on them.
# What each metric means and what to do about it: docs/OPERATIONS.md.

locals {
  # Only lrosink's own services, in case other services in the project log
  # similar lines.
  run_logs  = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=~\"^${var.name_prefix}-(${join("|", keys(local.services))})$\""
  decisions = "${local.run_logs} AND jsonPayload.message=\"ingest decision\""

  # Each policy's documentation links its section as runbook#anchor; the
  # anchors are GitHub's slugs of docs/OPERATIONS.md headings (checked by
  # deploy_test).
  runbook = var.runbook_url
}

# The log-based metrics, one entry each: its description, the filter
# (structured fields only), the chart name, and where it has them its
# labels (key => description, each extracted from jsonPayload.<key>) and
# value_extractor (a distribution of that number; INT64 counts otherwise).
locals {
  log_metrics = { for k, m in {
    # Events dropped by the monotonic reducer (stale, lower rank, regress
    # from a terminal, unknown state), by reason and by source.
    ingest_dropped = {
      description  = "Events the lrosink reducer dropped, by reason (lower-rank, stale-or-equal-update-time, regress-from-terminal, unknown-state) and source."
      filter       = "${local.decisions} AND jsonPayload.outcome=\"dropped\""
      display_name = "lrosink dropped events"
      labels = {
        reason = "Why the reducer dropped the event"
        source = "webhook, reconcile or register"
      }
    }
    # The same terminal state again: Gemini redeliveries, or a webhook
    # arriving after Reconcile settled the operation. Expected; a sudden rise
    # means Gemini retries (our answers were slow or 5xx).
    ingest_duplicates = {
      description  = "Duplicate terminal events (nothing owed, nothing published)."
      filter       = "${local.decisions} AND jsonPayload.outcome=\"duplicate\""
      display_name = "lrosink duplicate events"
    }
    # Operations settled by Reconcile rather than by a webhook: each one is a
    # webhook that was lost, late or never sent (e.g. batch.cancelled).
    reconcile_completions = {
      description  = "Operations completed by the Reconcile poller (their webhook was lost, late or never sent)."
      filter       = "${local.decisions} AND jsonPayload.source=\"reconcile\" AND jsonPayload.outcome=\"completed\""
      display_name = "lrosink completions by Reconcile"
    }
    # Claims seized after their lease ran out or after a failed publish
    # released them: the results message was (re)published by another
    # attempt. A seizure after a crash between publish and DONE means
    # consumers saw the same idempotency_key twice.
    claims_recovered = {
      description  = "Released or lease-expired results claims seized and published again, by reason."
      filter       = "${local.decisions} AND jsonPayload.outcome=\"recovered\""
      display_name = "lrosink recovered claims"
      labels = {
        reason = "lease-expired (a held claim whose lease ran out, e.g. after a crash) or claim-RELEASED (released after a failed publish)"
      }
    }
    # Stuck reports: an operation pending longer than LROSINK_STUCK_AFTER is
    # reported when it becomes stuck, then 1 h, 6 h and 24 h later, then
    # daily. Never auto-closed by lrosink.
    stuck_operations = {
      description  = "Stuck-operation reports (pending longer than LROSINK_STUCK_AFTER): when an operation becomes stuck, then 1 h, 6 h and 24 h later, then daily."
      filter       = "${local.run_logs} AND jsonPayload.alert=\"stuck\""
      display_name = "lrosink stuck operation reports"
    }
    # Unbound-intent reports: an intent (a submission recorded before its
    # Gemini create) bound to no operation past LROSINK_INTENT_GRACE, on the
    # stuck reports' schedule from the end of its grace. Never auto-closed.
    unbound_intents = {
      description  = "Unbound-intent reports (a submission bound to no Gemini operation past LROSINK_INTENT_GRACE): when its grace ends, then 1 h, 6 h and 24 h later, then daily."
      filter       = "${local.run_logs} AND jsonPayload.alert=\"intent-unbound\""
      display_name = "lrosink unbound intent reports"
    }
    # A results publish that failed: the claim was released and the message
    # is owed (the next delivery or reconcile pass retries it). The door
    # marks exactly these lines failure="publish"; the error text also says
    # "publish" in lines that are not publish failures (a missing claim that
    # "lrosink replay republishes", a DONE commit after a publish that
    # worked).
    publish_failures = {
      description  = "Ingest decisions that failed to publish the results message (retried by the next delivery or reconcile pass)."
      filter       = "${local.decisions} AND severity=ERROR AND jsonPayload.failure=\"publish\""
      display_name = "lrosink publish failures"
    }
    # Webhook deliveries refused with 401 (bad signature, unknown secret,
    # clock skew), from the handler's own "webhook answer" line, by reason. A
    # burst right after a secret rotation means the new secret is not in
    # LROSINK_WEBHOOK_SECRETS yet.
    webhook_unauthorized = {
      description  = "Webhook requests answered 401 (signature or token not accepted), by reason."
      filter       = "${local.run_logs} AND jsonPayload.message=\"webhook answer\" AND jsonPayload.status=401"
      display_name = "lrosink webhook 401s"
      labels = {
        reason = "Why the delivery was refused (e.g. no-matching-signature, timestamp-too-old)"
      }
    }
    # Webhook deliveries answered 5xx: the ledger, Pub/Sub or Gemini
    # unavailable, the door past LROSINK_WEBHOOK_DEADLINE, a claim missing.
    # Gemini retries each for 24 h and disables a webhook whose deliveries
    # keep failing (disabled_due_to_failed_deliveries): the alert below
    # fires first. A 503 "stopping" (an instance shutting down: every
    # rollout and scale-in, logged WARNING, retried onto a live instance) is
    # not counted.
    webhook_5xx = {
      description  = "Webhook deliveries answered 5xx (ledger, Pub/Sub or Gemini unavailable, deadline exceeded, claim missing), by reason; not an instance that is stopping."
      filter       = "${local.run_logs} AND jsonPayload.message=\"webhook answer\" AND jsonPayload.status>=500 AND jsonPayload.reason!=\"stopping\""
      display_name = "lrosink webhook 5xx"
      labels = {
        reason = "Why the delivery was answered 5xx (e.g. ledger-unavailable, side-effect-failed, deadline-exceeded, claim-missing, gemini-unavailable)"
      }
    }
    # One line per finished reconcile pass: the absence alert below fires
    # when none arrives (Scheduler stopped, the job was paused or deleted, or
    # every pass fails before its end).
    reconcile_passes = {
      description  = "Reconcile passes that ran to their end."
      filter       = "${local.run_logs} AND jsonPayload.message=\"reconcile pass\""
      display_name = "lrosink reconcile passes"
    }
    # How late the reconciler is: each "reconcile pass" line carries
    # oldest_overdue_seconds, how long the earliest operation it left due has
    # been due (0 when it caught up). A distribution, so the alert below can
    # take the worst pass of a window.
    reconcile_lateness = {
      description     = "Per reconcile pass: seconds the earliest operation it left due had been due (0: caught up)."
      filter          = "${local.run_logs} AND jsonPayload.message=\"reconcile pass\""
      display_name    = "lrosink reconcile lateness"
      value_extractor = "EXTRACT(jsonPayload.oldest_overdue_seconds)"
      unit            = "s"
    }
    # Gemini disabled a project webhook (after failed deliveries, or by
    # hand): nothing is delivered, completions arrive only by polling. One
    # line when Reconcile sees it disabled (again on a new instance while it
    # stays so).
    webhook_disabled = {
      description  = "Project webhooks Gemini reports disabled (completions arrive only by Reconcile polling)."
      filter       = "${local.run_logs} AND jsonPayload.alert=\"webhook-disabled\""
      display_name = "lrosink webhook disabled"
    }
    # A settled operation whose results message may still be owed has lost
    # its claim document: nothing is published until an operator acts.
    claim_missing = {
      description  = "Settled operations whose results claim is gone while the message may be owed (nothing is published until an operator acts)."
      filter       = "${local.run_logs} AND jsonPayload.alert=\"claim-missing\""
      display_name = "lrosink claim missing"
    }
    # Failed Cloud Scheduler attempts to run a reconcile pass.
    reconcile_job_failures = {
      description  = "Cloud Scheduler attempts to call Reconcile that failed (non-2xx, timeout, auth)."
      filter       = "resource.type=\"cloud_scheduler_job\" AND resource.labels.job_id=\"${google_cloud_scheduler_job.reconcile.name}\" AND severity>=ERROR"
      display_name = "lrosink reconcile job failures"
    }
  } : k => merge({ labels = {}, value_extractor = null, unit = "1" }, m) }
}

resource "google_logging_metric" "metric" {
  for_each = local.log_metrics

  project         = var.project_id
  name            = "${var.name_prefix}_${each.key}"
  description     = each.value.description
  filter          = each.value.filter
  value_extractor = each.value.value_extractor

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = each.value.value_extractor == null ? "INT64" : "DISTRIBUTION"
    unit         = each.value.unit
    display_name = each.value.display_name

    dynamic "labels" {
      for_each = each.value.labels
      content {
        key         = labels.key
        value_type  = "STRING"
        description = labels.value
      }
    }
  }

  label_extractors = length(each.value.labels) == 0 ? null : { for k in keys(each.value.labels) : k => "EXTRACT(jsonPayload.${k})" }

  # A distribution's buckets: 1 s to ~18 days in steps of 25 %.
  dynamic "bucket_options" {
    for_each = each.value.value_extractor == null ? [] : [1]
    content {
      exponential_buckets {
        num_finite_buckets = 64
        growth_factor      = 1.25
        scale              = 1
      }
    }
  }

  depends_on = [google_project_service.apis]
}

# Threshold alerts: one per log-based metric an operator must act on. Each
# fires when the metric's sum over `period` exceeds `above`; `section` is
# the docs/OPERATIONS.md heading of its runbook (as a link anchor).
locals {
  threshold_alerts = {
    stuck_operations = {
      display_name = "${var.name_prefix}: stuck operations"
      condition    = "Reconcile reported a stuck operation"
      metric       = google_logging_metric.metric["stuck_operations"].name
      resource     = "cloud_run_revision"
      above        = 0
      period       = "600s"
      auto_close   = "3600s"
      section      = "alert-stuck-operations"
      text         = <<-EOT
        An operation has been pending longer than LROSINK_STUCK_AFTER (${var.stuck_after}).
        lrosink never closes it on its own. Find it with `lrosink ops list --stuck`.
      EOT
    }
    unbound_intents = {
      display_name = "${var.name_prefix}: unbound intents"
      condition    = "Reconcile reported an intent bound to no operation"
      metric       = google_logging_metric.metric["unbound_intents"].name
      resource     = "cloud_run_revision"
      above        = 0
      period       = "600s"
      auto_close   = "3600s"
      section      = "alert-unbound-intents"
      text         = <<-EOT
        A submission recorded its intent but no Gemini operation was bound to it within
        LROSINK_INTENT_GRACE: its operation may exist unknown to lrosink (videos and interactions
        have no list API). Find it with `lrosink ops list --stuck`.
      EOT
    }
    publish_failures = {
      display_name = "${var.name_prefix}: results publish failures"
      condition    = "Results message could not be published"
      metric       = google_logging_metric.metric["publish_failures"].name
      resource     = "cloud_run_revision"
      above        = 0
      period       = "300s"
      auto_close   = "1800s"
      section      = "alert-results-publish-failures"
      text         = <<-EOT
        lrosink failed to publish a results message to ${local.results_topic_path}.
        The claim was released, so the next delivery or reconcile pass retries it.
        Check Pub/Sub health and the publisher grant.
      EOT
    }
    reconcile_job_failures = {
      display_name = "${var.name_prefix}: reconcile job failing"
      condition    = "Cloud Scheduler could not run Reconcile"
      metric       = google_logging_metric.metric["reconcile_job_failures"].name
      resource     = "cloud_scheduler_job"
      above        = 2
      period       = "900s"
      auto_close   = "3600s"
      section      = "alert-reconcile-job-failing"
      text         = <<-EOT
        Several reconcile passes failed in 15 minutes: lost webhooks are not being
        recovered and owed publishes are not retried.
      EOT
    }
    webhook_disabled = {
      display_name = "${var.name_prefix}: project webhook disabled"
      condition    = "Gemini reports a project webhook disabled"
      metric       = google_logging_metric.metric["webhook_disabled"].name
      resource     = "cloud_run_revision"
      above        = 0
      period       = "600s"
      auto_close   = "86400s"
      section      = "alert-project-webhook-disabled"
      text         = <<-EOT
        Gemini disabled a project webhook: nothing is delivered and completions arrive
        only through Reconcile polling (minutes late, not lost). Check `lrosink webhooks list`.
      EOT
    }
    claim_missing = {
      display_name = "${var.name_prefix}: results claim missing"
      condition    = "A settled operation's results claim is gone"
      metric       = google_logging_metric.metric["claim_missing"].name
      resource     = "cloud_run_revision"
      above        = 0
      period       = "600s"
      auto_close   = "86400s"
      section      = "alert-claim-missing"
      text         = <<-EOT
        An operation settled, its results message may still be owed, and its claim
        document is gone: nothing is published for it until an operator acts. The log line
        names the operation.
      EOT
    }
    # Before Gemini gives up: it retries a failing delivery for 24 h with
    # exponential backoff (the schedule is unpublished; Standard Webhooks'
    # example is immediate, 5 s, 5 m, 30 m, 2 h, ...) and disables a webhook
    # that keeps failing after an undocumented number of failures
    # (docs/GEMINI.md). More than 2 answers >= 500 in 5 minutes is a second
    # failing delivery, or one past its first retries: the alert fires while
    # Gemini is still in its quick retries, hours before it stops.
    webhook_5xx = {
      display_name = "${var.name_prefix}: webhook deliveries failing (5xx)"
      condition    = "Webhook deliveries answered 5xx"
      metric       = google_logging_metric.metric["webhook_5xx"].name
      resource     = "cloud_run_revision"
      above        = 2
      period       = "300s"
      auto_close   = "1800s"
      section      = "alert-webhook-deliveries-failing-5xx"
      text         = <<-EOT
        The Webhook answered more than 2 deliveries with 5xx in 5 minutes (the reason label says
        why: the ledger, Pub/Sub or Gemini unavailable, the deadline exceeded, a claim missing).
        Gemini retries them, and disables a webhook whose deliveries keep failing: fix the cause
        before it does.
      EOT
    }
    webhook_unauthorized = {
      display_name = "${var.name_prefix}: webhook deliveries refused"
      condition    = "Webhook deliveries answered 401"
      metric       = google_logging_metric.metric["webhook_unauthorized"].name
      resource     = "cloud_run_revision"
      above        = 5
      period       = "600s"
      auto_close   = "3600s"
      section      = "alert-webhook-deliveries-refused"
      text         = <<-EOT
        The Webhook refused more than 5 deliveries in 10 minutes (401: signature or token
        not accepted). After a secret rotation: the new secret is not accepted yet. Gemini
        retries refused deliveries and disables a webhook that keeps failing.
      EOT
    }
  }
}

resource "google_monitoring_alert_policy" "threshold" {
  for_each = local.threshold_alerts

  project               = var.project_id
  display_name          = each.value.display_name
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = each.value.condition

    condition_threshold {
      filter          = "resource.type=\"${each.value.resource}\" AND metric.type=\"logging.googleapis.com/user/${each.value.metric}\""
      comparison      = "COMPARISON_GT"
      threshold_value = each.value.above
      duration        = "0s"

      aggregations {
        alignment_period     = each.value.period
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = each.value.auto_close
  }

  documentation {
    mime_type = "text/markdown"
    content   = "${each.value.text}\nRunbook: ${local.runbook}#${each.value.section}"
  }
}

# The reconciler is falling behind: due checks run later than
# var.reconcile_late_after (default five 2-minute passes). Not an error
# anywhere: a Gemini budget, MaxOperations or a deadline too small for the
# due set shows only here.
resource "google_monitoring_alert_policy" "reconcile_late" {
  project               = var.project_id
  display_name          = "${var.name_prefix}: reconcile falling behind"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "Due checks overdue by more than ${var.reconcile_late_after}"

    condition_threshold {
      filter          = "resource.type=\"cloud_run_revision\" AND metric.type=\"logging.googleapis.com/user/${google_logging_metric.metric["reconcile_lateness"].name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = tonumber(trimsuffix(var.reconcile_late_after, "s"))
      duration        = "0s"

      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_PERCENTILE_99"
        cross_series_reducer = "REDUCE_MAX"
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
    content   = "Reconcile passes leave due operations unchecked for more than ${var.reconcile_late_after} (schedule ${var.reconcile_schedule}): completions whose webhook was lost arrive that much later.\nRunbook: ${local.runbook}#alert-reconcile-falling-behind"
  }
}

# No reconcile pass for var.reconcile_absent_after: nothing recovers lost
# webhooks, retries owed publishes or reports stuck operations, and the
# failure alert above cannot fire when Scheduler makes no attempt at all
# (job paused or deleted, Cloud Scheduler API disabled).
resource "google_monitoring_alert_policy" "reconcile_absent" {
  project               = var.project_id
  display_name          = "${var.name_prefix}: no reconcile pass"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "No reconcile pass logged for ${var.reconcile_absent_after}"

    condition_absent {
      filter   = "resource.type=\"cloud_run_revision\" AND metric.type=\"logging.googleapis.com/user/${google_logging_metric.metric["reconcile_passes"].name}\""
      duration = var.reconcile_absent_after

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
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "No reconcile pass ran to its end for ${var.reconcile_absent_after} (schedule ${var.reconcile_schedule}).\nRunbook: ${local.runbook}#alert-no-reconcile-pass"
  }
}

# Shard requests failing, from Pub/Sub's own metrics of the fan-out push
# subscription (fanout.tf): pushes Reconcile answered other than 2xx (503:
# the ledger could not be queried; 400: not a shard request; 429: no free
# instance; 403: the push identity lost run.invoker, which reaches no
# lrosink log line), and requests dead-lettered after 5 attempts (a range
# that missed its pass five times). Pub/Sub counts each push by
# response_class, "ack" for a 2xx
# (https://cloud.google.com/pubsub/docs/push-troubleshooting), and the
# messages it forwards to the dead-letter topic
# (https://cloud.google.com/pubsub/docs/monitoring). With one shard nothing
# is published, and nothing fires.
resource "google_monitoring_alert_policy" "reconcile_fanout" {
  project               = var.project_id
  display_name          = "${var.name_prefix}: reconcile shard requests failing"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "Shard requests dead-lettered"

    condition_threshold {
      filter          = "resource.type=\"pubsub_subscription\" AND resource.labels.subscription_id=\"${google_pubsub_subscription.reconcile_fanout.name}\" AND metric.type=\"pubsub.googleapis.com/subscription/dead_letter_message_count\""
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

  # A single 429 or 503 is retried 10 to 60 s later and usually succeeds:
  # more than 3 failed pushes in 10 minutes is a shard failing, not a blip.
  conditions {
    display_name = "Shard pushes answered other than 2xx"

    condition_threshold {
      filter          = "resource.type=\"pubsub_subscription\" AND resource.labels.subscription_id=\"${google_pubsub_subscription.reconcile_fanout.name}\" AND metric.type=\"pubsub.googleapis.com/subscription/push_request_count\" AND metric.labels.response_class!=\"ack\""
      comparison      = "COMPARISON_GT"
      threshold_value = 3
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
    content   = "Reconcile shard requests are failing (pushes answered other than 2xx, or dead-lettered after 5 attempts): their ranges' due operations wait for the next tick, later each time.\nRunbook: ${local.runbook}#alert-reconcile-shard-requests-failing"
  }
}

