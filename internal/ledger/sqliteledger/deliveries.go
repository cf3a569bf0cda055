package sqliteledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/shard"
)

var (
	_ deliverylog.Store      = (*Store)(nil)
	_ deliverylog.BatchStore = (*Store)(nil)
)

// expireBatch bounds the expired logs one append deletes.
const expireBatch = 100

// The delivery log's and the counts' statements (TestQueryPlans checks each
// is served by an index).
const (
	sqlGetDeliveries = `SELECT entries FROM deliveries WHERE op_id = ?`
	// A log is created without a read (most operations' first delivery
	// finds none) and rewritten whole once merged with what it held.
	sqlCreateDeliveries = `INSERT INTO deliveries (op_id, expire_at, entries) VALUES (?, ?, ?)
	ON CONFLICT (op_id) DO NOTHING`
	sqlUpdateDeliveries = `UPDATE deliveries SET expire_at = ?, entries = ? WHERE op_id = ?`
	sqlExpireDeliveries = `DELETE FROM deliveries WHERE op_id IN
	(SELECT op_id FROM deliveries WHERE expire_at <= ? ORDER BY expire_at LIMIT ?)`
	sqlCountPending     = `SELECT count(*) FROM operations WHERE pending_since IS NOT NULL`
	sqlCountDue         = `SELECT count(*) FROM operations WHERE next_check_at IS NOT NULL AND next_check_at <= ?`
	sqlCountDueInBucket = `SELECT count(*) FROM operations WHERE bucket = ? AND next_check_at IS NOT NULL AND next_check_at <= ?`
)

// AppendDeliveries implements deliverylog.Store: a batch of one.
func (s *Store) AppendDeliveries(ctx context.Context, opID string, entries []deliverylog.Entry, r deliverylog.Retention) error {
	return s.AppendDeliveryBatch(ctx, []deliverylog.Append{{OpID: opID, Entries: entries}}, r)
}

// AppendDeliveryBatch implements deliverylog.BatchStore: one request to the
// writer (one write of its group commit) that, for each operation,
// reads its log, keeps the newest entries and writes it back, then deletes
// a bounded batch of expired logs once. The Recorder sends up to a few
// hundred operations at once: one commit cycle for all of them, where one
// per operation let its queue fill under load.
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
	// Each log as created from the batch's entries alone, encoded here on
	// the caller's goroutine rather than on the writer's, which every write
	// of the store waits for: most operations have no log yet.
	fresh := make([]loggedEntries, len(batch))
	for i, a := range batch {
		if len(a.Entries) == 0 {
			continue
		}
		kept, js, err := mergeLog(nil, a.Entries, r)
		if err != nil {
			return fmt.Errorf("sqlite: append deliveries: operation %s: %w", a.OpID, err)
		}
		fresh[i] = loggedEntries{kept, js}
	}
	return s.write(ctx, label("append deliveries"), func(ctx context.Context, tx *wtx) error {
		for i, a := range batch {
			if len(a.Entries) == 0 {
				continue
			}
			if err := appendOne(ctx, tx, a, fresh[i], r); err != nil {
				return fmt.Errorf("operation %s: %w", a.OpID, err)
			}
		}
		// Expiry is judged by the batch's newest entry (about now): a log
		// whose newest entry is older than the TTL before it is gone.
		_, err := tx.exec(ctx, sqlExpireDeliveries, micros(newest), expireBatch)
		return err
	})
}

// loggedEntries is a log's entries as kept and their stored form.
type loggedEntries struct {
	kept []deliverylog.Entry
	js   string
}

// appendOne merges a's entries into its operation's log within tx. It
// first creates the log as fresh (a's entries alone): only when one exists
// does it read and rewrite it (the read was a third of the delivery log's
// writer time under load, docs/BENCHMARKS.md).
func appendOne(ctx context.Context, tx *wtx, a deliverylog.Append, fresh loggedEntries, r deliverylog.Retention) error {
	n, err := tx.exec(ctx, sqlCreateDeliveries, a.OpID, micros(fresh.kept[0].At.Add(r.TTL)), fresh.js)
	if err != nil || n == 1 {
		return err
	}
	var col sql.NullString
	if err := tx.queryRow(ctx, sqlGetDeliveries, []any{a.OpID}, &col); err != nil {
		return err // the log exists: no row is an error here
	}
	old, err := decodeLog(col)
	if err != nil {
		return err
	}
	kept, js, err := mergeLog(old, a.Entries, r)
	if err != nil {
		return err
	}
	_, err = tx.exec(ctx, sqlUpdateDeliveries, micros(kept[0].At.Add(r.TTL)), js, a.OpID)
	return err
}

// mergeLog is deliverylog.Merge with its result's stored form. added
// is never empty (AppendDeliveryBatch skips those), so neither is kept.
func mergeLog(old, added []deliverylog.Entry, r deliverylog.Retention) ([]deliverylog.Entry, string, error) {
	kept := deliverylog.Merge(old, added, r)
	js, err := ledger.EncodeDeliveries(kept)
	return kept, string(js), err
}

// decodeLog reads a stored log (ledger.DecodeDeliveries: its entries are read
// back on the writer goroutine for every later delivery to the operation);
// NULL is an empty log.
func decodeLog(col sql.NullString) ([]deliverylog.Entry, error) {
	if !col.Valid {
		return nil, nil
	}
	return ledger.DecodeDeliveries([]byte(col.String))
}

// ListDeliveries implements deliverylog.Store.
func (s *Store) ListDeliveries(ctx context.Context, opID string) ([]deliverylog.Entry, error) {
	var col sql.NullString
	err := s.reader.QueryRowContext(ctx, sqlGetDeliveries, opID).Scan(&col)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fail(ctx, "list deliveries", err)
	}
	out, err := decodeLog(col)
	if err != nil {
		return nil, fail(ctx, "list deliveries", err)
	}
	return out, nil
}

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
