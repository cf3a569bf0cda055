package reconcile_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/lifecycle"
)

// failDetailGET makes every GET of a batch fail for good (403): a listed
// FAILED job's error detail cannot be read (the listing itself, GET
// /v1beta/batches, still answers).
func failDetailGET(f *fakegemini.Server, id string) {
	f.FailNext("/v1beta/batches/"+id, http.StatusForbidden, -1)
}

func failed(id string) fakegemini.BatchState {
	return fakegemini.BatchState{State: "BATCH_STATE_FAILED", UpdateTime: tDone, ErrorCode: 3, ErrorMessage: "bad input " + id}
}

// TestBatchCheckCostsOneGET: a pass that checks a batch and settles it
// FAILED makes one Gemini request for it, and the message carries the
// error and the statistics all the same: they come with the state.
func TestBatchCheckCostsOneGET(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 0)
	w.register("batches/onecall")
	st := failed("onecall")
	st.Stats = &fakegemini.BatchStats{RequestCount: "2", FailedRequestCount: "2"}
	w.fake.SetBatch("onecall", st)
	w.clock.Advance(2 * time.Minute)
	if s := w.pass(); s.Checked != 1 || s.Settled != 1 || s.Errors != 0 {
		t.Fatalf("summary %+v", s)
	}
	// The pass's other request is its webhook health check.
	var batchRequests int
	for _, r := range w.fake.Requests() {
		if strings.HasPrefix(r.Path, "/v1beta/batches") {
			batchRequests++
		}
	}
	if n := w.fake.Calls("/v1beta/batches/onecall"); n != 1 || batchRequests != 1 {
		t.Fatalf("the check cost %d GETs of the batch (%d batch requests in all), want 1", n, batchRequests)
	}
	msgs := w.sink.All()
	if len(msgs) != 1 || msgs[0].State != string(lifecycle.Failed) || msgs[0].Error == nil || msgs[0].Error.Message != "bad input onecall" ||
		msgs[0].Output["batch_stats"] == nil {
		t.Fatalf("messages %+v, want one FAILED with Gemini's error and statistics", msgs)
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
