package reconcile_test

import (
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

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

// stack is the real reconcile stack on one store: the door, a Fetcher on
// the genai SDK against a fake Gemini, a reconciler, and a fake clock.
type stack struct {
	t     *testing.T
	store ledger.Ledger
	clk   *clock
	sink  *testutil.Recorder
	door  *ingest.Door
	fake  *fakegemini.Server
	f     *gemini.Fetcher
	rec   *reconcile.Reconciler
}

func newStack(t *testing.T, s ledger.Ledger) *stack {
	t.Helper()
	k := &stack{t: t, store: s, clk: testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)),
		sink: &testutil.Recorder{}, fake: fakegemini.New()}
	log := logging.New(&testutil.SyncBuffer{}, slog.LevelInfo, "")
	var err error
	if k.door, err = ingest.New(ingest.Config{Store: claims.New(s), Sink: k.sink, Log: log, Now: k.clk.Now, Grace: 90 * time.Second}); err != nil {
		t.Fatal(err)
	}
	srv := k.fake.Start(t)
	k.f = fakeFetcher(t, srv, log)
	if k.rec, err = reconcile.New(reconcile.Config{Ledger: claims.New(s), Door: k.door, Gemini: k.f, Log: log, Now: k.clk.Now, StuckAfter: 6 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	return k
}

func (k *stack) register(name string)    { k.t.Helper(); mustRegister(k.t, k.door, name) }
func (k *stack) pass() reconcile.Summary { k.t.Helper(); return mustPass(k.t, k.rec) }

func (k *stack) op(name string) ledger.Operation {
	k.t.Helper()
	n, err := opname.Normalize(name, opname.KindUnknown)
	if err != nil {
		k.t.Fatal(err)
	}
	id, err := opname.DocID(n.Key())
	if err != nil {
		k.t.Fatal(err)
	}
	op, err := k.store.GetOperation(k.t.Context(), id)
	if err != nil {
		k.t.Fatal(err)
	}
	return op
}

// TestReconcileOnlyEndStatesSettleOnce: interactions that end incomplete
// or budget_exceeded have no webhook event, so the reconciler is the only
// path that sees them. Through the real pass, the real genai SDK and the
// fake Gemini, on both stores, each settles exactly once as INCOMPLETE with
// Gemini's raw status in gemini_status; later passes and a repeated fetch
// publish nothing more. requires_continuation and queued keep an operation
// pending (RUNNING, PENDING) with its status recorded.
func TestReconcileOnlyEndStatesSettleOnce(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		ctx := t.Context()
		k := newStack(t, s)
		// Gemini's path for each: first answer, then the end state.
		ops := []struct{ id, first, last string }{
			{"inc", "requires_continuation", "incomplete"},
			{"bud", "queued", "budget_exceeded"},
		}
		firstState := map[string]lifecycle.State{"requires_continuation": lifecycle.Running, "queued": lifecycle.Pending}
		upd := k.clk.Now().Add(-time.Minute)
		for _, o := range ops {
			k.register("interactions/" + o.id)
			k.fake.SetInteraction(o.id, fakegemini.InteractionState{Status: o.first, Updated: upd})
		}
		k.clk.Advance(2 * time.Minute)
		if sum := k.pass(); sum.Checked != 2 || sum.Settled != 0 || sum.StillPending != 2 || sum.Errors != 0 {
			t.Fatalf("first pass %+v", sum)
		}
		for _, o := range ops {
			if op := k.op("interactions/" + o.id); op.State != firstState[o.first] || op.GeminiStatus != o.first {
				t.Fatalf("%s after %s: state %s gemini status %q", o.id, o.first, op.State, op.GeminiStatus)
			}
			k.fake.SetInteraction(o.id, fakegemini.InteractionState{Status: o.last, Updated: upd.Add(time.Minute)})
		}

		k.clk.Advance(time.Hour)
		if sum := k.pass(); sum.Checked != 2 || sum.Settled != 2 || sum.Errors != 0 {
			t.Fatalf("settling pass %+v", sum)
		}
		for range 3 { // later passes find nothing due
			k.clk.Advance(2 * time.Hour)
			if sum := k.pass(); sum.Checked != 0 || sum.Settled != 0 {
				t.Fatalf("later pass %+v", sum)
			}
		}
		// Another reconciler's fetch of the same answer is a duplicate.
		for _, o := range ops {
			ev, err := k.f.Fetch(ctx, opname.KindInteraction, "interactions/"+o.id)
			if err != nil {
				t.Fatal(err)
			}
			if res, err := k.door.Ingest(ctx, ev); err != nil || res.Outcome != ingest.OutcomeDuplicate {
				t.Fatalf("repeated fetch of %s: %+v, %v", o.id, res, err)
			}
		}

		msgs := k.sink.All()
		if len(msgs) != len(ops) {
			t.Fatalf("%d messages, want %d: %+v", len(msgs), len(ops), msgs)
		}
		byOp := map[string]string{}
		for _, m := range msgs {
			if m.State != string(lifecycle.Incomplete) || m.SettledBy != "reconcile" {
				t.Errorf("message %+v, want INCOMPLETE settled by reconcile", m)
			}
			byOp[m.Operation] = string(m.GeminiStatus)
		}
		for _, o := range ops {
			if byOp["interactions/"+o.id] != o.last {
				t.Errorf("message for %s has gemini_status %q, want %q", o.id, byOp["interactions/"+o.id], o.last)
			}
			if op := k.op("interactions/" + o.id); op.State != lifecycle.Incomplete || op.GeminiStatus != o.last || !op.NextCheckAt.IsZero() {
				t.Errorf("%s stored as %s %q (next check %v)", o.id, op.State, op.GeminiStatus, op.NextCheckAt)
			}
		}
	})
}

