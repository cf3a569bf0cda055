package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
)

// running is a RUNNING batch created at created (the listing's order).
func running(created time.Time) fakegemini.BatchState {
	return fakegemini.BatchState{State: "BATCH_STATE_RUNNING", CreateTime: created, UpdateTime: created}
}

// TestAdoptionReadsPastTheFirstPage: issue [H] item 6 suspected that
// adoption reads only the first page of the listing. It did: an orphan
// with more than a page of newer jobs above it was never adopted. Now a
// pass reads on until it meets the newest job the previous pass saw.
func TestAdoptionReadsPastTheFirstPage(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 50)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for i := range 5 {
		name := fmt.Sprintf("old-%d", i)
		w.fake.SetBatch(name, running(t0.Add(time.Duration(i)*time.Second)))
		w.register("batches/" + name)
	}
	w.pass() // the scan's mark: the newest of these

	// The submitter of "orphan" died before registering it; 120 jobs were
	// created (and registered) after it before the next pass.
	w.fake.SetBatch("orphan", running(t0.Add(time.Minute)))
	for i := range 120 {
		name := fmt.Sprintf("new-%03d", i)
		w.fake.SetBatch(name, running(t0.Add(time.Minute+time.Duration(i+1)*time.Second)))
		w.register("batches/" + name)
	}
	lists := w.fake.Calls("/v1beta/batches")
	if s := w.pass(); s.Adopted != 1 {
		t.Fatalf("adopted %d, want the orphan under 120 newer jobs (%+v)", s.Adopted, s)
	}
	if op := w.op("batches/orphan"); op.State != lifecycle.Running {
		t.Fatalf("orphan %+v", op)
	}
	if got := w.fake.Calls("/v1beta/batches") - lists; got != 3 {
		t.Fatalf("%d list calls, want 3 (pages of 50 down to the previous scan's newest job)", got)
	}

	// Nothing new: one page, as before.
	lists = w.fake.Calls("/v1beta/batches")
	if s := w.pass(); s.Adopted != 0 {
		t.Fatalf("adopted again: %+v", s)
	}
	if got := w.fake.Calls("/v1beta/batches") - lists; got != 1 {
		t.Fatalf("%d list calls with nothing new, want 1", got)
	}
	if n := w.logs.CountLines("adoption listed its page bound"); n != 0 {
		t.Fatalf("%d page-bound warnings, want 0", n)
	}
}

// TestAdoptionSaysWhenItStopsAtItsBound: more new jobs than AdoptMaxPages
// pages hold between two passes is said, not silent.
func TestAdoptionSaysWhenItStopsAtItsBound(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 10)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	w.fake.SetBatch("first", running(t0))
	w.register("batches/first")
	w.pass()
	for i := range 60 { // 6 pages of 10 above the mark; the bound is 4
		name := fmt.Sprintf("new-%03d", i)
		w.fake.SetBatch(name, running(t0.Add(time.Duration(i+1)*time.Second)))
		w.register("batches/" + name)
	}
	lists := w.fake.Calls("/v1beta/batches")
	w.pass()
	if got := w.fake.Calls("/v1beta/batches") - lists; got != 4 {
		t.Fatalf("%d list calls, want the bound of 4", got)
	}
	if n := w.logs.CountLines("adoption listed its page bound"); n != 1 {
		t.Fatalf("%d page-bound warnings, want 1", n)
	}
}

// failFirstWrite fails the first Apply that writes operation id with a
// store error (not a conflict): one transient ledger failure.
type failFirstWrite struct {
	*memledger.Store
	id     string
	mu     sync.Mutex
	failed bool
}

func (f *failFirstWrite) Apply(ctx context.Context, writes ...ledger.Write) ([]ledger.Revision, error) {
	f.mu.Lock()
	fail := false
	for _, w := range writes {
		if w.Op != nil && w.Op.ID == f.id && !f.failed {
			f.failed, fail = true, true
		}
	}
	f.mu.Unlock()
	if fail {
		return nil, errors.New("injected: store unavailable")
	}
	return f.Store.Apply(ctx, writes...)
}

// TestAdoptionRetriesAFailureBelowTheFirstPage: an orphan on the listing's
// second page whose adoption fails once (one store error) is adopted by the
// next pass. The failed scan used to move its mark to the newest job
// anyway, so every later scan stopped on the first page and never saw the
// orphan again.
func TestAdoptionRetriesAFailureBelowTheFirstPage(t *testing.T) {
	t.Parallel()
	mem := memledger.New()
	store := &failFirstWrite{Store: mem, id: "gemini:batches%2Forphan"}
	w := newWorldOn(t, 50, store, func() int64 { r, _, _ := mem.Counts().Snapshot(); return r })
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for i := range 5 {
		name := fmt.Sprintf("old-%d", i)
		w.fake.SetBatch(name, running(t0.Add(time.Duration(i)*time.Second)))
		w.register("batches/" + name)
	}
	w.pass() // the scan's mark

	w.fake.SetBatch("orphan", running(t0.Add(time.Minute)))
	for i := range 120 { // the orphan is on the third page of 50
		name := fmt.Sprintf("new-%03d", i)
		w.fake.SetBatch(name, running(t0.Add(time.Minute+time.Duration(i+1)*time.Second)))
		w.register("batches/" + name)
	}
	if s := w.pass(); s.Adopted != 0 || s.Errors != 1 {
		t.Fatalf("pass with the failing store: %+v, want the orphan's adoption to fail (1 error, none adopted)", s)
	}
	lists := w.fake.Calls("/v1beta/batches")
	if s := w.pass(); s.Adopted != 1 || s.Errors != 0 {
		t.Fatalf("next pass: %+v, want the orphan adopted", s)
	}
	if got := w.fake.Calls("/v1beta/batches") - lists; got != 3 {
		t.Fatalf("%d list calls, want 3 (down to the mark the failed scan left)", got)
	}
	if op := w.op("batches/orphan"); op.State != lifecycle.Running {
		t.Fatalf("orphan %+v", op)
	}
	// All adopted: the mark moves on, and a pass with nothing new reads one page.
	lists = w.fake.Calls("/v1beta/batches")
	if s := w.pass(); s.Adopted != 0 || s.Errors != 0 {
		t.Fatalf("pass after: %+v", s)
	}
	if got := w.fake.Calls("/v1beta/batches") - lists; got != 1 {
		t.Fatalf("%d list calls with nothing new, want 1", got)
	}
}
