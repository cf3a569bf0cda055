package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/fetcherr"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/testutil"
)

// budgetWorld is a reconciler on the memory ledger whose Gemini fetcher
// (the real SDK against the fake) waits on a Budget, everything on one
// virtual clock: a sleep moves the clock to when it ends. The fake records
// the virtual time of every request it gets.
type budgetWorld struct {
	clk      *clock
	fake     *fakegemini.Server
	rec      *reconcile.Reconciler
	mu       sync.Mutex
	requests []time.Time
}

func newBudgetWorld(t *testing.T, qps float64, shards, concurrency int, sleep func(context.Context, time.Duration) error) *budgetWorld {
	t.Helper()
	w := &budgetWorld{clk: testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)), fake: fakegemini.New()}
	if sleep == nil {
		sleep = w.virtualSleep
	}
	srv := w.fake.Start(t)
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/batches/") {
			w.mu.Lock()
			w.requests = append(w.requests, w.clk.Now())
			w.mu.Unlock()
		}
		inner.ServeHTTP(rw, r)
	})
	log := logging.New(&testutil.SyncBuffer{}, slog.LevelInfo, "")
	s := testutil.MemLedger(t)
	door, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: &testutil.Recorder{}, Log: log, Now: w.clk.Now, Grace: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	budget := reconcile.NewBudget(qps, shards, w.clk.Now, sleep)
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: srv.URL, HTTPClient: srv.Client(),
		Sleep: sleep, Now: w.clk.Now, Wait: budget.Wait, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if w.rec, err = reconcile.New(reconcile.Config{Ledger: claims.New(s), Door: door, Gemini: f, Log: log, Now: w.clk.Now,
		StuckAfter: 6 * time.Hour, Concurrency: concurrency, MaxOperations: 10_000}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		id := fmt.Sprintf("b%03d", i)
		w.fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
		mustRegister(t, door, "batches/"+id)
	}
	w.clk.Advance(2 * time.Minute) // all 100 due
	return w
}

// virtualSleep waits d of virtual time: the clock moves to when it ends.
func (w *budgetWorld) virtualSleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.clk.AdvanceTo(w.clk.Now().Add(d))
	return nil
}

// perSecond counts the requests the fake got in each virtual second.
func (w *budgetWorld) perSecond() map[int64]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int64]int{}
	for _, at := range w.requests {
		out[at.Unix()]++
	}
	return out
}

// TestGeminiBudgetIsNeverExceeded: with LROSINK_GEMINI_QPS 10 shared by 2
// shards (5 a second for this pass), 100 due checks, some answered 429
// (their retries are requests too), never put more than 5 requests into
// one virtual second, and all are checked.
func TestGeminiBudgetIsNeverExceeded(t *testing.T) {
	w := newBudgetWorld(t, 10, 2, 1, nil)
	for i := range 7 { // the first try of seven checks
		path := fmt.Sprintf("/batches/b%03d", i*13)
		w.fake.FailNextWith(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, path) },
			fakegemini.Fault{Status: http.StatusTooManyRequests, RetryDelay: 300 * time.Millisecond}, 1)
	}
	s := mustPass(t, w.rec)
	if s.Checked != 100 || s.Errors != 0 || s.DueBacklog != 0 {
		t.Fatalf("summary %+v: want 100 checked, no errors, no backlog", s)
	}
	total := 0
	for sec, n := range w.perSecond() {
		total += n
		if n > 5 {
			t.Errorf("%d requests in virtual second %d, budget 5", n, sec)
		}
	}
	if total != 107 {
		t.Errorf("%d requests, want 107 (100 checks and 7 retries after a 429)", total)
	}
}

// TestGeminiBudgetHoldsWithConcurrentChecks: eight checks at once share the
// same budget: over the pass, requests never outrun 1 + rate × elapsed.
func TestGeminiBudgetHoldsWithConcurrentChecks(t *testing.T) {
	w := newBudgetWorld(t, 4, 1, 8, nil)
	start := w.clk.Now()
	s := mustPass(t, w.rec)
	elapsed := w.clk.Now().Sub(start).Seconds()
	if s.Checked != 100 || s.Errors != 0 {
		t.Fatalf("summary %+v", s)
	}
	if n := len(w.requests); float64(n) > 1+4*elapsed {
		t.Fatalf("%d requests in %.1f virtual seconds at 4 a second", n, elapsed)
	}
}

// TestTooSmallABudgetIsLateness: a budget that cannot cover the due set
// within the pass leaves the rest due: the pass is partial, counts no
// error, and reports the backlog and how late it is.
func TestTooSmallABudgetIsLateness(t *testing.T) {
	var w *budgetWorld
	// The pass may spend 20 virtual seconds on Gemini: a budget wait past
	// that blocks until the pass's work time ends, as a real one would.
	var limit time.Time
	sleep := func(ctx context.Context, d time.Duration) error {
		if w.clk.Now().Add(d).After(limit) {
			<-ctx.Done()
			return ctx.Err()
		}
		return w.virtualSleep(ctx, d)
	}
	w = newBudgetWorld(t, 1, 1, 4, sleep)
	limit = w.clk.Now().Add(20 * time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	s, err := w.rec.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Errors != 0 || !s.Partial || s.Checked > 21 || s.Checked+s.DueBacklog != 100 || s.OldestOverdueSeconds <= 0 {
		t.Fatalf("summary %+v: want partial, no errors, at most 21 checked, the rest as backlog, overdue > 0", s)
	}
}

// TestTryWaitNeverQueues: TryWait (a hint's confirmation) takes a slot only
// when one is free now and otherwise fails at once with ErrBudgetSpent,
// taking nothing; it shares the slots of Wait (the reconciler's), so the
// two together never exceed the rate. A nil budget never refuses.
func TestTryWaitNeverQueues(t *testing.T) {
	clk := testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	slept := 0
	b := reconcile.NewBudget(2, 1, clk.Now, func(ctx context.Context, d time.Duration) error {
		slept++
		clk.Advance(d)
		return ctx.Err()
	})
	if err := b.TryWait(t.Context()); err != nil {
		t.Fatalf("first TryWait: %v", err)
	}
	for range 3 {
		if err := b.TryWait(t.Context()); !errors.Is(err, fetcherr.ErrBudgetSpent) {
			t.Fatalf("TryWait within 500 ms of a call: %v, want ErrBudgetSpent", err)
		}
	}
	// The refusals took nothing: the reconciler's next call waits the one
	// interval, not four.
	start := clk.Now()
	if at, err := b.Take(t.Context()); err != nil || !at.Equal(start.Add(500*time.Millisecond)) || slept != 1 {
		t.Fatalf("Take after refused TryWaits: at %v (%v), %d sleeps; want %v", at, err, slept, start.Add(500*time.Millisecond))
	}
	if err := b.TryWait(t.Context()); !errors.Is(err, fetcherr.ErrBudgetSpent) {
		t.Fatalf("TryWait right after the reconciler's call: %v", err)
	}
	clk.Advance(500 * time.Millisecond)
	if err := b.TryWait(t.Context()); err != nil || slept != 1 {
		t.Fatalf("TryWait once the slot is free: %v (%d sleeps; it must never sleep)", err, slept)
	}
	var none *reconcile.Budget
	if err := none.TryWait(t.Context()); err != nil {
		t.Fatalf("nil budget: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.TryWait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended context: %v", err)
	}
}
