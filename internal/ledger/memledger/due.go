package memledger

import (
	"context"
	"time"
)

// CountDue implements ledger.Queries; billed like CountOperations, one read
// per 1,000 entries counted (at least one).
func (s *Store) CountDue(ctx context.Context, now time.Time) (int64, error) {
	if err := s.lock(ctx, "count due operations"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var n int64
	for _, so := range s.ops {
		if at := so.op.NextCheckAt; !at.IsZero() && !at.After(now) {
			n++
		}
	}
	s.counts.Reads.Add(max(1, (n+999)/1000))
	return n, nil
}