// TestPartiallyFailedBatchCarriesBatchStats: a batch that SUCCEEDED with
// failed requests is published with output.batch_stats as integers (the
// SDK drops Gemini's batchStats; the fetch reads the raw Operation) and
// the operation keeps them, on both stores.
func TestPartiallyFailedBatchCarriesBatchStats(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		k := newStack(t, s)
		k.register("batches/partial")
		k.fake.SetBatch("partial", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: k.clk.Now(), ResponsesFile: "files/out",
			Stats: &fakegemini.BatchStats{RequestCount: "1000", SuccessfulRequestCount: "990", FailedRequestCount: "10"}})
		k.clk.Advance(2 * time.Minute)
		if sum := k.pass(); sum.Settled != 1 || sum.Errors != 0 {
			t.Fatalf("pass %+v", sum)
		}
		msgs := k.sink.All()
		if len(msgs) != 1 {
			t.Fatalf("%d messages, want 1", len(msgs))
		}
		data, err := msgs[0].Data()
		if err != nil {
			t.Fatal(err)
		}
		// The message as a consumer decodes it: integers, every count.
		want := `"batch_stats":{"failed_request_count":10,"pending_request_count":0,"request_count":1000,"successful_request_count":990}`
		if m := msgs[0]; m.State != "SUCCEEDED" || m.GeminiStatus != "JOB_STATE_SUCCEEDED" || !strings.Contains(string(data), want) {
			t.Fatalf("message %s\nwant it SUCCEEDED (JOB_STATE_SUCCEEDED) with %s", data, want)
		}
		stored := k.op("batches/partial").Output["batch_stats"]
		wantStored := map[string]any{"request_count": json.Number("1000"), "successful_request_count": json.Number("990"),
			"failed_request_count": json.Number("10"), "pending_request_count": json.Number("0")}
		if !reflect.DeepEqual(stored, wantStored) {
			t.Fatalf("stored batch_stats %#v, want %#v", stored, wantStored)
		}
	})
}
