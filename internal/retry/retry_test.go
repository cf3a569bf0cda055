package retry_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/retry"
)

// TestDelayWithoutJitter pins the schedules lrosink uses: the reconciler's
// 2 min doubling to 1 h, the Gemini fetch's 500 ms doubling to 8 s, and the
// door's linear 5 units per attempt.
func TestDelayWithoutJitter(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		b    retry.Backoff
		want []time.Duration // attempts 1, 2, ...
	}{
		{"doubling capped", retry.Backoff{Initial: 2 * time.Minute, Multiplier: 2, Max: time.Hour},
			[]time.Duration{2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}},
		{"doubling to 8s", retry.Backoff{Initial: 500 * ms, Multiplier: 2, Max: 8 * time.Second},
			[]time.Duration{500 * ms, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}},
		{"linear", retry.Backoff{Initial: 5 * ms, Increment: 5 * ms},
			[]time.Duration{5 * ms, 10 * ms, 15 * ms, 20 * ms}},
		{"constant", retry.Backoff{Initial: time.Second}, []time.Duration{time.Second, time.Second, time.Second}},
		{"multiplier below 1 is 1", retry.Backoff{Initial: time.Second, Multiplier: 0.5}, []time.Duration{time.Second, time.Second}},
		{"max below initial", retry.Backoff{Initial: time.Minute, Multiplier: 2, Max: time.Second}, []time.Duration{time.Second, time.Second}},
		{"zero", retry.Backoff{}, []time.Duration{0, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []time.Duration
			for n := 1; n <= len(c.want); n++ {
				got = append(got, c.b.Delay(n))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("delays %v, want %v", got, c.want)
			}
		})
	}
}

// TestDelayEdges: an attempt below 1 counts as the first, and a schedule
// that would outgrow time.Duration saturates instead of wrapping.
func TestDelayEdges(t *testing.T) {
	b := retry.Backoff{Initial: time.Second, Multiplier: 2}
	for _, n := range []int{-5, 0, 1} {
		if got := b.Delay(n); got != time.Second {
			t.Errorf("Delay(%d) = %v, want 1s", n, got)
		}
	}
	for _, n := range []int{63, 64, 1000, math.MaxInt} {
		if got := b.Delay(n); got != math.MaxInt64 {
			t.Errorf("Delay(%d) = %v, want the largest duration", n, got)
		}
	}
	if got := (retry.Backoff{Initial: time.Second, Increment: time.Hour}).Delay(math.MaxInt); got != math.MaxInt64 {
		t.Errorf("linear Delay(MaxInt) = %v, want the largest duration", got)
	}
	// Full jitter on the largest duration neither overflows nor goes negative.
	huge := retry.Backoff{Initial: math.MaxInt64, Jitter: 1, Rand: func(n int64) int64 { return n - 1 }}
	if got := huge.Delay(1); got < 0 || got > 1 {
		t.Errorf("fully jittered largest delay with the largest draw = %v, want 0 or 1ns", got)
	}
}

// TestJitter: Jitter is the fraction of the delay drawn at random, below
// the delay: the drawn value comes from the injected Rand, so a seeded
// caller gets the same delays every run.
func TestJitter(t *testing.T) {
	const d = 8 * time.Second
	for _, c := range []struct {
		name   string
		jitter float64
		draw   func(n int64) int64 // stands in for Rand
		want   time.Duration
	}{
		{"equal jitter, smallest draw", 0.5, func(int64) int64 { return 0 }, d},
		{"equal jitter, largest draw", 0.5, func(n int64) int64 { return n - 1 }, d / 2},
		{"full jitter, largest draw", 1, func(n int64) int64 { return n - 1 }, 0},
		{"full jitter, middle", 1, func(n int64) int64 { return n / 2 }, d / 2},
		{"no jitter ignores Rand", 0, func(int64) int64 { panic("drawn without jitter") }, d},
		{"jitter above 1 is 1", 3, func(n int64) int64 { return n - 1 }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := retry.Backoff{Initial: d, Jitter: c.jitter, Rand: c.draw}
			if got := b.Delay(1); got != c.want {
				t.Errorf("Delay = %v, want %v", got, c.want)
			}
		})
	}
}

