package reconcile_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestPartialPassLeavesTheRestDue: a pass whose deadline comes while Gemini
// is slow stops early and says so (Partial); a check cut mid-call is
// neither counted nor rescheduled, so every operation it did not finish
// stays due and the next pass checks exactly those: over both passes each
// operation is checked once, none twice, none skipped.
func TestPartialPassLeavesTheRestDue(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		fake := fakegemini.New()
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(100 * time.Millisecond):
				fake.Handler().ServeHTTP(w, r)
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(slow.Close)
		clk := testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
		log := logging.New(&testutil.SyncBuffer{}, slog.LevelInfo, "")
		door, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: &testutil.Recorder{}, Log: log, Now: clk.Now, Grace: 90 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := reconcile.New(reconcile.Config{Ledger: claims.New(s), Door: door, Gemini: fakeFetcher(t, slow, log), Log: log,
			Now: clk.Now, StuckAfter: 6 * time.Hour, Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		const n = 10
		for i := range n {
			fake.SetBatch(fmt.Sprintf("p%d", i), fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
			mustRegister(t, door, fmt.Sprintf("batches/p%d", i))
		}
		clk.Advance(2 * time.Minute)
		// Ten checks of 100 ms one at a time take a second; the work part
		// of a 500 ms budget ends at 400 ms.
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		first, err := rec.Pass(ctx)
		cancel()
		if err != nil || !first.Partial || first.Checked >= n {
			t.Fatalf("first pass %+v, %v: want partial, fewer than %d checked", first, err, n)
		}
		second := mustPass(t, rec) // no deadline: runs to the end
		if second.Partial || first.Checked+second.Checked != n {
			t.Fatalf("passes checked %d + %d, want %d in all (second partial %v)", first.Checked, second.Checked, n, second.Partial)
		}
		for i := range n {
			op, err := s.GetOperation(t.Context(), fmt.Sprintf("gemini:batches%%2Fp%d", i))
			if err != nil || op.Checks != 1 {
				t.Errorf("p%d: %d checks (%v), want 1", i, op.Checks, err)
			}
		}
	})
}

// hangingCount is a ledger whose count query answers only when its
// context ends: a store slower than the pass's whole budget.
type hangingCount struct{ ledger.Ledger }

func (hangingCount) CountOperations(ctx context.Context, _ ledger.Filter) (int64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestStuckAlertingCutByTheDeadlineIsPartial: when even the reserve runs
// out (the store is slower than a fifth of the budget), the pass answers
// partial, not a failure: the next pass alerts what is due.
func TestStuckAlertingCutByTheDeadlineIsPartial(t *testing.T) {
	t.Parallel()
	s := hangingCount{testutil.MemLedger(t)}
	clk := testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	logs := &testutil.SyncBuffer{}
	log := logging.New(logs, slog.LevelInfo, "")
	door, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: &testutil.Recorder{}, Log: log, Now: clk.Now, Grace: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(reconcile.Config{Ledger: claims.New(s), Door: door, Log: log, Now: clk.Now, StuckAfter: 6 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	sum, err := rec.Pass(ctx)
	if err != nil || !sum.Partial {
		t.Fatalf("pass %+v, %v: want partial and no error", sum, err)
	}
	if n := logs.CountLines("stuck alerting cut short"); n != 1 {
		t.Fatalf("%d cut-short lines, want 1", n)
	}
	// Its 0s were never counted: the gauges must not take them (metrics).
	for _, f := range []reconcile.Figure{reconcile.FigureStuck, reconcile.FigureBacklog, reconcile.FigureStillPending} {
		if sum.Measured(f) {
			t.Errorf("a pass cut before counting (and without a key) claims figure %d counted: %+v", f, sum)
		}
	}
}

// TestPassSaysWhatItCounted: a whole pass with a key counts the stuck
// operations and the due backlog, and says so; StillPending only with a
// Counter.
func TestPassSaysWhatItCounted(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 0)
	w.register("batches/counted")
	sum := w.pass()
	if !sum.Measured(reconcile.FigureStuck) || !sum.Measured(reconcile.FigureBacklog) || sum.Measured(reconcile.FigureStillPending) {
		t.Fatalf("summary %+v: want stuck and backlog counted, still_pending not (no Counter)", sum)
	}
}

// stallingWrites is a ledger whose writes, while armed, end the pass (the
// pass's deadline coming as the write starts) and fail: a store slower
// than what is left of the pass, with no timer to race.
type stallingWrites struct {
	ledger.Ledger
	armed  *atomic.Bool
	cancel *atomic.Pointer[context.CancelFunc]
	cut    *atomic.Int64
}

func (l stallingWrites) Apply(ctx context.Context, ws ...ledger.Write) ([]ledger.Revision, error) {
	if l.armed.Load() {
		// The door writes under a context of its own (detached, with its
		// own bound): the write fails as the pass ends, whatever it got.
		l.cut.Add(1)
		(*l.cancel.Load())()
		return nil, fmt.Errorf("stalled until the pass ended: %w", context.DeadlineExceeded)
	}
	return l.Ledger.Apply(ctx, ws...)
}

// TestCheckWhoseWriteTheDeadlineCutIsNoCheck: a fetch that returned but
// whose answer the pass's deadline kept from the ledger is not counted; the
// operation stays due and the next pass checks and counts it once (a loaded
// machine's slow last write once made one operation count in both passes).
func TestCheckWhoseWriteTheDeadlineCutIsNoCheck(t *testing.T) {
	t.Parallel()
	armed := &atomic.Bool{}
	s := stallingWrites{Ledger: testutil.MemLedger(t), armed: armed, cancel: &atomic.Pointer[context.CancelFunc]{}, cut: &atomic.Int64{}}
	w := newWorldOn(t, 0, s, func() int64 { return 0 }) // no adoption: the pass's one write is the check's
	fake := w.fake
	fake.SetBatch("cutwrite", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	w.register("batches/cutwrite")
	w.clock.Advance(2 * time.Minute)
	ctx, cancel := context.WithCancel(t.Context())
	s.cancel.Store(&cancel)
	armed.Store(true)
	first, _ := w.rec.Pass(ctx)
	cancel()
	armed.Store(false)
	// The check fetched the operation and then met the cut write.
	if s.cut.Load() == 0 || fake.Calls("/v1beta/batches/cutwrite") != 1 {
		t.Fatalf("first pass: %d cut writes, %d GETs of the batch: want its check to fetch it and meet the cut write",
			s.cut.Load(), fake.Calls("/v1beta/batches/cutwrite"))
	}
	if first.Checked != 0 || first.StillPending != 0 {
		t.Fatalf("first pass %+v: a check whose write the deadline cut counted", first)
	}
	second := w.pass()
	if second.Checked != 1 {
		t.Fatalf("second pass %+v: want the operation checked once", second)
	}
	op, err := s.GetOperation(t.Context(), "gemini:batches%2Fcutwrite")
	if err != nil || op.Checks != 1 {
		t.Fatalf("%d checks recorded (%v), want 1", op.Checks, err)
	}
}
