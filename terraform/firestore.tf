# The ledger: collections `operations` (one document per operation) and
# `claims` (one per idempotency key), see internal/ledger/fsledger.
resource "google_firestore_database" "default" {
  project     = var.project_id
  name        = local.names.firestore_database
  location_id = coalesce(var.firestore_location, var.region)
  type        = "FIRESTORE_NATIVE"

  # OPTIMISTIC, not PESSIMISTIC: lrosink never reads inside a transaction.
  # It reads an operation once, decides with a pure reducer, and commits
  # fenced by a precondition (update only if the document's update time is
  # still the one read; create only if absent). Optimistic mode takes no read
  # locks, so concurrent webhook deliveries and reconcile passes never wait
  # on each other; contention surfaces as a failed precondition (or Aborted
  # commit), which the ingest door handles by re-reading and deciding again.
  # Pessimistic mode would only add lock waits (up to the 30 s lock timeout
  # seen on the emulator) for reads lrosink does not make in transactions.
  concurrency_mode = "OPTIMISTIC"

  point_in_time_recovery_enablement = var.firestore_point_in_time_recovery ? "POINT_IN_TIME_RECOVERY_ENABLED" : "POINT_IN_TIME_RECOVERY_DISABLED"

  # The ledger is the record of what was delivered: the API refuses to
  # delete the database while protection is on, and `terraform destroy`
  # only forgets it (ABANDON) instead of deleting it.
  delete_protection_state = "DELETE_PROTECTION_ENABLED"
  deletion_policy         = "ABANDON"

  # Abandoning it would leave a database the next apply cannot create
  # again (409 already exists): `terraform destroy` stops at plan time
  # instead (docs/DEPLOY.md, "Tearing down").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [google_project_service.apis]
}

# The workers' processed records (package consume), in a database of their
# own when var.separate_consumer_database is set: the results_subscribers'
# Firestore grant (iam.tf) then reaches no ledger document. Otherwise they
# live in the ledger database.
resource "google_firestore_database" "consumer" {
  count = var.separate_consumer_database ? 1 : 0

  project                           = var.project_id
  name                              = "${var.name_prefix}-consumer"
  location_id                       = coalesce(var.firestore_location, var.region)
  type                              = "FIRESTORE_NATIVE"
  concurrency_mode                  = "OPTIMISTIC"
  point_in_time_recovery_enablement = var.firestore_point_in_time_recovery ? "POINT_IN_TIME_RECOVERY_ENABLED" : "POINT_IN_TIME_RECOVERY_DISABLED"
  delete_protection_state           = "DELETE_PROTECTION_ENABLED"
  deletion_policy                   = "ABANDON"

  # What the workers have processed: losing it processes every result again.
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [google_project_service.apis]
}

locals {
  # What IAM conditions compare for a Firestore database and what it holds
  # (docs/DEPLOY.md, "Firestore access").
  ledger_database_resource   = "projects/${var.project_id}/databases/${google_firestore_database.default.name}"
  consumer_database          = var.separate_consumer_database ? google_firestore_database.consumer[0].name : google_firestore_database.default.name
  consumer_database_resource = "projects/${var.project_id}/databases/${local.consumer_database}"
}

# TTL policies on expire_at, one per collection whose documents carry it;
# Firestore deletes expired documents asynchronously (usually within 24 h of
# expiry). No lrosink query reads expire_at, so its single-field indexes are
# exempted (index_config {}): a monotonically increasing indexed timestamp is
# a write hotspot, and an index nobody reads is only cost.
locals {
  ttl_fields = merge(local.ledger_ttl_fields, local.consumer_ttl_fields)

  ledger_ttl_fields = {
    # Every claim carries expire_at: 30 days after its creation or its last
    # seize or release, so a claim still being retried never expires; far
    # beyond Gemini's 24 h of webhook retries.
    claims = { database = google_firestore_database.default.name, collection = "claims" }
    # Opt-in: with var.retention (LROSINK_RETENTION) every settled operation
    # whose results message is published carries expire_at = settled_at +
    # retention. Without it no operation has expire_at and the policy deletes
    # nothing: operations are the long-term ledger. Pending operations, and
    # settled ones still owing their message, never carry it. The trade-off:
    # a delivery or replay for a deleted operation is a first sighting again
    # (docs/OPERATIONS.md, "Retention"), hence the 7-day floor.
    operations = { database = google_firestore_database.default.name, collection = "operations" }
    # The delivery log (package deliverylog): one document per operation in
    # `deliveries`, its newest 50 entries, with expire_at = its newest
    # entry's time + LROSINK_DELIVERY_LOG_TTL (default 7 days). It is read by
    # document id, and by webhook_at (the Health page's traffic), not expire_at.
    deliveries = { database = google_firestore_database.default.name, collection = "deliveries" }
    # Intents (CONTRACT.md §5): with var.retention, a bound intent carries
    # expire_at = bound_at + retention + 30 days (ledger.IntentKeep), by
    # when its operation is deleted or deletable; an unbound one never does.
    intents = { database = google_firestore_database.default.name, collection = "intents" }
  }

  consumer_ttl_fields = var.consumer_processed_collection == "" ? {} : {
    # The downstream worker's processed records (package consume,
    # consume.NewFirestoreStore(client, "processed")): each carries expire_at
    # (its retention after its last write); without this policy the
    # collection grows for ever.
    processed = { database = local.consumer_database, collection = var.consumer_processed_collection }
  }
}

resource "google_firestore_field" "ttl" {
  for_each = local.ttl_fields

  project    = var.project_id
  database   = each.value.database
  collection = each.value.collection
  field      = "expire_at"

  ttl_config {}

  index_config {}
}

# Index exemptions for large map/array fields that no query filters or
# orders on. Firestore indexes every field and sub-field by default; the
# Gemini `output` and user metadata are caller-controlled maps, and a
# document with more than 40,000 index entries cannot be written at all.
# The Go test (deploy_test) checks that no query in queries.json uses an
# exempted field.
locals {
  unindexed_fields = {
    operations_output        = { collection = "operations", field = "output" }
    operations_user_metadata = { collection = "operations", field = "user_metadata" }
    operations_history       = { collection = "operations", field = "history" }
    operations_conflicts     = { collection = "operations", field = "conflicts" }
    claims_message           = { collection = "claims", field = "message" }
    deliveries_entries       = { collection = "deliveries", field = "entries" }
    intents_metadata         = { collection = "intents", field = "metadata" }
  }
}

resource "google_firestore_field" "unindexed" {
  for_each = local.unindexed_fields

  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = each.value.collection
  field      = each.value.field

  # An empty index_config removes every single-field index on the field.
  index_config {}
}