// TestJitterDefaultRandStaysInRange: without Rand the draw is random but
// stays within [d*(1-Jitter), d].
func TestJitterDefaultRandStaysInRange(t *testing.T) {
	b := retry.Backoff{Initial: 500 * time.Millisecond, Multiplier: 2, Max: 8 * time.Second, Jitter: 0.5}
	for n := 1; n <= 8; n++ {
		d := min(500*time.Millisecond<<(n-1), 8*time.Second)
		for range 100 {
			if got := b.Delay(n); got < d/2 || got > d {
				t.Fatalf("Delay(%d) = %v, want in [%v, %v]", n, got, d/2, d)
			}
		}
	}
}

var (
	errBusy  = errors.New("busy")
	errFinal = errors.New("final")
)

// recorder is a Retrier's Sleep that records instead of sleeping.
type recorder struct {
	slept []time.Duration
	fail  error // returned by every sleep when set
}

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.slept = append(r.slept, d)
	if r.fail != nil {
		return r.fail
	}
	return ctx.Err()
}

// TestDo: the loop calls op until it succeeds, fails for good, or runs out
// of attempts, and waits Delay(n) before retry n.
func TestDo(t *testing.T) {
	for _, c := range []struct {
		name      string
		results   []error // op's answers in turn
		max       int
		wantCalls int
		wantErr   error
		wantSleep []time.Duration
	}{
		{"first try", []error{nil}, 3, 1, nil, nil},
		{"retried then ok", []error{errBusy, errBusy, nil}, 5, 3, nil, []time.Duration{1, 2}},
		{"attempts run out", []error{errBusy, errBusy, errBusy, nil}, 3, 3, errBusy, []time.Duration{1, 2}},
		{"final error stops", []error{errBusy, errFinal, nil}, 5, 2, errFinal, []time.Duration{1}},
		{"max below 1 is one call", []error{errBusy, nil}, 0, 1, errBusy, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rec recorder
			calls := 0
			r := retry.Retrier{MaxAttempts: c.max, Delay: func(n int) time.Duration { return time.Duration(n) },
				Sleep: rec.sleep, Retryable: func(err error) bool { return errors.Is(err, errBusy) }}
			n, err := r.Do(t.Context(), func(context.Context) error {
				calls++
				return c.results[calls-1]
			})
			if n != c.wantCalls || calls != c.wantCalls || !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Errorf("Do = %d, %v after %d calls; want %d, %v", n, err, calls, c.wantCalls, c.wantErr)
			}
			if !slices.Equal(rec.slept, c.wantSleep) {
				t.Errorf("slept %v, want %v", rec.slept, c.wantSleep)
			}
		})
	}
}

// TestDoWaitFails: a wait that fails (the context ended) stops the loop
// with a *WaitError holding both the wait's error and op's last failure.
func TestDoWaitFails(t *testing.T) {
	rec := recorder{fail: context.Canceled}
	r := retry.Retrier{MaxAttempts: 5, Delay: func(int) time.Duration { return time.Second }, Sleep: rec.sleep,
		Retryable: func(error) bool { return true }}
	n, err := r.Do(t.Context(), func(context.Context) error { return errBusy })
	var we *retry.WaitError
	if !errors.As(err, &we) || n != 1 || len(rec.slept) != 1 {
		t.Fatalf("Do = %d, %v (%T), slept %v; want a WaitError after 1 call", n, err, err, rec.slept)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errBusy) || we.Err != context.Canceled || we.Last != errBusy {
		t.Errorf("WaitError %+v does not hold both errors", we)
	}
}

// TestDoMayWait: a refused wait stops the loop with op's last error, before
// sleeping (the door never waits past a claim's lease).
func TestDoMayWait(t *testing.T) {
	var rec recorder
	var offered []time.Duration
	r := retry.Retrier{MaxAttempts: 5, Delay: func(n int) time.Duration { return time.Duration(n) * time.Second }, Sleep: rec.sleep,
		Retryable: func(error) bool { return true },
		MayWait:   func(d time.Duration) bool { offered = append(offered, d); return d < 2*time.Second }}
	n, err := r.Do(t.Context(), func(context.Context) error { return errBusy })
	if n != 2 || err != errBusy {
		t.Errorf("Do = %d, %v; want 2 calls and the op's error", n, err)
	}
	if !slices.Equal(offered, []time.Duration{time.Second, 2 * time.Second}) || !slices.Equal(rec.slept, []time.Duration{time.Second}) {
		t.Errorf("offered %v, slept %v", offered, rec.slept)
	}
}

