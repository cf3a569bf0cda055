package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/testutil"
)

// poisonLedger models operations the door can never ingest: the store
// accepts their creation (registration) and refuses every later commit, as
// it would a document it cannot store. With unschedulable set it refuses
// the reconciler's schedule write too, so they cannot even be moved out of
// the due set.
type poisonLedger struct {
	*claims.Ledger
	poison        map[string]bool
	unschedulable bool
}

var errPoison = errors.New("injected: the store refuses this operation")

func (l *poisonLedger) CommitOperation(ctx context.Context, op ledger.Operation, c *ledger.Claim) (ledger.Revision, *ledger.Lease, error) {
	if l.poison[op.ID] && op.Rev.Exists() {
		return ledger.Revision{}, nil, fmt.Errorf("commit %s: %w", op.ID, errPoison)
	}
	return l.Ledger.CommitOperation(ctx, op, c)
}

func (l *poisonLedger) ScheduleCheck(ctx context.Context, op ledger.Operation, next time.Time, note string, now time.Time) (ledger.Revision, error) {
	if l.unschedulable && l.poison[op.ID] {
		return ledger.Revision{}, fmt.Errorf("schedule %s: %w", op.ID, errPoison)
	}
	return l.Ledger.ScheduleCheck(ctx, op, next, note, now)
}

// stores runs f on each ledger adapter: paging is store-dependent.
func stores(t *testing.T, f func(t *testing.T, store ledger.Ledger)) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		t.Parallel()
		f(t, s)
	})
}

type poisonWorld struct {
	store ledger.Ledger // the real store, for reading back
	door  *ingest.Door
	fake  *fakegemini.Server
	rec   *reconcile.Reconciler
	sink  *testutil.Recorder
	clock *clock
}

const poisonCount = 100

// newPoisonWorld registers poisonCount operations the door cannot ingest,
// then, a second later (so it sorts behind all of them in the due order),
// one good operation; Gemini says all of them succeeded. Pages hold 10
// operations, so the poison ones fill ten pages before the good one.
func newPoisonWorld(t *testing.T, store ledger.Ledger, unschedulable bool) (*poisonWorld, []string) {
	t.Helper()
	w := &poisonWorld{store: store, sink: &testutil.Recorder{}, fake: fakegemini.New(),
		clock: testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))}
	pl := &poisonLedger{Ledger: claims.New(store), poison: map[string]bool{}, unschedulable: unschedulable}
	log := logging.New(&testutil.SyncBuffer{}, slog.LevelInfo, "")
	var err error
	if w.door, err = ingest.New(ingest.Config{Store: pl, Sink: w.sink, Log: log, Now: w.clock.Now, Grace: 90 * time.Second}); err != nil {
		t.Fatal(err)
	}
	srv := w.fake.Start(t)
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if w.rec, err = reconcile.New(reconcile.Config{Ledger: pl, Door: w.door, Gemini: f, Log: log, Now: w.clock.Now,
		StuckAfter: 6 * time.Hour, PageSize: 10, MaxOperations: 1000}); err != nil {
		t.Fatal(err)
	}
	var poison []string
	for i := range poisonCount {
		id := fmt.Sprintf("poison-%03d", i)
		docID, err := opname.DocID(opname.KeyPrefix + "batches/" + id)
		if err != nil {
			t.Fatal(err)
		}
		pl.poison[docID] = true
		poison = append(poison, docID)
		w.register(t, "batches/"+id)
		w.fake.SetBatch(id, succeeded(id))
	}
	w.clock.Advance(time.Second)
	w.register(t, "batches/good")
	w.fake.SetBatch("good", succeeded("good"))
	return w, poison
}

func (w *poisonWorld) register(t *testing.T, name string) {
	t.Helper()
	if _, err := w.door.Ingest(t.Context(), event.Event{Name: name, State: lifecycle.Pending, Source: event.SourceRegister}); err != nil {
		t.Fatal(err)
	}
}

