package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/shard"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestPassRangeCoversOnlyItsBuckets: the range passes of a 4-way split
// check, between them, every due operation exactly once, each only those of
// its own buckets; the shared pass checks none. Later, when they are stuck,
// each range pass alerts only its own, and the shared pass counts them all.
func TestPassRangeCoversOnlyItsBuckets(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		w := newWorldOn(t, 0, s, func() int64 { return 0 })
		const n = 80 // enough that every range of a 4-way split holds some
		var names []string
		for i := range n {
			id := fmt.Sprintf("r%02d", i)
			w.fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
			names = append(names, "batches/"+id)
			w.register("batches/" + id)
		}
		ranges, err := shard.Split(4)
		if err != nil {
			t.Fatal(err)
		}
		inRange := func(rg shard.Range) (in int) {
			for _, name := range names {
				if rg.Contains(shard.Of(w.op(name).ID)) {
					in++
				}
			}
			return in
		}
		w.clock.Advance(2 * time.Minute)
		if got, err := w.rec.PassShared(t.Context()); err != nil || got.Checked != 0 || got.StuckAlerts != 0 {
			t.Fatalf("PassShared = %+v, %v; want no check, no stuck alert", got, err)
		}
		for _, rg := range ranges {
			want := inRange(rg)
			if want == 0 {
				t.Fatalf("range %v holds none of %d operations: the test proves nothing", rg, n)
			}
			got, err := w.rec.PassRange(t.Context(), rg)
			if err != nil || got.Checked != want {
				t.Fatalf("PassRange(%v) = %+v, %v; want %d checked", rg, got, err, want)
			}
			for _, name := range names {
				op := w.op(name)
				wantChecks := 0 // the ranges go in bucket order: those below rg.Hi are done
				if shard.Of(op.ID) < rg.Hi {
					wantChecks = 1
				}
				if op.Checks != wantChecks {
					t.Fatalf("after PassRange(%v): %s (bucket %d) checked %d times, want %d", rg, name, shard.Of(op.ID), op.Checks, wantChecks)
				}
			}
		}
		// Stuck: every operation is pending past StuckAfter.
		w.clock.Advance(7 * time.Hour)
		shared, err := w.rec.PassShared(t.Context())
		if err != nil || shared.Stuck != n || shared.StuckAlerts != 0 {
			t.Fatalf("PassShared = %+v, %v; want stuck %d counted, no alert", shared, err, n)
		}
		alerts := 0
		for _, rg := range ranges {
			before := strings.Count(w.logs.String(), `"alert":"stuck"`)
			got, err := w.rec.PassRange(t.Context(), rg)
			if err != nil || got.StuckAlerts != inRange(rg) {
				t.Fatalf("PassRange(%v) = %+v, %v; want %d stuck alerts", rg, got, err, inRange(rg))
			}
			if lines := strings.Count(w.logs.String(), `"alert":"stuck"`) - before; lines != got.StuckAlerts {
				t.Fatalf("PassRange(%v) logged %d stuck alert lines, summary says %d", rg, lines, got.StuckAlerts)
			}
			alerts += got.StuckAlerts
		}
		if alerts != n {
			t.Fatalf("range passes alerted %d operations, want each of %d once", alerts, n)
		}
	})
}

// TestPassRangeRefusesABadRange: an empty or out-of-bounds range is the
// caller's error, before anything is read.
func TestPassRangeRefusesABadRange(t *testing.T) {
	w := newWorld(t, 0)
	for _, rg := range []shard.Range{{Lo: 3, Hi: 3}, {Lo: -1, Hi: 4}, {Lo: 60, Hi: 65}} {
		if _, err := w.rec.PassRange(t.Context(), rg); !errors.Is(err, shard.ErrBadRange) {
			t.Errorf("PassRange(%v) = %v, want ErrBadRange", rg, err)
		}
	}
}

// TestPassRangeIsTimeBoxed: a range pass whose deadline comes while Gemini
// is slow stops early and says so, as Pass does; the next range pass checks
// exactly what it left, and nothing outside the range is checked.
func TestPassRangeIsTimeBoxed(t *testing.T) {
	fake := fakegemini.New()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(100 * time.Millisecond):
			fake.Handler().ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	s := claims.New(testutil.MemLedger(t))
	clk := testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	log := logging.New(&testutil.SyncBuffer{}, slog.LevelInfo, "")
	door, err := ingest.New(ingest.Config{Store: s, Sink: &testutil.Recorder{}, Log: log, Now: clk.Now, Grace: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(reconcile.Config{Ledger: s, Door: door, Gemini: fakeFetcher(t, slow, log), Log: log,
		Now: clk.Now, StuckAfter: 6 * time.Hour, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	half := shard.Range{Lo: 0, Hi: 32}
	in := 0
	for i := range 24 {
		id := fmt.Sprintf("tb%02d", i)
		fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
		mustRegister(t, door, "batches/"+id)
		if half.Contains(shard.Of("gemini:batches%2F" + id)) {
			in++
		}
	}
	if in < 6 {
		t.Fatalf("only %d of 24 operations in %v: the test proves little", in, half)
	}
	clk.Advance(2 * time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	first, err := rec.PassRange(ctx, half)
	cancel()
	if err != nil || !first.Partial || first.Checked >= in {
		t.Fatalf("first range pass %+v, %v: want partial, fewer than %d checked", first, err, in)
	}
	second, err := rec.PassRange(t.Context(), half)
	if err != nil || second.Partial || first.Checked+second.Checked != in {
		t.Fatalf("range passes checked %d + %d (second %+v, %v), want the %d of the range", first.Checked, second.Checked, second, err, in)
	}
}
