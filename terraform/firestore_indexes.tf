# Composite indexes of the ledger. Every query the code runs is listed, with
# its filters, order and the index serving it, in queries.json; the Go test
# in deploy_test/ checks that list against internal/ledger/fsledger's query
# calls and against the google_firestore_index resources below. Add a query
# there and here together.
#
# ListOperations with a state filter (`lrosink ops list --state S`) and the
# console's filtered pages and counts (listQuery, stuckListQuery: kind and/or
# state, optionally stuck) need composite indexes: equality filters on some
# fields plus an order on another. Their explicit __name__ order is the one
# every index entry carries after the last field, in its direction, so it
# needs no field of its own. The other queries are served by the single-field indexes
# Firestore maintains automatically, because each filters with a range and
# orders on the SAME field (every index entry also holds the document id,
# __name__, so ordering by it after the field, in the same direction, is
# free; DueOperations does that to page with a cursor):
#   DueOperations    operations  next_check_at <= now     ORDER BY next_check_at ASC, __name__ ASC
#   StuckOperations  operations  stuck_from <= cutoff     ORDER BY stuck_from ASC, __name__ ASC
#   DueClaims        claims      due_at <= now            ORDER BY due_at ASC
#   ListOperations   operations  (no filter)              ORDER BY submitted_at DESC
#   listQuery        operations  (no filter)              ORDER BY submitted_at DESC, __name__ DESC
#   stuckListQuery   operations  pending_since <= cutoff  ORDER BY pending_since DESC, __name__ DESC
#   CountPending     operations  pending_since >= epoch   count() aggregation
#   CountDue         operations  next_check_at <= now     count() aggregation
#   UnboundIntents   intents     unbound_since <= cutoff  ORDER BY unbound_since ASC, __name__ ASC (and its count)
#   IntentAlertsDue  intents     alert_from <= cutoff     ORDER BY alert_from ASC, __name__ ASC
#   WebhookTraffic   deliveries  webhook_at >= hour ago  ORDER BY webhook_at DESC (the Health page's traffic)
#   lastWebhook      deliveries  (no filter)             ORDER BY webhook_at DESC LIMIT 1
# Otherwise the delivery log (deliveries) is read and written by document id.
# The emulator never enforces indexes, so a missing one shows up only in
# production, as FailedPrecondition "The query requires an index".
resource "google_firestore_index" "operations_state_submitted_at" {
  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = "operations"

  fields {
    field_path = "state"
    order      = "ASCENDING"
  }

  fields {
    field_path = "submitted_at"
    order      = "DESCENDING"
  }
}

resource "google_firestore_index" "operations_kind_submitted_at" {
  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = "operations"

  fields {
    field_path = "kind"
    order      = "ASCENDING"
  }

  fields {
    field_path = "submitted_at"
    order      = "DESCENDING"
  }
}

resource "google_firestore_index" "operations_kind_state_submitted_at" {
  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = "operations"

  fields {
    field_path = "kind"
    order      = "ASCENDING"
  }

  fields {
    field_path = "state"
    order      = "ASCENDING"
  }

  fields {
    field_path = "submitted_at"
    order      = "DESCENDING"
  }
}

resource "google_firestore_index" "operations_state_pending_since" {
  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = "operations"

  fields {
    field_path = "state"
    order      = "ASCENDING"
  }

  fields {
    field_path = "pending_since"
    order      = "DESCENDING"
  }
}

resource "google_firestore_index" "operations_kind_pending_since" {
  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = "operations"

  fields {
    field_path = "kind"
    order      = "ASCENDING"
  }

  fields {
    field_path = "pending_since"
    order      = "DESCENDING"
  }
}

resource "google_firestore_index" "operations_kind_state_pending_since" {
  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = "operations"

  fields {
    field_path = "kind"
    order      = "ASCENDING"
  }

  fields {
    field_path = "state"
    order      = "ASCENDING"
  }

  fields {
    field_path = "pending_since"
    order      = "DESCENDING"
  }
}


# A shard pass (reconcile.PassRange over a range of the 64 virtual buckets,
# package shard) adds `bucket in [...]` to the due and stuck queries and the
# due count; Firestore serves an `in` on one field with an order on another
# from a composite index (equality field first) and merges the buckets in
# order, billing only the documents returned. An `in` takes at most 30
# values: a range of more (2 shards) runs as two queries merged in the code.
# A whole-ledger pass (1 shard) keeps the single-field queries above, so
# documents written before the bucket field existed need no backfill until
# a deployment runs more than one shard (docs/OPERATIONS.md).
#   DueOperations    operations  next_check_at <= now, bucket in B  ORDER BY next_check_at ASC, __name__ ASC
#   CountDue         operations  next_check_at <= now, bucket in B  count() aggregation
#   StuckOperations  operations  stuck_from <= cutoff, bucket in B  ORDER BY stuck_from ASC, __name__ ASC
resource "google_firestore_index" "operations_bucket_next_check_at" {
  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = "operations"

  fields {
    field_path = "bucket"
    order      = "ASCENDING"
  }

  fields {
    field_path = "next_check_at"
    order      = "ASCENDING"
  }
}

resource "google_firestore_index" "operations_bucket_stuck_from" {
  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = "operations"

  fields {
    field_path = "bucket"
    order      = "ASCENDING"
  }

  fields {
    field_path = "stuck_from"
    order      = "ASCENDING"
  }
}
