package sqliteledger

import (
	"context"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
)

const (
	// The operation's own record decides (ledger.PatchMirrorDone): its
	// effect mirror DONE says its results message is published. Its claim
	// may be gone already: claims expire (30 days) on their own, often
	// before a long retention ends. One still owing its message is kept,
	// whatever its age. A range of the settled_at index.
	sqlPruneOperations = `DELETE FROM operations WHERE id IN (
SELECT id FROM operations
WHERE settled_at IS NOT NULL AND settled_at <= ? AND effect_status = 'DONE'
ORDER BY settled_at, id LIMIT ?)`
	sqlPruneClaims = `DELETE FROM claims WHERE id IN (
SELECT id FROM claims WHERE status = 'DONE' AND expire_at <= ? ORDER BY expire_at, id LIMIT ?)`
)

// PruneSettled deletes up to limit operations settled at or before
// settledBefore whose results message is published (effect mirror DONE,
// whether or not their claim is still there), and up to limit
// published claims whose expire_at is at or before now: what the Firestore
// TTL policies delete there; and up to limit bound intents past
// ledger.IntentExpiry for the retention now - settledBefore. It returns the
// operations deleted. All are index range reads (schema versions 6, 10).
func (s *Store) PruneSettled(ctx context.Context, settledBefore, now time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, label("prune settled operations"), func(ctx context.Context, tx *wtx) error {
		var err error
		if n, err = tx.exec(ctx, sqlPruneOperations, micros(settledBefore), limit); err != nil {
			return err
		}
		if _, err = tx.exec(ctx, sqlPruneClaims, micros(now), limit); err != nil {
			return err
		}
		_, err = tx.exec(ctx, sqlPruneIntents, micros(settledBefore.Add(-ledger.IntentKeep)), limit)
		return err
	})
	return int(n), err
}
