package reconcile

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lrosink/lrosink/internal/fetcherr"
)

// Budget paces Gemini calls to a rate: calls start at least 1/rate apart
// (a token bucket holding one token, kept as the next free start time in
// whole nanoseconds, so no float rounding lets one in early). In any second
// at most ceil(rate) calls start. It runs on an injected clock and sleep,
// so a simulation with a virtual clock is paced exactly as production is.
//
// The reconciler's Gemini fetcher waits on it before every HTTP attempt,
// retries included (gemini.Options.Wait): the budget bounds requests sent,
// not checks. A budget too small for the due set makes checks wait, and
// what a pass cannot reach before its deadline stays due: lateness
// (Summary.OldestOverdueSeconds), not errors.
type Budget struct {
	every time.Duration // 1/rate
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu   sync.Mutex
	next time.Time // when the next call may start
}

// NewBudget is a budget of qps calls a second shared out among shards
// passes running at once (each gets qps/shards; shards below 1 count as
// 1). qps <= 0 is no budget: nil, whose Wait returns at once. sleep must
// return ctx's error when ctx ends first.
func NewBudget(qps float64, shards int, now func() time.Time, sleep func(context.Context, time.Duration) error) *Budget {
	if qps <= 0 {
		return nil
	}
	every := time.Duration(float64(time.Second) * float64(max(shards, 1)) / qps)
	return &Budget{every: max(every, 1), now: now, sleep: sleep}
}

// Wait blocks until the next call may start, or ctx ends (its error; the
// slot is handed back if no later call took one since).
func (b *Budget) Wait(ctx context.Context) error {
	_, err := b.Take(ctx)
	return err
}

// TryWait takes the next call's slot only if the call may start now; else
// it fails at once with fetcherr.ErrBudgetSpent and takes nothing. The
// door's confirmations of hints call it (gemini.Options.Wait): they draw
// from the reconciler's budget but answer a webhook, which must not queue
// behind the reconciler's checks; Gemini redelivers after the 503.
func (b *Budget) TryWait(ctx context.Context) error {
	if b == nil {
		return ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if b.next.After(now) {
		return fmt.Errorf("%w: the next request may start in %v", fetcherr.ErrBudgetSpent, b.next.Sub(now))
	}
	b.next = now.Add(b.every)
	return nil
}

// Take is Wait that also says when, on the budget's clock, the call was
// allowed to start (the zero time for a nil budget): what a simulation
// counts.
func (b *Budget) Take(ctx context.Context) (time.Time, error) {
	if b == nil {
		return time.Time{}, ctx.Err()
	}
	b.mu.Lock()
	now := b.now()
	at := b.next
	if at.Before(now) {
		at = now
	}
	b.next = at.Add(b.every)
	b.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		if err := b.sleep(ctx, d); err != nil {
			b.mu.Lock()
			if b.next.Equal(at.Add(b.every)) {
				b.next = at
			}
			b.mu.Unlock()
			return time.Time{}, err
		}
	}
	return at, nil
}
