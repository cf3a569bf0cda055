package reconcile_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ledger"
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
