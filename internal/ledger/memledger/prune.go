package memledger

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
)

// PruneSettled deletes up to limit operations settled at or before
// settledBefore whose results message is published (effect mirror DONE,
// whether or not their claim, which expires on its own, is still there),
// oldest settlement first, and up to limit published claims whose ExpireAt
// is at or before now, as the SQLite adapter does. It returns the
// operations deleted.
func (s *Store) PruneSettled(ctx context.Context, settledBefore, now time.Time, limit int) (int, error) {
	if err := s.lock(ctx, "prune settled operations"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var old []ledger.Operation
	for _, so := range s.ops {
		o := so.op
		if o.Effect.Status == ledger.ClaimDone && !o.SettledAt.IsZero() && !o.SettledAt.After(settledBefore) {
			old = append(old, o)
		}
	}
	slices.SortFunc(old, func(a, b ledger.Operation) int {
		return cmp.Or(a.SettledAt.Compare(b.SettledAt), cmp.Compare(a.ID, b.ID))
	})
	old = old[:min(limit, len(old))]
	for _, o := range old {
		delete(s.ops, o.ID)
	}
	claims := 0
	for id, sc := range s.claims {
		if claims < limit && sc.c.Status == ledger.ClaimDone && !sc.c.ExpireAt.IsZero() && !sc.c.ExpireAt.After(now) {
			delete(s.claims, id)
			claims++
		}
	}
	intents := s.pruneIntents(now.Sub(settledBefore), now, limit)
	s.counts.Writes.Add(int64(len(old) + claims + intents))
	return len(old), nil
}
