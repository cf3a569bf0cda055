package reconcile

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// Budget paces Gemini calls to a rate: a token bucket holding one token,
// so in any second at most ceil(rate) calls start. It runs on an injected
// clock and sleep, so a simulation with a virtual clock is paced exactly
// as production is (rate.Limiter.Wait would read the wall clock).
//
// The reconciler's Gemini fetcher waits on it before every HTTP attempt,
// retries included (gemini.Options.Wait): the budget bounds requests sent,
// not checks. A budget too small for the due set makes checks wait, and
// what a pass cannot reach before its deadline stays due: lateness
// (Summary.OldestOverdueSeconds), not errors.
type Budget struct {
	lim   *rate.Limiter
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// NewBudget is a budget of qps calls a second shared out among shards
// passes running at once (each gets qps/shards; shards below 1 count as
// 1). qps <= 0 is no budget: nil, whose Wait returns at once. sleep must
// return ctx's error when ctx ends first.
func NewBudget(qps float64, shards int, now func() time.Time, sleep func(context.Context, time.Duration) error) *Budget {
	if qps <= 0 {
		return nil
	}
	return &Budget{lim: rate.NewLimiter(rate.Limit(qps/float64(max(shards, 1))), 1), now: now, sleep: sleep}
}

// Limit is the calls a second this budget allows (0: unlimited).
func (b *Budget) Limit() float64 {
	if b == nil {
		return 0
	}
	return float64(b.lim.Limit())
}

// Wait blocks until the next call may start, or ctx ends (its error; the
// token is handed back).
func (b *Budget) Wait(ctx context.Context) error {
	if b == nil {
		return ctx.Err()
	}
	now := b.now()
	r := b.lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	if err := b.sleep(ctx, d); err != nil {
		r.CancelAt(b.now())
		return err
	}
	return nil
}
