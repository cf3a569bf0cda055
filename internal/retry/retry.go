// Package retry is lrosink's one home for waiting between tries: a backoff
// schedule (Backoff) and a loop that retries an operation on it (Retrier).
//
// A Backoff is a plain value: Delay is a function of the attempt number
// and, when it jitters, of the injected Rand, so a seeded caller gets the
// same delays every run (gax.Backoff keeps state between calls and draws
// from the global source).
package retry

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Backoff is a schedule of waits. The wait before retry n (n >= 1; 1 is the
// wait after the first failure) is
//
//	Initial * Multiplier^(n-1) + Increment * (n-1)
//
// capped at Max, then lowered by a random fraction of at most Jitter.
// The zero value waits nothing.
type Backoff struct {
	Initial time.Duration
	// Multiplier grows the wait geometrically; below 1 counts as 1.
	Multiplier float64
	// Increment grows the wait linearly.
	Increment time.Duration
	// Max caps the wait before jitter; 0 is no cap.
	Max time.Duration
	// Jitter is the fraction of the wait drawn at random: the wait is
	// uniform in [d*(1-Jitter), d]. 0 is none, 0.5 is "equal jitter", 1 is
	// "full jitter"; it spreads callers that failed together.
	Jitter float64
	// Rand returns a uniform value in [0, n) (n > 0); nil is math/rand/v2's
	// Int64N. Inject a seeded source for reproducible delays.
	Rand func(n int64) int64
}

// Delay is the wait before retry attempt (attempts below 1 count as 1).
// A schedule that outgrows time.Duration saturates at its largest value.
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.base(max(attempt, 1))
	j := min(b.Jitter, 1)
	if j <= 0 || d <= 0 {
		return d
	}
	// Bounded so that spread+1 cannot overflow.
	spread := int64(math.MaxInt64 - 1)
	if f := j * float64(d); f < float64(spread) {
		spread = int64(f)
	}
	draw := rand.Int64N
	if b.Rand != nil {
		draw = b.Rand
	}
	return d - time.Duration(draw(spread+1))
}

// base is the wait before jitter, computed in float64 so that no step can
// overflow; every wait lrosink uses is exact in float64 (below 2^53 ns).
func (b Backoff) base(n int) time.Duration {
	mult := max(b.Multiplier, 1)
	f := float64(b.Initial)*math.Pow(mult, float64(n-1)) + float64(b.Increment)*float64(n-1)
	if b.Max > 0 && f >= float64(b.Max) {
		return b.Max
	}
	if f >= math.MaxInt64 || math.IsNaN(f) {
		return math.MaxInt64
	}
	return time.Duration(f)
}

// Retrier calls an operation until it succeeds, fails in a way that
// retrying cannot help, or runs out of attempts, waiting between calls.
type Retrier struct {
	// MaxAttempts bounds the calls, the first included; below 1 is 1.
	MaxAttempts int
	// Delay is the wait before retry n (n >= 1), usually a Backoff's
	// Delay; nil waits nothing.
	Delay func(attempt int) time.Duration
	// Sleep waits d; it must return ctx's error when ctx ends first. nil
	// is Sleep. Tests inject one that records instead of sleeping.
	Sleep func(ctx context.Context, d time.Duration) error
	// Retryable reports whether a failure may go away by itself; nil
	// retries every failure.
	Retryable func(err error) bool
	// MayWait, when set, may refuse a wait before it starts (a claim's
	// lease would run out meanwhile); the loop then stops with the last
	// failure.
	MayWait func(d time.Duration) bool
	// After, when set, reads the wait a failure itself asks for (a
	// server's google.rpc.RetryInfo.retryDelay or Retry-After; 0: none).
	// The wait is the longer of it and Delay's, so a server is never
	// asked again sooner than it said.
	After func(err error) time.Duration
	// Now, when set, makes the context's deadline a budget: a wait that
	// would end after it is not started, and the loop stops at once with
	// the last failure (sleeping would only end in the context's error,
	// later). Without Now a wait runs until the deadline ends it.
	Now func() time.Time
}

// Do calls op (attempt 1, 2, ...) and returns how many calls it made and
// the error that stopped it: nil, op's last error (not retryable, attempts
// used up, or a wait refused by MayWait), a *BudgetError when the next wait
// would pass the context's deadline (only with Now), or a *WaitError when a
// wait failed (the context ended).
func (r Retrier) Do(ctx context.Context, op func(ctx context.Context) error) (int, error) {
	sleep := r.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil || attempt >= r.MaxAttempts || (r.Retryable != nil && !r.Retryable(err)) {
			return attempt, err
		}
		var wait time.Duration
		if r.Delay != nil {
			wait = r.Delay(attempt)
		}
		if r.After != nil {
			wait = max(wait, r.After(err))
		}
		if r.MayWait != nil && !r.MayWait(wait) {
			return attempt, err
		}
		if r.Now != nil {
			if dl, ok := ctx.Deadline(); ok && r.Now().Add(wait).After(dl) {
				return attempt, &BudgetError{Wait: wait, Last: err}
			}
		}
		if werr := sleep(ctx, wait); werr != nil {
			return attempt, &WaitError{Err: werr, Last: err}
		}
	}
}

// WaitError is a wait between two calls that failed: Err is why (the
// context's error), Last the failure that was to be retried. errors.Is
// and errors.As see both.
type WaitError struct {
	Err, Last error
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("%v (last failure: %v)", e.Err, e.Last)
}

func (e *WaitError) Unwrap() []error { return []error{e.Err, e.Last} }

// BudgetError is a retry given up because the wait before it would have
// ended after the context's deadline (Retrier.Now). Last is the failure
// that was to be retried; errors.Is and errors.As see it.
type BudgetError struct {
	Wait time.Duration
	Last error
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("%v (a retry after %v would pass the deadline)", e.Last, e.Wait)
}

func (e *BudgetError) Unwrap() error { return e.Last }

// Sleep waits d or until ctx ends, and then returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
