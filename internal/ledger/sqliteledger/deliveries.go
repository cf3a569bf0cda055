package sqliteledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/shard"
)

var (
	_ deliverylog.Store          = (*Store)(nil)
	_ deliverylog.BatchStore     = (*Store)(nil)
	_ deliverylog.TrafficCounter = (*Store)(nil)
)

// expireWindow is how many sequence numbers, from the oldest entry's, one
// append of inserted entries considers for expiry: twice what it inserted
// (each insert takes the next sequence number, so the expired head moves
// at least as fast as the tail grows, and a backlog drains at the append
// rate), plus expireBatch. A fixed 100 fell behind any chunk inserting more
// (a Recorder chunk inserts up to thousands): with a 7-day TTL, entries
// 19.5 days old were kept. Bounded per append by its own size.
func expireWindow(inserted int) int { return expireBatch + 2*inserted }

// expireBatch is what an append considers beyond its own entries.
const expireBatch = 100

// The delivery log's and the counts' statements (TestQueryPlans checks each
// is served by an index).
const (
	sqlInsertDelivery = `INSERT INTO delivery_entries (op_id, at_ns, source, delivery_id, status, auth, outcome, reason, answer, latency_ns, actor)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// sqlInsertDeliveryV9 is the insert of schema version 9, which
	// migrateDeliveries runs in (the actor column came with version 11).
	sqlInsertDeliveryV9 = `INSERT INTO delivery_entries (op_id, at_ns, source, delivery_id, status, auth, outcome, reason, answer, latency_ns)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// sqlTrimDeliveries keeps an operation's (?1) newest ?2 entries (by
	// time, a later arrival first among equal times): it deletes those
	// before the ?2-th newest, reading only that operation's entries on
	// their index, and nothing when it has no more than ?2.
	sqlTrimDeliveries = `DELETE FROM delivery_entries WHERE op_id = ?1 AND (at_ns, seq) < (
	SELECT at_ns, seq FROM delivery_entries WHERE op_id = ?1 ORDER BY at_ns DESC, seq DESC LIMIT 1 OFFSET ?2 - 1)`
	// sqlExpireDeliveries deletes, of the entries among the ?1 first
	// sequence numbers still in the table (expireWindow), those at or
	// before ?2: entries arrive in time order, so the oldest are there,
	// and the read stays a bounded range of the rowid whatever the table
	// holds.
	sqlExpireDeliveries = `DELETE FROM delivery_entries
	WHERE seq < (SELECT min(seq) FROM delivery_entries) + ?1 AND at_ns <= ?2`
	sqlListDeliveries = `SELECT at_ns, source, delivery_id, status, auth, outcome, reason, answer, latency_ns, actor
FROM delivery_entries WHERE op_id = ? ORDER BY at_ns DESC, seq DESC`
	// sqlWebhookTraffic reads the newest ?1 entries by arrival (seq, the
	// rowid), newest first: a range of the primary key, no index of its
	// own (one on the entries' time cost every append a quarter more,
	// BenchmarkAppendDeliveries). Entries are inserted about when they
	// happen, so arrival order is time order (sqlExpireDeliveries relies
	// on it too) and WebhookTraffic stops reading once it is past its
	// window.
	sqlWebhookTraffic = `SELECT at_ns, source, outcome FROM delivery_entries
	WHERE seq > (SELECT max(seq) FROM delivery_entries) - ?1 ORDER BY seq DESC`
	sqlSeqRange         = `SELECT min(seq), max(seq) FROM delivery_entries`
	sqlCountPending     = `SELECT count(*) FROM operations WHERE pending_since IS NOT NULL`
	sqlCountDue         = `SELECT count(*) FROM operations WHERE next_check_at IS NOT NULL AND next_check_at <= ?`
	sqlCountDueInBucket = `SELECT count(*) FROM operations WHERE bucket = ? AND next_check_at IS NOT NULL AND next_check_at <= ?`
)

// AppendDeliveries implements deliverylog.Store: a batch of one.
func (s *Store) AppendDeliveries(ctx context.Context, opID string, entries []deliverylog.Entry, r deliverylog.Retention) error {
	return s.AppendDeliveryBatch(ctx, []deliverylog.Append{{OpID: opID, Entries: entries}}, r)
}