func (w *poisonWorld) get(t *testing.T, id string) ledger.Operation {
	t.Helper()
	op, err := w.store.GetOperation(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// TestGoodOperationBehindPoisonOnesSettles: the door fails for 100 due
// operations that sort before a good one. Each failure reschedules the
// operation with backoff (note ingest-error), so the pass moves on and the
// good operation settles in the same pass; later passes leave the poison
// ones alone until their growing backoff is over.
func TestGoodOperationBehindPoisonOnesSettles(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, store ledger.Ledger) {
		w, poison := newPoisonWorld(t, store, false)
		w.clock.Advance(2 * time.Minute)
		first := w.clock.Now()
		s, err := w.rec.Pass(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if s.Settled != 1 || s.Checked != poisonCount+1 || s.Errors != poisonCount || s.StillPending != poisonCount {
			t.Fatalf("summary %+v, want the good operation settled and %d errors", s, poisonCount)
		}
		if n := w.sink.PerKey(); n["gemini:batches/good"] != 1 || len(n) != 1 {
			t.Fatalf("messages %v", n)
		}
		for _, id := range poison {
			op := w.get(t, id)
			if op.State != lifecycle.Pending || op.Checks != 1 || op.LastCheck != "ingest-error" || !op.NextCheckAt.Equal(first.Add(2*time.Minute)) {
				t.Fatalf("%s after the first pass: state %s checks %d last %q next %v", id, op.State, op.Checks, op.LastCheck, op.NextCheckAt)
			}
		}
		// Not due again before its backoff: no Gemini call, no error.
		w.clock.Advance(time.Minute)
		if s, err := w.rec.Pass(t.Context()); err != nil || s.Checked != 0 || s.Errors != 0 {
			t.Fatalf("pass inside the backoff: %+v %v", s, err)
		}
		// Due again: checked once more, and the backoff doubles.
		w.clock.Advance(time.Minute)
		second := w.clock.Now()
		if s, err := w.rec.Pass(t.Context()); err != nil || s.Checked != poisonCount || s.Errors != poisonCount {
			t.Fatalf("second pass: %+v %v", s, err)
		}
		for _, id := range poison {
			op := w.get(t, id)
			if op.Checks != 2 || op.LastCheck != "ingest-error" || !op.NextCheckAt.Equal(second.Add(4*time.Minute)) {
				t.Fatalf("%s after the second pass: checks %d last %q next %v, want next %v", id, op.Checks, op.LastCheck, op.NextCheckAt, second.Add(4*time.Minute))
			}
		}
		// Two fetches, one GET each (a terminal batch's statistics come
		// with its state).
		if n := w.fake.Calls("/v1beta/batches/poison-000"); n != 2 {
			t.Fatalf("a poison operation got %d calls in three passes, want 2 (fetched twice)", n)
		}
	})
}

// TestGoodOperationBehindUnschedulablePoisonSettles: the store refuses
// even the schedule write for the poison operations, so they stay at the
// front of the due order. The pass pages past what it already tried and
// still reaches the good one in the same pass.
func TestGoodOperationBehindUnschedulablePoisonSettles(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, store ledger.Ledger) {
		w, poison := newPoisonWorld(t, store, true)
		w.clock.Advance(2 * time.Minute)
		s, err := w.rec.Pass(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// Two errors per poison operation: the door, then the schedule.
		if s.Settled != 1 || s.Checked != poisonCount+1 || s.Errors != 2*poisonCount {
			t.Fatalf("summary %+v, want the good operation settled and %d errors", s, 2*poisonCount)
		}
		if n := w.sink.PerKey(); n["gemini:batches/good"] != 1 {
			t.Fatalf("messages %v", n)
		}
		if op := w.get(t, poison[0]); op.State != lifecycle.Pending || op.Checks != 0 || op.NextCheckAt.After(w.clock.Now()) {
			t.Fatalf("an unschedulable operation changed: %+v", op)
		}
	})
}
