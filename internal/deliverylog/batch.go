package deliverylog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Append is one operation's entries within a batch.
type Append struct {
	OpID    string
	Entries []Entry
}

// BatchStore is a Store that appends many operations' entries in one call
// (SQLite: one request to its single writer, one write of one
// transaction). Optional: AppendBatch falls back to AppendDeliveries.
type BatchStore interface {
	// AppendDeliveryBatch appends every Append as AppendDeliveries would,
	// all or none: an error means none was written. ErrNoBatch (a wrapper
	// whose inner store has no batch) asks the caller to append one
	// operation at a time.
	AppendDeliveryBatch(ctx context.Context, batch []Append, r Retention) error
}

// ErrNoBatch is a BatchStore's answer when it cannot append a batch at once
// (a wrapper such as ledger.Bounded over a store that lacks it).
var ErrNoBatch = errors.New("delivery log: store appends one operation at a time")

// FallbackInFlight bounds the appends AppendBatch runs at once on a store
// without batches: Firestore's per-operation transactions overlap (each
// is a few round trips), without a burst of hundreds of them at once.
const FallbackInFlight = 8

// AppendBatch appends batch to s: in one call when s is a BatchStore,
// otherwise operation by operation, at most FallbackInFlight at once. It
// returns how many operations' appends were lost, and an error saying why
// (the first failure, with the count).
func AppendBatch(ctx context.Context, s Store, batch []Append, r Retention) (lostOps int, err error) {
	lost, err := appendBatch(ctx, s, batch, r)
	return len(lost), err
}

// appendBatch is AppendBatch, returning the indexes of the lost appends.
func appendBatch(ctx context.Context, s Store, batch []Append, r Retention) ([]int, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	if bs, ok := s.(BatchStore); ok {
		err := bs.AppendDeliveryBatch(ctx, batch, r)
		if err == nil {
			return nil, nil
		}
		if !errors.Is(err, ErrNoBatch) {
			all := make([]int, len(batch))
			for i := range all {
				all[i] = i
			}
			return all, fmt.Errorf("delivery log: append of %d operations: %w", len(batch), err)
		}
	}
	var (
		mu    sync.Mutex
		lost  []int
		first error
		wg    sync.WaitGroup
		slots = make(chan struct{}, FallbackInFlight)
	)
	for i, a := range batch {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := s.AppendDeliveries(ctx, a.OpID, a.Entries, r); err != nil {
				mu.Lock()
				lost = append(lost, i)
				if first == nil {
					first = fmt.Errorf("operation %s: %w", a.OpID, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(lost) == 0 {
		return nil, nil
	}
	slices.Sort(lost)
	return lost, fmt.Errorf("delivery log: %d of %d operations' appends failed, first: %w", len(lost), len(batch), first)
}
