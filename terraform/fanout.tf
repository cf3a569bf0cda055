# Fan-out of a sharded reconcile tick (docs/ARCHITECTURE.md, "Sharded
# passes"): with var.reconcile_shards = N > 1, the Scheduler's call to
# Reconcile is the coordinator: it publishes N shard requests (one bucket
# range each) to the fan-out topic and runs the shared duties itself; the
# push subscription below delivers each request back to the Reconcile
# service, where it runs that range's pass on an instance of its own.
#
# Pub/Sub push with an OIDC token, not Cloud Tasks: Pub/Sub already runs
# here (results), push to Cloud Run with an OIDC token is a documented path,
# and nack + retry backoff + dead-letter is the retry a failed shard needs.
# The resources exist whatever var.reconcile_shards is (with 1 nothing is
# published), so changing the shard count never creates or destroys them.
#
# Nothing here holds data worth keeping: a shard request is worthless once
# the next tick has published its range again, so neither the topic nor the
# subscription has prevent_destroy.

locals {
  reconcile_fanout_topic_path = "projects/${var.project_id}/topics/${google_pubsub_topic.reconcile_fanout.name}"

  # Pub/Sub waits this long for the push's answer before redelivering: at
  # least the pass deadline (LROSINK_RECONCILE_DEADLINE, below the attempt
  # deadline), at most Pub/Sub's 600 s (the precondition below keeps the
  # attempt deadline within it when sharded).
  reconcile_fanout_ack_seconds = min(600, local.reconcile_attempt_seconds)

  # Named here: the dead-letter grants (pubsub.tf) name it too.
  reconcile_fanout_subscription = "${var.name_prefix}-reconcile-fanout-push"
}

resource "google_pubsub_topic" "reconcile_fanout" {
  project = var.project_id
  name    = "${var.name_prefix}-reconcile-fanout"

  depends_on = [google_project_service.apis]
}

# Where a shard request goes after max_delivery_attempts nacks (a poison
# request answered 400, or a range whose pass kept failing). No
# subscription: the topic keeps them a day, so an operator can attach one
# and seek back to read them (docs/OPERATIONS.md, "A failing shard").
resource "google_pubsub_topic" "reconcile_fanout_dead_letter" {
  project = var.project_id
  name    = "${var.name_prefix}-reconcile-fanout-dead-letter"

  message_retention_duration = "86400s"

  depends_on = [google_project_service.apis]
}

# The identity of the push subscription's OIDC token: it may invoke the
# Reconcile service (local.services.reconcile.invokers, run.tf) and nothing
# else.
resource "google_service_account" "reconcile_fanout" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-fanout"
  display_name = "lrosink Reconcile shard push (Pub/Sub)"
  description  = "Identity of the reconcile fan-out push subscription; may only invoke the Reconcile service"

  depends_on = [google_project_service.apis]
}

# Pub/Sub mints the push's OIDC token as that account: its service agent
# needs token-creator on it (required for projects created on or before
# 2021-04-08, harmless after; https://cloud.google.com/pubsub/docs/push#setting_up_for_push_authentication).
# Granted on the one account, not the project.
resource "google_service_account_iam_member" "reconcile_fanout_token_creator" {
  service_account_id = google_service_account.reconcile_fanout.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_service_agent
}

resource "google_pubsub_subscription" "reconcile_fanout" {
  project = var.project_id
  name    = local.reconcile_fanout_subscription
  topic   = google_pubsub_topic.reconcile_fanout.id

  ack_deadline_seconds = local.reconcile_fanout_ack_seconds

  # A request not answered 2xx within 10 minutes of its publication is
  # dropped (10 minutes is Pub/Sub's minimum): by then later ticks have
  # published its range again.
  message_retention_duration = "600s"

  push_config {
    # FUNCTION_TARGET=Reconcile serves the function at every path.
    push_endpoint = google_cloud_run_v2_service.service["reconcile"].uri

    # Cloud Run checks the token's audience against the service URL and the
    # account's run.invoker grant, as for the Scheduler's token.
    oidc_token {
      service_account_email = google_service_account.reconcile_fanout.email
      audience              = google_cloud_run_v2_service.service["reconcile"].uri
    }
  }

  # A nack (503: the ledger could not be queried; 400: not a shard
  # request) is redelivered after this backoff.
  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "60s"
  }

  # A request nacked this many times (Pub/Sub's minimum) leaves the
  # subscription: a poison request cannot loop.
  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.reconcile_fanout_dead_letter.id
    max_delivery_attempts = 5
  }

  expiration_policy {
    ttl = ""
  }

  lifecycle {
    precondition {
      condition     = var.reconcile_shards == 1 || local.reconcile_attempt_seconds <= 600
      error_message = "With reconcile_shards > 1, reconcile_attempt_deadline must be at most 600s: a shard pass must answer within the push subscription's ack deadline (at most 600 s), or Pub/Sub redelivers it while it runs."
    }
  }

  # Reconcile (the coordinator) publishes the shard requests through its
  # grant from local.services (iam.tf); the service agent dead-letters
  # through local.dead_letters (pubsub.tf).
  depends_on = [
    google_cloud_run_v2_service_iam_binding.invoker,
    google_service_account_iam_member.reconcile_fanout_token_creator,
    google_pubsub_topic_iam_member.dead_letter_publisher,
  ]
}