// TestDoDefaults: with no Retryable every error is retried, with no Delay
// there is no wait, and the default Sleep honours the context.
func TestDoDefaults(t *testing.T) {
	calls := 0
	n, err := retry.Retrier{MaxAttempts: 3}.Do(t.Context(), func(context.Context) error { calls++; return errBusy })
	if n != 3 || calls != 3 || err != errBusy {
		t.Errorf("Do = %d, %v after %d calls", n, err, calls)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	n, err = retry.Retrier{MaxAttempts: 3, Delay: func(int) time.Duration { return time.Hour }}.Do(ctx,
		func(context.Context) error { return errBusy })
	var we *retry.WaitError
	if n != 1 || !errors.As(err, &we) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: Do = %d, %v; want a WaitError wrapping context.Canceled after 1 call", n, err)
	}
}

// TestSleep: Sleep returns at once with the context's error when it ends
// first, and nil after a wait of nothing on a live context.
func TestSleep(t *testing.T) {
	if err := retry.Sleep(t.Context(), 0); err != nil {
		t.Errorf("Sleep(live, 0) = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, d := range []time.Duration{0, time.Hour} {
		if err := retry.Sleep(ctx, d); !errors.Is(err, context.Canceled) {
			t.Errorf("Sleep(cancelled, %v) = %v, want context.Canceled", d, err)
		}
	}
}

// serverBusy is a failure that asks for a wait of its own, as a 429 with
// RetryInfo.retryDelay does.
type serverBusy struct{ after time.Duration }

func (e serverBusy) Error() string { return "busy, retry in " + e.after.String() }

// TestDoAfter: a failure's own wait is honoured when it is longer than the
// schedule's, and the schedule's when it is shorter.
func TestDoAfter(t *testing.T) {
	var rec recorder
	results := []error{serverBusy{37 * time.Second}, serverBusy{time.Millisecond}, errBusy, nil}
	calls := 0
	r := retry.Retrier{MaxAttempts: 5, Delay: func(int) time.Duration { return time.Second }, Sleep: rec.sleep,
		After: func(err error) time.Duration {
			var sb serverBusy
			if errors.As(err, &sb) {
				return sb.after
			}
			return 0
		}}
	n, err := r.Do(t.Context(), func(context.Context) error { calls++; return results[calls-1] })
	if n != 4 || err != nil {
		t.Fatalf("Do = %d, %v", n, err)
	}
	if want := []time.Duration{37 * time.Second, time.Second, time.Second}; !slices.Equal(rec.slept, want) {
		t.Errorf("slept %v, want %v", rec.slept, want)
	}
}

// TestDoBudget: with Now, a wait that would end after the context's
// deadline is not started: the loop stops with a *BudgetError wrapping the
// last failure. A wait that fits is taken.
func TestDoBudget(t *testing.T) {
	// The deadline is real (the context enforces it), the clock is not:
	// it moves only by what was slept, so nothing here waits for real.
	now := time.Now()
	ctx, cancel := context.WithDeadline(t.Context(), now.Add(time.Minute))
	defer cancel()
	var rec recorder
	calls := 0
	waits := []time.Duration{30 * time.Second, 31 * time.Second}
	r := retry.Retrier{MaxAttempts: 5, Sleep: func(ctx context.Context, d time.Duration) error {
		now = now.Add(d) // the injected clock moves by what was slept
		return rec.sleep(ctx, d)
	}, Now: func() time.Time { return now },
		After: func(error) time.Duration { return waits[calls-1] }}
	n, err := r.Do(ctx, func(context.Context) error { calls++; return errBusy })
	var be *retry.BudgetError
	if n != 2 || !errors.As(err, &be) || !errors.Is(err, errBusy) || be.Wait != 31*time.Second {
		t.Fatalf("Do = %d, %v (%T); want a BudgetError after 2 calls", n, err, err)
	}
	if !slices.Equal(rec.slept, []time.Duration{30 * time.Second}) {
		t.Errorf("slept %v", rec.slept)
	}
	// Without a deadline there is no budget.
	calls, rec.slept = 0, nil
	waits = []time.Duration{time.Hour, time.Hour}
	r.MaxAttempts = 2
	if n, err := r.Do(t.Context(), func(context.Context) error { calls++; return errBusy }); n != 2 || err != errBusy {
		t.Errorf("no deadline: Do = %d, %v", n, err)
	}
}
