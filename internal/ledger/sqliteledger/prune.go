package sqliteledger

import (
	"context"
	"time"
)

const (
	// Only operations whose results message is published (their claim,
	// of the same id, DONE): one still owing it is kept, whatever its age.
	sqlPruneOperations = `DELETE FROM operations WHERE id IN (
SELECT o.id FROM operations o JOIN claims c ON c.id = o.id
WHERE o.settled_at IS NOT NULL AND o.settled_at <= ? AND c.status = 'DONE'
ORDER BY o.settled_at, o.id LIMIT ?)`
	sqlPruneClaims = `DELETE FROM claims WHERE id IN (
SELECT id FROM claims WHERE status = 'DONE' AND expire_at <= ? ORDER BY expire_at, id LIMIT ?)`
)

// PruneSettled deletes up to limit operations settled at or before
// settledBefore whose results message is published (claim DONE), and up to limit
// published claims whose expire_at is at or before now: what the Firestore
// TTL policies delete there. It returns the operations deleted. Both are
// index range reads (schema version 6).
func (s *Store) PruneSettled(ctx context.Context, settledBefore, now time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, label("prune settled operations"), func(ctx context.Context, tx *wtx) error {
		var err error
		if n, err = tx.exec(ctx, sqlPruneOperations, micros(settledBefore), limit); err != nil {
			return err
		}
		_, err = tx.exec(ctx, sqlPruneClaims, micros(now), limit)
		return err
	})
	return int(n), err
}
