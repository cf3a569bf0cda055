package memledger

import (
	"context"
	"slices"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/shard"
)

var _ deliverylog.Store = (*Store)(nil)

// AppendDeliveries implements deliverylog.Store.
func (s *Store) AppendDeliveries(ctx context.Context, opID string, entries []deliverylog.Entry, r deliverylog.Retention) error {
	if err := s.lock(ctx, "append deliveries "+opID); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.counts.DeliveryReads.Add(1)
	s.counts.DeliveryWrites.Add(1)
	s.deliveries[opID] = deliverylog.Merge(s.deliveries[opID], entries, r)
	return nil
}

// ListDeliveries implements deliverylog.Store.
func (s *Store) ListDeliveries(ctx context.Context, opID string) ([]deliverylog.Entry, error) {
	if err := s.lock(ctx, "list deliveries "+opID); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	s.counts.DeliveryReads.Add(1)
	return slices.Clone(s.deliveries[opID]), nil
}

// CountPending implements ledger.Queries.
func (s *Store) CountPending(ctx context.Context) (int64, error) {
	return s.count(ctx, "count pending", func(so storedOp) bool { return !so.op.State.Terminal() })
}

// CountDue implements ledger.Queries: from the due index, billed as a
// count aggregation (one read per 1,000 counted).
func (s *Store) CountDue(ctx context.Context, rg shard.Range, now time.Time) (int64, error) {
	if err := s.lock(ctx, "count due"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := s.due.count(rg, now)
	s.counts.Reads.Add(max(1, (n+999)/1000))
	return n, nil
}

// count imitates a Firestore count aggregation: one read per 1,000 matches.
func (s *Store) count(ctx context.Context, what string, match func(storedOp) bool) (int64, error) {
	if err := s.lock(ctx, what); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var n int64
	for _, so := range s.ops {
		if match(so) {
			n++
		}
	}
	s.counts.Reads.Add(max(1, (n+999)/1000))
	return n, nil
}
