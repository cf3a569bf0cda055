package reconcile_test

import (
	"fmt"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/testutil"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
)

// neverNotifiedCalls runs a pass every minute of fake time for 6 h against
// one operation that Gemini keeps reporting RUNNING and no webhook settles,
// and returns how many times Gemini was asked.
func neverNotifiedCalls(t testing.TB, w *world) int {
	w.register("batches/slow")
	w.fake.SetBatch("slow", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: tDone})
	for range 6 * 60 {
		w.clock.Advance(time.Minute)
		if _, err := w.rec.Pass(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return w.fake.Calls("/v1beta/batches/slow")
}

// TestNeverNotifiedOperationCostsFewCalls pins benchmark P3: with backoff
// from 2 min doubling to 1 h, six hours cost at most 12 Gemini calls (a fixed
// 5-minute cadence would cost 72).
func TestNeverNotifiedOperationCostsFewCalls(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 0)
	if n := neverNotifiedCalls(t, w); n > 12 || n < 6 {
		t.Fatalf("%d Gemini calls over 6 h, want between 6 and 12", n)
	}
}

// BenchmarkNeverNotifiedCalls reports P3.
func BenchmarkNeverNotifiedCalls(b *testing.B) {
	w := newWorld(b, 0)
	b.ReportMetric(float64(neverNotifiedCalls(b, w)), "gemini-calls/6h")
}

// BenchmarkPassLedgerSize is P2: the same 100 due pending operations in a
// ledger of 1,000 or 100,000 settled ones. Reads per pass must not grow with
// the ledger.
func BenchmarkPassLedgerSize(b *testing.B) {
	for _, settled := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("settled=%d", settled), func(b *testing.B) {
			// The Firestore emulator, as the recorded P2 figures
			// (docs/BENCHMARKS.md) were measured.
			fs := testutil.FirestoreLedger(b)
			w := newWorldOn(b, 0, fs, func() int64 { r, _, _ := fs.Counts().Snapshot(); return r })
			seed(b, w, settled)
			for i := range 100 {
				id := fmt.Sprintf("pending-%03d", i)
				w.register("batches/" + id)
				w.fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: tDone})
			}
			var reads int64
			for b.Loop() {
				b.StopTimer()
				w.clock.Advance(2 * time.Hour) // all 100 due again
				r0 := w.reads()
				b.StartTimer()
				s, err := w.rec.Pass(b.Context())
				if err != nil || s.Checked != 100 {
					b.Fatalf("pass %+v %v", s, err)
				}
				b.StopTimer()
				r1 := w.reads()
				reads += r1 - r0
				b.StartTimer()
			}
			b.ReportMetric(float64(reads)/float64(b.N), "firestore-reads/pass")
		})
	}
}

// seed writes n settled operations straight through the ledger port.
func seed(b *testing.B, w *world, n int) {
	b.Helper()
	ctx := b.Context()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			id := fmt.Sprintf("settled-%06d", i)
			op := ledger.Operation{ID: "gemini:batches%2F" + id, Name: "batches/" + id, APIName: "batches/" + id, Kind: "batch",
				State: lifecycle.Succeeded, UpdateTime: tDone, SubmittedAt: tDone, SettledAt: tDone, SettledBy: "webhook"}
			if _, _, err := claims.New(w.store).CommitOperation(ctx, op, nil); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkPassLedgerSizeSQLite is P2 on the embedded store, whose indexes
// are real (the Firestore emulator evaluates queries without them).
func BenchmarkPassLedgerSizeSQLite(b *testing.B) {
	for _, settled := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("settled=%d", settled), func(b *testing.B) {
			ctx := b.Context()
			store, err := sqliteledger.Open(ctx, filepath.Join(b.TempDir(), "p2.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			c := testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
			door, err := ingest.New(ingest.Config{Store: claims.New(store), Sink: &testutil.Recorder{}, Log: logging.Discard(), Now: c.Now, Grace: 90 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			fake := fakegemini.New()
			srv := fake.Start(b)
			f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: srv.URL, HTTPClient: srv.Client()})
			if err != nil {
				b.Fatal(err)
			}
			rec, err := reconcile.New(reconcile.Config{Ledger: claims.New(store), Door: door, Gemini: f, Log: logging.Discard(), Now: c.Now, StuckAfter: 6 * time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			for i := range settled {
				id := fmt.Sprintf("settled-%06d", i)
				op := ledger.Operation{ID: "gemini:batches%2F" + id, Name: "batches/" + id, APIName: "batches/" + id, Kind: "batch",
					State: lifecycle.Succeeded, UpdateTime: tDone, SubmittedAt: tDone, SettledAt: tDone, SettledBy: "webhook"}
				if _, _, err := claims.New(store).CommitOperation(ctx, op, nil); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 100 {
				id := fmt.Sprintf("pending-%03d", i)
				if _, err := door.Ingest(ctx, event.Event{Name: "batches/" + id, State: lifecycle.Pending, Source: event.SourceRegister}); err != nil {
					b.Fatal(err)
				}
				fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: tDone})
			}
			for b.Loop() {
				b.StopTimer()
				c.Advance(2 * time.Hour)
				b.StartTimer()
				if s, err := rec.Pass(ctx); err != nil || s.Checked != 100 {
					b.Fatalf("pass %+v %v", s, err)
				}
			}
		})
	}
}

// TestPassReadsEachDueOperationOnce: the door decides on the operation the
// pass has just listed instead of reading it again, so each due operation
// costs the pass one billed read (its share of the due query), on the
// memory ledger and on Firestore alike. Counted as the difference between
// a pass over 20 and a pass over 10 due operations, so the fixed reads of a
// pass (claims, stuck, the due query's first read) cancel out.
func TestPassReadsEachDueOperationOnce(t *testing.T) {
	t.Parallel()
	perPass := func(t *testing.T, w *world, due int) int64 {
		for i := range due {
			id := fmt.Sprintf("due-%d-%03d", due, i)
			w.register("batches/" + id)
			w.fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: tDone})
		}
		w.clock.Advance(2 * time.Hour) // every registered operation is due
		w.pass()                       // RUNNING applied: each is rescheduled
		w.clock.Advance(2 * time.Hour)
		r0 := w.reads()
		if s := w.pass(); s.Checked != due {
			t.Fatalf("pass checked %d, want %d", s.Checked, due)
		}
		return w.reads() - r0
	}
	for _, c := range []struct {
		name  string
		world func(t *testing.T) *world
	}{
		{"memory", func(t *testing.T) *world { return newWorld(t, 0) }},
		{"firestore", func(t *testing.T) *world {
			fs := testutil.FirestoreLedger(t)
			return newWorldOn(t, 0, fs, func() int64 { r, _, _ := fs.Counts().Snapshot(); return r })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ten, twenty := perPass(t, c.world(t), 10), perPass(t, c.world(t), 20)
			if per := float64(twenty-ten) / 10; per != 1 {
				t.Fatalf("a pass reads %.1f times per due operation (%d reads for 10, %d for 20), want 1", per, ten, twenty)
			}
		})
	}
}
