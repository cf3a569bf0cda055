package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
)

// doneFailingStore wraps a real ledger and fails the DONE commit on demand:
// a real store cannot be made to fail one write of its choosing. fail
// decides per call (1-based) what the call returns; nil lets it through to
// the ledger. onCall runs before each call (a test moves its clock there).
type doneFailingStore struct {
	ingest.Store
	fail   func(call int) error
	onCall func(call int)

	mu    sync.Mutex
	calls int
}

func (s *doneFailingStore) CompleteClaim(ctx context.Context, l ledger.Lease, now time.Time) error {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	if s.onCall != nil {
		s.onCall(n)
	}
	if err := s.fail(n); err != nil {
		return err
	}
	return s.Store.CompleteClaim(ctx, l, now)
}

func (s *doneFailingStore) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

var errStoreDown = errors.New("injected: store unreachable")

func (e *env) doorOn(s ingest.Store) *ingest.Door {
	e.t.Helper()
	d, err := ingest.New(ingest.Config{Store: s, Sink: e.results, Log: logging.Discard(), Now: e.clock.Now,
		Lease: 10 * time.Minute, Grace: 90 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// TestDoneCommitFailingOnceIsRetriedNotRepublished: one transient error on
// the DONE commit after a successful publish is retried at once, so the
// claim ends DONE and no later delivery publishes the message again.
func TestDoneCommitFailingOnceIsRetriedNotRepublished(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &doneFailingStore{Store: claims.New(e.store), fail: func(call int) error {
		if call == 1 {
			return errStoreDown
		}
		return nil
	}}
	d := e.doorOn(s)
	r, err := d.Ingest(t.Context(), ev("batches/done-once", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if err != nil || !r.Published || r.Outcome != ingest.OutcomeCompleted {
		t.Fatalf("ingest with one failed DONE commit = %+v, %v; want completed and published", r, err)
	}
	if n := s.Calls(); n != 2 {
		t.Fatalf("%d DONE commits, want 2 (one failure, one retry)", n)
	}
	id := "gemini:batches%2Fdone-once"
	if c := mustClaim(t, e.store, id); c.Status != ledger.ClaimDone || c.Attempts != 1 {
		t.Fatalf("claim %+v, want DONE after 1 attempt", c)
	}
	// Past the lease a redelivery finds nothing owed.
	e.clock.Advance(11 * time.Minute)
	r = mustIngest(t, d, ev("batches/done-once", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if r.Published {
		t.Fatalf("redelivery after the lease published again: %+v", r)
	}
	if n := perKey(e.received()); n["gemini:batches/done-once"] != 1 || len(e.received()) != 1 {
		t.Fatalf("messages per key %v, want exactly 1", n)
	}
}

// TestDoneCommitAlwaysFailingIsBounded: a store that keeps failing the DONE
// commit gets a bounded number of tries, then the claim is left HELD to be
// seized after its lease (one more publish, same key), as before.
func TestDoneCommitAlwaysFailingIsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &doneFailingStore{Store: claims.New(e.store), fail: func(int) error { return errStoreDown }}
	d := e.doorOn(s)
	r, err := d.Ingest(t.Context(), ev("batches/done-never", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if !errors.Is(err, ingest.ErrUnavailable) || !errors.Is(err, errStoreDown) || !r.Published {
		t.Fatalf("ingest with a DONE commit that always fails = %+v, %v; want published and ErrUnavailable", r, err)
	}
	if n := s.Calls(); n != 3 {
		t.Fatalf("%d DONE commits, want 3 (bounded retries)", n)
	}
	id := "gemini:batches%2Fdone-never"
	if c := mustClaim(t, e.store, id); c.Status != ledger.ClaimHeld {
		t.Fatalf("claim %+v, want HELD (left to be seized after its lease)", c)
	}
	// The store recovers; after the lease the claim is seized and completed.
	s.fail = func(int) error { return nil }
	e.clock.Advance(11 * time.Minute)
	r = mustIngest(t, d, ev("batches/done-never", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if r.Outcome != ingest.OutcomeRecovered || !r.Published {
		t.Fatalf("delivery after the lease %+v, want recovered and published", r)
	}
	if c := mustClaim(t, e.store, id); c.Status != ledger.ClaimDone || c.Attempts != 2 {
		t.Fatalf("claim %+v, want DONE after 2 attempts", c)
	}
}

// TestDoneCommitIsNotRetriedPastTheLease: each failed DONE commit takes six
// minutes by the door's clock; a second try would start after the lease of
// ten minutes (when the claim may already be someone else's), so there is
// none.
func TestDoneCommitIsNotRetriedPastTheLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &doneFailingStore{Store: claims.New(e.store), fail: func(int) error { return errStoreDown },
		onCall: func(int) { e.clock.Advance(6 * time.Minute) }}
	d := e.doorOn(s)
	_, err := d.Ingest(t.Context(), ev("batches/done-slow", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if !errors.Is(err, ingest.ErrUnavailable) {
		t.Fatalf("ingest = %v, want ErrUnavailable", err)
	}
	// Call 1 ends at +6m (a retry still fits), call 2 at +12m: past the lease.
	if n := s.Calls(); n != 2 {
		t.Fatalf("%d DONE commits, want 2 (none started past the lease)", n)
	}
}

// TestDoneCommitFencedIsNotRetried: ErrFenced means another holder seized
// the claim; retrying cannot succeed and the new holder commits DONE.
func TestDoneCommitFencedIsNotRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &doneFailingStore{Store: claims.New(e.store), fail: func(int) error {
		return fmt.Errorf("complete claim: %w", ledger.ErrFenced)
	}}
	d := e.doorOn(s)
	r, err := d.Ingest(t.Context(), ev("batches/done-fenced", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if err != nil || !r.Published {
		t.Fatalf("ingest with a fenced DONE commit = %+v, %v; want published, no error", r, err)
	}
	if n := s.Calls(); n != 1 {
		t.Fatalf("%d DONE commits, want 1 (ErrFenced is final)", n)
	}
}
