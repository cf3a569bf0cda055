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
	kept := deliverylog.Merge(s.deliveries[opID], entries, r)
	s.deliveries[opID] = kept
	if len(kept) == 0 {
		return nil
	}
	s.logExpiry = append(s.logExpiry, logExpiry{at: kept[0].At, opID: opID})
	var newest time.Time
	for _, e := range entries {
		if e.At.After(newest) {
			newest = e.At
		}
	}
	s.expireLogs(newest.Add(-r.WithDefaults().TTL))
	return nil
}

// logExpiry is one append's mark: opID's log had its newest entry at at.
type logExpiry struct {
	at   time.Time
	opID string
}

// expireLogs deletes every delivery log whose newest entry is at or before
// cut, as Firestore's TTL policy on deliveries.expire_at does and SQLite's
// appends do: a log no later delivery touches is deleted all the same
// (CONTRACT.md §2). Marks are appended in arrival order, which is time
// order, so the expired ones are at the front; a mark whose log has
// been appended to since is stale and only dropped. Not counted: Counts
// tallies what calls cost, and a TTL policy's deletes are no call.
func (s *Store) expireLogs(cut time.Time) {
	n := 0
	for _, m := range s.logExpiry {
		if m.at.After(cut) {
			break
		}
		n++
		if log := s.deliveries[m.opID]; len(log) > 0 && !log[0].At.After(cut) {
			delete(s.deliveries, m.opID)
		}
	}
	// Re-sliced, not shifted: appends reallocate and drop the front.
	s.logExpiry = s.logExpiry[n:]
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

var _ deliverylog.TrafficCounter = (*Store)(nil)

// WebhookTraffic implements deliverylog.TrafficCounter as Firestore's
// query does: the logs holding a webhook entry, newest webhook entry
// first, those at or after since, at most limit of them, counted as a read
// each; of those, the webhook entries at or after since. The append marks
// (newest last) find them without a scan of every log: the logs appended
// to in the window, and, when none of them holds a webhook entry, older
// ones until one does (Last), at most limit more.
func (s *Store) WebhookTraffic(ctx context.Context, since time.Time, limit int) (deliverylog.Tally, error) {
	if err := s.lock(ctx, "webhook traffic"); err != nil {
		return deliverylog.Tally{}, err
	}
	defer s.mu.Unlock()
	t := deliverylog.Tally{Outcomes: map[string]int{}}
	seen := map[string]bool{}
	read, older := 0, 0
	for i := len(s.logExpiry) - 1; i >= 0; i-- {
		m := s.logExpiry[i]
		if m.at.Before(since) {
			if !t.Last.IsZero() || older == limit {
				break
			}
			older++
		}
		if seen[m.opID] {
			continue
		}
		seen[m.opID] = true
		log := s.deliveries[m.opID]
		newest := time.Time{}
		for _, e := range log {
			if e.Source == deliverylog.SourceWebhook && e.At.After(newest) {
				newest = e.At
			}
		}
		switch {
		case newest.IsZero():
			continue // not in Firestore's webhook_at index
		case newest.Before(since):
			t.Last = later(t.Last, newest)
			read++
			continue
		case read == limit:
			t.Partial = true
		}
		if t.Partial {
			break
		}
		read++
		t.Last = later(t.Last, newest)
		for _, e := range log {
			if e.Source == deliverylog.SourceWebhook && !e.At.Before(since) {
				t.Outcomes[e.Outcome]++
			}
		}
	}
	s.counts.DeliveryReads.Add(int64(max(read, 1)))
	return t, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
