package ingest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestDrainWaitsForDetachedWork: a completion whose caller hung up goes on
// detached. A drain bounded by a context that ends returns with the work
// still in flight; a draining door refuses new work without touching the
// ledger; an unbounded drain returns only once the work has published and
// committed DONE.
func TestDrainWaitsForDetachedWork(t *testing.T) {
	t.Parallel()
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		t.Parallel()
		rec := &testutil.Recorder{}
		stuck := &stuckSink{inner: rec, entered: make(chan struct{}), release: make(chan struct{})}
		d := storeDoor(t, claims.New(s), stuck, newClock())
		const id = "gemini:batches%2Fdrain"

		ctx, hangUp := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := d.Ingest(ctx, ev("batches/drain", lifecycle.Succeeded, tDone, event.SourceWebhook))
			done <- err
		}()
		<-stuck.entered
		hangUp()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("the caller that hung up got %v, want context.Canceled", err)
		}

		// The bound: a drain whose context has ended returns at once.
		ended, end := context.WithCancel(t.Context())
		end()
		if err := d.Drain(ended); !errors.Is(err, context.Canceled) {
			t.Fatalf("drain with an ended context = %v, want context.Canceled", err)
		}
		if c := mustClaim(t, s, id); c.Status != ledger.ClaimHeld {
			t.Fatalf("claim %s while its work is in flight, want CLAIMED", c.Status)
		}

		// Draining: new work is refused and touches nothing.
		_, err := d.Ingest(t.Context(), ev("batches/late-comer", lifecycle.Succeeded, tDone, event.SourceWebhook))
		if !errors.Is(err, ingest.ErrUnavailable) {
			t.Fatalf("ingest while draining = %v, want ErrUnavailable", err)
		}
		if _, err := s.GetOperation(t.Context(), "gemini:batches%2Flate-comer"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("work refused while draining reached the ledger: %v", err)
		}

		drained := make(chan error, 1)
		go func() { drained <- d.Drain(t.Context()) }()
		close(stuck.release)
		if err := <-drained; err != nil {
			t.Fatalf("drain: %v", err)
		}
		if c := mustClaim(t, s, id); c.Status != ledger.ClaimDone {
			t.Fatalf("claim %s after the drain returned, want DONE", c.Status)
		}
		if n := len(rec.All()); n != 1 {
			t.Fatalf("%d messages after the drain returned, want 1", n)
		}
	})
}

// TestDrainOfAnIdleDoorWithSpentBudget: a door with nothing in flight drains
// cleanly even when the stop's budget is already spent (cmd/server after
// srv.Shutdown used it, serve after a reconcile pass did). A select with
// both channels ready picks at random, which once reported "0 in flight"
// and made a clean stop exit 1 about half the time.
func TestDrainOfAnIdleDoorWithSpentBudget(t *testing.T) {
	t.Parallel()
	spent, end := context.WithCancel(t.Context())
	end()
	for i := range 100 {
		d := storeDoor(t, claims.New(testutil.MemLedger(t)), &testutil.Recorder{}, newClock())
		if err := d.Drain(spent); err != nil {
			t.Fatalf("drain %d of an idle door with a spent budget: %v", i, err)
		}
	}
}

// TestStopTakingLetsWaitersGo: at the start of a stop new work is refused
// with ErrStopping; a caller waiting on work in flight keeps waiting until
// LetWaitersGo, then is let go with it (a webhook answered 503 instead of
// holding the server's shutdown for up to its deadline); the work goes on:
// Drain waits for it to publish and commit DONE.
func TestStopTakingLetsWaitersGo(t *testing.T) {
	t.Parallel()
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		t.Parallel()
		rec := &testutil.Recorder{}
		stuck := &stuckSink{inner: rec, entered: make(chan struct{}), release: make(chan struct{})}
		d := storeDoor(t, claims.New(s), stuck, newClock())
		done := make(chan error, 1)
		go func() {
			_, err := d.Ingest(t.Context(), ev("batches/stop-waiter", lifecycle.Succeeded, tDone, event.SourceWebhook))
			done <- err
		}()
		<-stuck.entered
		d.StopTaking()
		if _, err := d.Ingest(t.Context(), ev("batches/stop-late", lifecycle.Succeeded, tDone, event.SourceWebhook)); !errors.Is(err, ingest.ErrStopping) {
			t.Fatalf("new work while stopping = %v, want ErrStopping", err)
		}
		select {
		case err := <-done:
			t.Fatalf("the waiting caller was let go (%v) before LetWaitersGo", err)
		default:
		}
		d.LetWaitersGo()
		if err := <-done; !errors.Is(err, ingest.ErrStopping) || !errors.Is(err, ingest.ErrUnavailable) {
			t.Fatalf("the waiting caller got %v, want ErrStopping (and ErrUnavailable)", err)
		}
		close(stuck.release)
		if err := d.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if c := mustClaim(t, s, "gemini:batches%2Fstop-waiter"); c.Status != ledger.ClaimDone || len(rec.All()) != 1 {
			t.Fatalf("after the drain: claim %s, %d messages; want DONE and 1", c.Status, len(rec.All()))
		}
	})
}
