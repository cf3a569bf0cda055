package sqliteledger

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/shard"
)

var _ deliverylog.Store = (*Store)(nil)

// expireBatch bounds the expired logs one append deletes.
const expireBatch = 100

// The delivery log's and the counts' statements (TestQueryPlans checks each
// is served by an index).
const (
	sqlGetDeliveries    = `SELECT entries FROM deliveries WHERE op_id = ?`
	sqlUpsertDeliveries = `INSERT INTO deliveries (op_id, expire_at, entries) VALUES (?, ?, ?)
	ON CONFLICT (op_id) DO UPDATE SET expire_at = excluded.expire_at, entries = excluded.entries`
	sqlExpireDeliveries = `DELETE FROM deliveries WHERE op_id IN
	(SELECT op_id FROM deliveries WHERE expire_at <= ? ORDER BY expire_at LIMIT ?)`
	sqlCountPending     = `SELECT count(*) FROM operations WHERE pending_since IS NOT NULL`
	sqlCountDue         = `SELECT count(*) FROM operations WHERE next_check_at IS NOT NULL AND next_check_at <= ?`
	sqlCountDueInBucket = `SELECT count(*) FROM operations WHERE bucket = ? AND next_check_at IS NOT NULL AND next_check_at <= ?`
)

// AppendDeliveries implements deliverylog.Store: one write transaction that
// reads the operation's log, keeps the newest entries and writes it back,
// and deletes a bounded batch of expired logs.
func (s *Store) AppendDeliveries(ctx context.Context, opID string, entries []deliverylog.Entry, r deliverylog.Retention) error {
	if len(entries) == 0 {
		return nil
	}
	r = r.WithDefaults()
	return s.write(ctx, "append deliveries", func(ctx context.Context, tx *sql.Tx) error {
		var old []deliverylog.Entry
		var col sql.NullString
		err := tx.QueryRowContext(ctx, sqlGetDeliveries, opID).Scan(&col)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := fromJSON(col, &old); err != nil {
			return err
		}
		kept := deliverylog.Merge(old, entries, r)
		js, err := toJSON(kept)
		if err != nil {
			return err
		}
		newest := kept[0].At
		if _, err := tx.ExecContext(ctx, sqlUpsertDeliveries,
			opID, micros(newest.Add(r.TTL)), js.String); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, sqlExpireDeliveries, micros(newest), expireBatch)
		return err
	})
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
	var out []deliverylog.Entry
	if err := fromJSON(col, &out); err != nil {
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
