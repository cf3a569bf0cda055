package reconcile_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/lifecycle"
)

// failDetailGET makes every raw GET for a batch's error detail fail for
// good (403); the SDK's own GET of the job, which carries a Content-Type,
// still answers.
func failDetailGET(f *fakegemini.Server, id string) {
	f.FailNextMatching(func(r *http.Request) bool {
		return r.URL.Path == "/v1beta/batches/"+id && r.Header.Get("Content-Type") == ""
	}, http.StatusForbidden, -1)
}

func failed(id string) fakegemini.BatchState {
	return fakegemini.BatchState{State: "BATCH_STATE_FAILED", UpdateTime: tDone, ErrorCode: 3, ErrorMessage: "bad input " + id}
}

// TestFailedBatchSettlesWithoutErrorDetail: Gemini says FAILED but the
// error detail cannot be read. The state is applied (the detail is best
// effort), in the first pass, and published with a null error.
func TestFailedBatchSettlesWithoutErrorDetail(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 0)
	w.register("batches/nodetail")
	w.fake.SetBatch("nodetail", failed("nodetail"))
	failDetailGET(w.fake, "nodetail")
	w.clock.Advance(2 * time.Minute)
	if s := w.pass(); s.Checked != 1 || s.Settled != 1 || s.Errors != 0 {
		t.Fatalf("summary %+v", s)
	}
	if op := w.op("batches/nodetail"); op.State != lifecycle.Failed || op.Error != nil || op.SettledBy != "reconcile" {
		t.Fatalf("operation %s error %+v settled by %q", op.State, op.Error, op.SettledBy)
	}
	msgs := w.sink.All()
	if len(msgs) != 1 || msgs[0].State != string(lifecycle.Failed) || msgs[0].Error != nil {
		t.Fatalf("messages %+v", msgs)
	}
	if n := w.logs.CountLines(`"severity":"WARNING","message":"gemini: FAILED batch without its error detail`); n != 1 {
		t.Fatalf("%d warnings about the missing detail, want 1:\n%s", n, w.logs.String())
	}
}

// TestAdoptionSurvivesMissingErrorDetail: a FAILED orphan whose detail
// cannot be read neither aborts the adoption page nor stays unadopted.
func TestAdoptionSurvivesMissingErrorDetail(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 50)
	w.fake.SetBatch("orphan-failed", failed("orphan-failed"))
	w.fake.SetBatch("orphan-ok", succeeded("orphan-ok"))
	failDetailGET(w.fake, "orphan-failed")
	if s := w.pass(); s.Adopted != 2 || s.Settled != 2 || s.Errors != 0 {
		t.Fatalf("summary %+v", s)
	}
	if op := w.op("batches/orphan-failed"); op.State != lifecycle.Failed || op.Error != nil {
		t.Fatalf("failed orphan %s error %+v", op.State, op.Error)
	}
	if n := w.sink.PerKey(); n["gemini:batches/orphan-failed"] != 1 || n["gemini:batches/orphan-ok"] != 1 {
		t.Fatalf("messages %v", n)
	}
}