// AppendDeliveryBatch implements deliverylog.BatchStore: one request to the
// writer (one write of its group commit) that inserts every entry, trims
// each operation's log to its newest r.Keep, then deletes, of the entries
// that arrived first, those older than r.TTL before the batch's newest (a
// window twice the batch's size plus 100, expireWindow: what Merge drops
// by age goes with it, or later).
// Nothing is read back or rewritten: an append to an operation with a log
// costs what the first one did (docs/BENCHMARKS.md).
func (s *Store) AppendDeliveryBatch(ctx context.Context, batch []deliverylog.Append, r deliverylog.Retention) error {
	var newest time.Time
	for _, a := range batch {
		for _, e := range a.Entries {
			if e.At.After(newest) {
				newest = e.At
			}
		}
	}
	if newest.IsZero() {
		return nil // no entry at all
	}
	r = r.WithDefaults()
	inserted := 0
	for _, a := range batch {
		inserted += len(a.Entries)
	}
	return s.write(ctx, label("append deliveries"), func(ctx context.Context, tx *wtx) error {
		for _, a := range batch {
			if len(a.Entries) == 0 {
				continue
			}
			for _, e := range a.Entries {
				if _, err := tx.exec(ctx, sqlInsertDelivery, deliveryArgs(a.OpID, e)...); err != nil {
					return fmt.Errorf("operation %s: %w", a.OpID, err)
				}
			}
			if _, err := tx.exec(ctx, sqlTrimDeliveries, a.OpID, r.Keep); err != nil {
				return fmt.Errorf("operation %s: %w", a.OpID, err)
			}
		}
		// Expiry is judged by the batch's newest entry (about now).
		_, err := tx.exec(ctx, sqlExpireDeliveries, expireWindow(inserted), newest.Add(-r.TTL).UnixNano())
		return err
	})
}

// deliveryArgs are sqlInsertDelivery's arguments for entry e of opID's log.
func deliveryArgs(opID string, e deliverylog.Entry) []any {
	return []any{opID, e.At.UnixNano(), e.Source, e.DeliveryID, e.Status, e.Auth, e.Outcome, e.Reason, int64(e.Answer), int64(e.Latency), e.Actor}
}

// ListDeliveries implements deliverylog.Store.
func (s *Store) ListDeliveries(ctx context.Context, opID string) ([]deliverylog.Entry, error) {
	return queryAll(ctx, s.reader, "list deliveries", sqlListDeliveries, scanDelivery, opID)
}

func scanDelivery(sc scanner) (deliverylog.Entry, error) {
	var (
		e                 deliverylog.Entry
		at, answer, latns int64
	)
	if err := sc.Scan(&at, &e.Source, &e.DeliveryID, &e.Status, &e.Auth, &e.Outcome, &e.Reason, &answer, &latns, &e.Actor); err != nil {
		return deliverylog.Entry{}, err
	}
	e.At, e.Answer, e.Latency = time.Unix(0, at).UTC(), int(answer), time.Duration(latns)
	return e, nil
}

