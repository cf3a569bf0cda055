package reconcile_test

import (
	"errors"
	"testing"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/reconcile"
)

// TestCheckNow: a check asked for now asks Gemini before the operation is
// due (still in its grace) and applies the answer through the door: a
// running batch stays pending and is rescheduled, a finished one settles
// and its message is published; a settled operation is not asked about
// again, an unknown one is ErrNotFound.
func TestCheckNow(t *testing.T) {
	w := newWorld(t, 0)
	w.register("batches/cn_1")
	id := w.op("batches/cn_1").ID
	w.fake.SetBatch("cn_1", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	c, err := w.rec.CheckNow(t.Context(), id)
	if err != nil || c.Outcome != "still-pending" || c.State != lifecycle.Running {
		t.Fatalf("running: %+v, %v; want still-pending RUNNING", c, err)
	}
	if op := w.op("batches/cn_1"); op.Checks != 1 || op.LastCheck != "ok" || !op.NextCheckAt.After(w.clock.Now()) {
		t.Errorf("after a check now: checks %d, last %q, next %s; want one check, rescheduled", op.Checks, op.LastCheck, op.NextCheckAt)
	}
	if n := len(w.sink.All()); n != 0 {
		t.Fatalf("%d messages published for a running batch", n)
	}
	w.fake.SetBatch("cn_1", succeeded("cn_1"))
	c, err = w.rec.CheckNow(t.Context(), id)
	if err != nil || c.Outcome != "settled" || c.State != lifecycle.Succeeded {
		t.Fatalf("finished: %+v, %v; want settled SUCCEEDED", c, err)
	}
	if msgs := w.sink.All(); len(msgs) != 1 || msgs[0].State != string(lifecycle.Succeeded) {
		t.Fatalf("published %+v, want the one SUCCEEDED message", msgs)
	}
	calls := w.fake.TotalCalls()
	if _, err := w.rec.CheckNow(t.Context(), id); !errors.Is(err, reconcile.ErrSettled) {
		t.Errorf("settled: %v, want ErrSettled", err)
	}
	if got := w.fake.TotalCalls(); got != calls {
		t.Errorf("a settled operation's check asked Gemini (%d calls, were %d)", got, calls)
	}
	if _, err := w.rec.CheckNow(t.Context(), "gemini:batches%2Fnone"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("unknown: %v, want ErrNotFound", err)
	}
}
