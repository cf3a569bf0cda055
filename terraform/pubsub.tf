# Results: one message per operation's first terminal state (CONTRACT.md §6),
# ordering key = the operation's canonical name, attribute idempotency_key.
resource "google_pubsub_topic" "results" {
  project = var.project_id
  name    = local.names.results_topic

  # Keep published messages for a week, so a new or repaired subscription
  # can be seeked back (gcloud pubsub subscriptions seek --time=...).
  message_retention_duration = "604800s"

  # It keeps a week of results for seeking back: `terraform destroy` must
  # not drop them (docs/DEPLOY.md, "Tearing down").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [google_project_service.apis]
}

# Where the worker subscription moves messages it failed to process
# dead_letter_max_delivery_attempts times.
resource "google_pubsub_topic" "dead_letter" {
  project = var.project_id
  name    = "${local.names.results_topic}-dead-letter"

  message_retention_duration = "604800s"

  # A week of dead letters, as the results topic keeps its messages.
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [google_project_service.apis]
}

# A topic without a subscription drops what is published to it: this one
# keeps dead letters for inspection and replay (docs/OPERATIONS.md).
resource "google_pubsub_subscription" "dead_letter" {
  project = var.project_id
  name    = "${local.names.results_topic}-dead-letter-hold"
  topic   = google_pubsub_topic.dead_letter.id

  message_retention_duration = "604800s"
  retain_acked_messages      = true
  ack_deadline_seconds       = 60

  expiration_policy {
    ttl = ""
  }

  # Holds undelivered dead letters: `terraform destroy` must not drop them
  # (docs/DEPLOY.md, "Tearing down").
  lifecycle {
    prevent_destroy = true
  }
}

# Example pull subscription for a downstream worker (examples/worker).
resource "google_pubsub_subscription" "results" {
  project = var.project_id
  name    = local.names.results_subscription
  topic   = google_pubsub_topic.results.id

  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"

  # Exactly-once applies to pull/StreamingPull only: an acked message
  # (AckWithResult succeeded) is not redelivered. It does not merge two
  # publishes of the same result (a crash after publish and before the
  # ledger's DONE commit republishes with the same idempotency_key), so the
  # worker still dedupes on that attribute.
  enable_exactly_once_delivery = true

  # lrosink publishes with ordering key = operation name; a worker sees an
  # operation's messages (the completion, then any replays) in order.
  enable_message_ordering = true

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.dead_letter_max_delivery_attempts
  }

  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  # Never delete the subscription for inactivity (default: 31 days).
  expiration_policy {
    ttl = ""
  }

  # Holds the results not yet acknowledged by the worker: `terraform
  # destroy` must not drop them (docs/DEPLOY.md, "Tearing down").
  lifecycle {
    prevent_destroy = true
  }

  # The service agent must be able to move messages before the first one
  # dead-letters.
  depends_on = [
    google_pubsub_topic_iam_member.dead_letter_publisher,
  ]
}

locals {
  pubsub_service_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"

  # Every subscription that dead-letters (its dead_letter_policy), with its
  # dead-letter topic. The subscriptions are named, not referenced: each
  # waits for its topic's grant (depends_on), so a reference back would be
  # a cycle.
  dead_letters = {
    results = {
      topic        = google_pubsub_topic.dead_letter.name
      subscription = local.names.results_subscription
    }
    reconcile_fanout = {
      topic        = google_pubsub_topic.reconcile_fanout_dead_letter.name
      subscription = local.reconcile_fanout_subscription
    }
  }
}

# Dead-lettering is done by the Pub/Sub service agent: it must publish to
# the dead-letter topic and acknowledge (subscriber) on the source
# subscription. On a new project the agent may not exist yet when these
# grants are applied ("Service account service-NNN@gcp-sa-pubsub... does not
# exist"): docs/DEPLOY.md creates it first (gcloud beta services identity
# create --service=pubsub.googleapis.com).
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  for_each = local.dead_letters

  project = var.project_id
  topic   = each.value.topic
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_service_agent
}

resource "google_pubsub_subscription_iam_member" "dead_letter_subscriber" {
  for_each = local.dead_letters

  project      = var.project_id
  subscription = each.value.subscription
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_service_agent

  depends_on = [
    google_pubsub_subscription.results,
    google_pubsub_subscription.reconcile_fanout,
  ]
}

resource "google_pubsub_subscription_iam_member" "results_subscribers" {
  for_each = toset(var.results_subscribers)

  project      = var.project_id
  subscription = google_pubsub_subscription.results.name
  role         = "roles/pubsub.subscriber"
  member       = each.value
}