// migrateDeliveries moves every log of the version-6 table (one row per
// operation, its entries a JSON array, newest first) to delivery_entries,
// oldest entry first, and drops that table. Logs are moved one at a time:
// a large ledger's logs need not fit in memory.
func migrateDeliveries(ctx context.Context, tx *sql.Tx) error {
	var tables int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'deliveries'`).Scan(&tables); err != nil {
		return fmt.Errorf("migrate delivery logs: %w", err)
	}
	if tables == 0 {
		return nil
	}
	type log struct {
		opID    string
		entries sql.NullString
	}
	var last string
	for {
		// A page at a time, on the primary key, so no cursor is open while
		// this transaction inserts.
		var page []log
		rows, err := tx.QueryContext(ctx, `SELECT op_id, entries FROM deliveries WHERE op_id > ? ORDER BY op_id LIMIT 500`, last)
		if err != nil {
			return fmt.Errorf("migrate delivery logs: %w", err)
		}
		for rows.Next() {
			var l log
			if err := rows.Scan(&l.opID, &l.entries); err != nil {
				return errors.Join(fmt.Errorf("migrate delivery logs: %w", err), rows.Close())
			}
			page = append(page, l)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("migrate delivery logs: %w", err)
		}
		if len(page) == 0 {
			break
		}
		for _, l := range page {
			var entries []deliverylog.Entry
			if l.entries.Valid {
				if entries, err = ledger.DecodeDeliveries([]byte(l.entries.String)); err != nil {
					return fmt.Errorf("migrate delivery logs: operation %s: %w", l.opID, err)
				}
			}
			for _, e := range slices.Backward(entries) {
				if _, err := tx.ExecContext(ctx, sqlInsertDeliveryV9, deliveryArgs(l.opID, e)[:10]...); err != nil {
					return fmt.Errorf("migrate delivery logs: operation %s: %w", l.opID, err)
				}
			}
		}
		last = page[len(page)-1].opID
	}
	if _, err := tx.ExecContext(ctx, `DROP TABLE deliveries`); err != nil {
		return fmt.Errorf("migrate delivery logs: %w", err)
	}
	return nil
}

// WebhookTraffic implements deliverylog.TrafficCounter: the newest
// entries by arrival, at most limit, read until a webhook entry is older
// than since less arrivalSlack (it gives Last, and what arrived before it
// is older still); those of the window counted by outcome. Partial: the
// bound ended the read while it was still in the window.
func (s *Store) WebhookTraffic(ctx context.Context, since time.Time, limit int) (deliverylog.Tally, error) {
	t := deliverylog.Tally{Outcomes: map[string]int{}}
	if limit <= 0 {
		return t, nil
	}
	rows, err := s.reader.QueryContext(ctx, sqlWebhookTraffic, limit)
	if err != nil {
		return t, fail(ctx, "webhook traffic", err)
	}
	defer rows.Close() //nolint:errcheck // rows.Err reports what matters
	var (
		oldest time.Time
		read   int
		done   bool
	)
	for rows.Next() {
		var (
			at              int64
			source, outcome string
		)
		if err := rows.Scan(&at, &source, &outcome); err != nil {
			return deliverylog.Tally{}, fail(ctx, "webhook traffic", err)
		}
		read++
		e := time.Unix(0, at).UTC()
		oldest = e
		webhook := source == deliverylog.SourceWebhook
		if webhook && e.After(t.Last) {
			t.Last = e
		}
		if webhook && !e.Before(since) {
			t.Outcomes[outcome]++
		}
		if webhook && e.Before(since.Add(-arrivalSlack)) {
			done = true // and t.Last is set
			break
		}
	}
	if err := rows.Err(); err != nil {
		return deliverylog.Tally{}, fail(ctx, "webhook traffic", err)
	}
	if !done && read > 0 && !oldest.Before(since) {
		// Read to the bound still in the window: more if older rows exist.
		var lo, hi sql.NullInt64
		if err := s.reader.QueryRowContext(ctx, sqlSeqRange).Scan(&lo, &hi); err != nil {
			return deliverylog.Tally{}, fail(ctx, "webhook traffic", err)
		}
		t.Partial = lo.Valid && hi.Int64-int64(limit) >= lo.Int64
	}
	return t, nil
}

// arrivalSlack is how far before its window WebhookTraffic reads on: a
// webhook entry is written milliseconds after its answer, in any order
// within a Recorder batch; a pass's reconcile entries (not counted) at its
// end, within its deadline (LROSINK_RECONCILE_DEADLINE, 4m30s by default).
const arrivalSlack = 10 * time.Minute

// CountPending implements ledger.Queries (partial index on pending_since,
// which only non-terminal operations have).
func (s *Store) CountPending(ctx context.Context) (int64, error) {
	return s.count(ctx, "count pending", sqlCountPending)
}

// CountDue implements ledger.Queries (partial index on next_check_at; for
// a range of buckets, on (bucket, next_check_at, id)).
func (s *Store) CountDue(ctx context.Context, rg shard.Range, now time.Time) (int64, error) {
	if rg.IsAll() {
		return s.count(ctx, "count due", sqlCountDue, micros(now))
	}
	// Bucket by bucket: each count is a range of the index.
	var total int64
	for b := rg.Lo; b < rg.Hi; b++ {
		n, err := s.count(ctx, "count due", sqlCountDueInBucket, b, micros(now))
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func (s *Store) count(ctx context.Context, what, q string, args ...any) (int64, error) {
	var n int64
	if err := s.reader.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fail(ctx, what, err)
	}
	return n, nil
}
