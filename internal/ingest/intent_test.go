package ingest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/testutil"
)

// callerMeta is a caller's metadata as an intent keeps it: a big integer
// exactly.
func callerMeta() map[string]any {
	return map[string]any{"campaign": json.Number("12345678901234567890123"), "team": "data"}
}

// recordIntent writes an unbound intent of kind for key, recorded at at.
func recordIntent(t *testing.T, s ledger.Ledger, key, kind string, at time.Time) ledger.Intent {
	t.Helper()
	in := ledger.Intent{Key: key, Kind: opname.Kind(kind), Model: "models/m", Metadata: callerMeta(), CreatedAt: at}
	if _, err := s.Apply(t.Context(), ledger.PutIntent(in)); err != nil {
		t.Fatalf("record intent %s: %v", key, err)
	}
	got, err := s.GetIntent(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// delivered is a v1 (trusted) delivery about name whose echoed metadata
// names intent key.
func delivered(name string, st lifecycle.State, key string) event.Event {
	md := callerMeta()
	md["lrosink_intent"] = key
	return event.Event{Name: name, State: st, GeminiStatus: "batch.succeeded", UpdateTime: tDone, Source: event.SourceWebhook,
		DeliveryID: "msg_" + key, UserMetadata: md}
}

func mustIntent(t *testing.T, s ledger.Reads, key string) ledger.Intent {
	t.Helper()
	in, err := s.GetIntent(t.Context(), key)
	if err != nil {
		t.Fatalf("read intent %s: %v", key, err)
	}
	return in
}

// TestDeliveryBindsItsIntent (every store): a trusted delivery naming an
// unbound intent creates the operation from it, in one commit: the
// intent's kind, metadata exactly (the intent key out of it) and record
// time as the submission's, the intent bound to it (by "webhook"); the one
// results message carries the caller's metadata exactly. The history and
// the answer say bound-intent. A second delivery costs the ledger one read,
// none of the intent.
func TestDeliveryBindsItsIntent(t *testing.T) {
	t.Parallel()
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		c := newClock()
		rec := &testutil.Recorder{}
		d := storeDoor(t, claims.New(s), rec, c)
		recordIntent(t, s, "int_a", "batch", tRun)
		res := mustIngest(t, d, delivered("batches/bound1", lifecycle.Succeeded, "int_a"))
		if res.Outcome != ingest.OutcomeCompleted || res.Intent != "int_a" || res.IntentNote != ingest.ReasonBoundIntent ||
			res.Label() != ingest.ReasonBoundIntent {
			t.Fatalf("delivery: %+v", res)
		}
		op := mustOp(t, s, "gemini:batches%2Fbound1")
		if op.Intent != "int_a" || !op.SubmittedAt.Equal(tRun) || op.Kind != "batch" || !reflect.DeepEqual(op.UserMetadata, callerMeta()) {
			t.Fatalf("operation %+v: want it bound to int_a, submitted at %v, with the caller's metadata", op, tRun)
		}
		if h := op.History; len(h) != 1 || !strings.HasSuffix(h[0].Reason, "; bound-intent") {
			t.Fatalf("history %+v: want one entry saying bound-intent", h)
		}
		in := mustIntent(t, s, "int_a")
		if in.Name != "batches/bound1" || in.APIName != "batches/bound1" || in.BoundBy != "webhook" || !in.BoundAt.Equal(c.Now()) {
			t.Fatalf("intent %+v", in)
		}
		msgs := rec.All()
		if len(msgs) != 1 {
			t.Fatalf("%d messages", len(msgs))
		}
		b, _ := ledger.EncodeJSON(msgs[0].UserMetadata)
		if string(b) != `{"campaign":12345678901234567890123,"team":"data"}` {
			t.Fatalf("message metadata %s: want the caller's exactly", b)
		}
		res = mustIngest(t, d, delivered("batches/bound1", lifecycle.Succeeded, "int_a"))
		if res.Outcome != ingest.OutcomeDuplicate || res.IntentNote != "" || res.Intent != "" {
			t.Fatalf("second delivery: %+v", res)
		}
	})
}

// TestBoundDuplicateCostsOneRead: a duplicate of an operation bound to the
// intent its delivery names reads the operation only.
func TestBoundDuplicateCostsOneRead(t *testing.T) {
	e := newEnv(t)
	d := e.door(nil)
	recordIntent(t, e.store, "int_c", "batch", tRun)
	mustIngest(t, d, delivered("batches/cost", lifecycle.Succeeded, "int_c"))
	before, writes, _ := e.store.Counts().Snapshot()
	mustIngest(t, d, delivered("batches/cost", lifecycle.Succeeded, "int_c"))
	after, writesAfter, _ := e.store.Counts().Snapshot()
	if after-before != 1 || writesAfter != writes {
		t.Fatalf("a bound duplicate cost %d reads and %d writes, want 1 and 0", after-before, writesAfter-writes)
	}
}

// TestIntentNotBoundIsNoted: a delivery naming an intent that cannot be
// bound is applied all the same (its operation registered, never lost),
// the reason in the answer: an unknown key, one bound elsewhere (a forced
// re-create), one of another kind. The intent is untouched.
func TestIntentNotBoundIsNoted(t *testing.T) {
	e := newEnv(t)
	d := e.door(nil)
	recordIntent(t, e.store, "int_else", "batch", tRun)
	mustIngest(t, d, delivered("batches/first", lifecycle.Running, "int_else"))
	recordIntent(t, e.store, "int_video", "video", tRun)
	for _, c := range []struct{ name, key, note string }{
		{"batches/orphan", "int_nobody", event.ReasonIntentUnknown},
		{"batches/second", "int_else", event.ReasonIntentBoundElsewhere},
		{"batches/kind", "int_video", event.ReasonIntentMismatch},
	} {
		res := mustIngest(t, d, delivered(c.name, lifecycle.Running, c.key))
		if res.Outcome != ingest.OutcomeApplied || res.Reason != string(lifecycle.ReasonFirstSighting) || res.IntentNote != c.note || res.Intent != "" {
			t.Errorf("%s naming %s: %+v, want applied, first-sighting, note %s", c.name, c.key, res, c.note)
		}
		id := "gemini:" + strings.Replace(c.name, "/", "%2F", 1)
		if op := mustOp(t, e.store, id); op.Intent != "" || op.UserMetadata["lrosink_intent"] != nil || op.UserMetadata["team"] != "data" {
			t.Errorf("%s: %+v: want it bound to no intent, the delivery's metadata without the intent key", c.name, op)
		}
	}
	if in := mustIntent(t, e.store, "int_else"); in.Name != "batches/first" {
		t.Fatalf("int_else %+v: want it still bound to batches/first", in)
	}
	if in := mustIntent(t, e.store, "int_video"); in.Bound() {
		t.Fatalf("int_video bound to %s", in.Name)
	}
}

// TestKnownOperationGetsItsIntent: an operation registered before its
// intent was bound (adoption listed it first) gets the intent bound by the
// next trusted event naming it, its state untouched, the intent's metadata
// merged; the history says bound-intent.
func TestKnownOperationGetsItsIntent(t *testing.T) {
	e := newEnv(t)
	d := e.door(nil)
	mustIngest(t, d, ev("batches/adopted", lifecycle.Running, tRun, event.SourceReconcile))
	recordIntent(t, e.store, "int_k", "batch", tRun.Add(-time.Minute))
	stale := delivered("batches/adopted", lifecycle.Running, "int_k")
	stale.UpdateTime = tRun.Add(-time.Hour) // older than what is stored: dropped
	res := mustIngest(t, d, stale)
	if res.Outcome != ingest.OutcomeDropped || res.Intent != "int_k" || res.IntentNote != ingest.ReasonBoundIntent {
		t.Fatalf("stale delivery naming the intent: %+v", res)
	}
	op := mustOp(t, e.store, "gemini:batches%2Fadopted")
	if op.State != lifecycle.Running || op.Intent != "int_k" || !reflect.DeepEqual(op.UserMetadata, callerMeta()) {
		t.Fatalf("operation %+v", op)
	}
	if last := op.History[len(op.History)-1]; last.Reason != ingest.ReasonBoundIntent || last.Source != "webhook" {
		t.Fatalf("last history entry %+v", last)
	}
	if in := mustIntent(t, e.store, "int_k"); in.Name != "batches/adopted" || in.BoundBy != "webhook" {
		t.Fatalf("intent %+v", in)
	}
}

// TestConcurrentDeliveriesBindOnce (every store): deliveries about two
// operations naming one intent, at once: exactly one binds it; the other
// operation is registered with the note intent-bound-elsewhere.
func TestConcurrentDeliveriesBindOnce(t *testing.T) {
	t.Parallel()
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		d := storeDoor(t, claims.New(s), &testutil.Recorder{}, newClock())
		recordIntent(t, s, "int_race", "batch", tRun)
		var wg sync.WaitGroup
		res := make([]ingest.Result, 8)
		errs := make([]error, 8)
		for i := range res {
			wg.Go(func() {
				res[i], errs[i] = d.Ingest(t.Context(), delivered(fmt.Sprintf("batches/race%d", i), lifecycle.Running, "int_race"))
			})
		}
		wg.Wait()
		bound := ""
		for i, r := range res {
			switch {
			case errs[i] != nil:
				t.Fatalf("delivery %d: %v", i, errs[i])
			case r.Intent != "":
				if bound != "" {
					t.Fatalf("bound twice: %s and %s", bound, r.Operation)
				}
				bound = r.Operation
			case r.IntentNote != event.ReasonIntentBoundElsewhere:
				t.Errorf("delivery %d: %+v, want bound or intent-bound-elsewhere", i, r)
			}
		}
		if in := mustIntent(t, s, "int_race"); bound == "" || in.Name != bound {
			t.Fatalf("intent %+v, bound by %q", in, bound)
		}
	})
}

// TestRegistrationBindsStrictly: a registration naming an intent (a
// submitter's bind) that cannot be bound is the caller's error, and
// nothing is stored: unknown key, bound to another operation, a name of
// another kind.
func TestRegistrationBindsStrictly(t *testing.T) {
	e := newEnv(t)
	d := e.door(nil)
	recordIntent(t, e.store, "int_s", "batch", tRun)
	recordIntent(t, e.store, "int_v", "video", tRun)
	bind := func(name, key string) (ingest.Result, error) {
		return d.Ingest(t.Context(), event.Event{Name: name, State: lifecycle.Pending, Source: event.SourceRegister, Intent: key})
	}
	if res, err := bind("batches/s1", "int_s"); err != nil || res.Intent != "int_s" || res.Reason != string(lifecycle.ReasonFirstSighting) {
		t.Fatalf("bind: %+v %v", res, err)
	}
	if in := mustIntent(t, e.store, "int_s"); in.BoundBy != "submit" {
		t.Fatalf("bound by %q, want submit", in.BoundBy)
	}
	if res, err := bind("batches/s1", "int_s"); err != nil || res.Intent != "" || res.IntentNote != "" || res.Outcome != ingest.OutcomeDropped {
		t.Fatalf("bind again: %+v %v", res, err)
	}
	_, w0, _ := e.store.Counts().Snapshot()
	for _, c := range []struct{ name, key, reason string }{
		{"batches/s2", "int_unknown", event.ReasonIntentUnknown},
		{"batches/s2", "int_s", event.ReasonIntentBoundElsewhere},
		{"batches/s2", "int_v", event.ReasonInvalidName},
	} {
		_, err := bind(c.name, c.key)
		var inv *event.InvalidError
		if !errors.As(err, &inv) || inv.Reason != c.reason {
			t.Errorf("bind %s to %s: %v, want an InvalidError %s", c.name, c.key, err, c.reason)
		}
	}
	if _, w, _ := e.store.Counts().Snapshot(); w != w0 {
		t.Fatalf("refused binds wrote %d documents", w-w0)
	}
	if _, err := e.store.GetOperation(t.Context(), "gemini:batches%2Fs2"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("a refused bind registered its operation: %v", err)
	}
}

// TestHintBindsOnlyOnceConfirmed: a dynamic-webhook delivery's body is
// nobody's until Gemini confirms the operation under our key. A JWT hint's
// body naming an intent binds nothing; a v1a hint's (signed) body binds it
// once Gemini confirmed; Gemini's own answer echoing the intent binds it
// whatever the hint; a v1a hint about an operation Gemini does not know
// stores nothing and binds nothing.
func TestHintBindsOnlyOnceConfirmed(t *testing.T) {
	w := newRecallWorld(t, 100)
	now := w.clock.Now()
	hint := func(id, key string, signed bool) ingest.Result {
		t.Helper()
		md := callerMeta()
		md["lrosink_intent"] = key
		res, err := w.door.Ingest(t.Context(), event.Event{Name: "batches/" + id, State: lifecycle.Succeeded, GeminiStatus: "batch.succeeded",
			Source: event.SourceWebhook, Hint: true, SignedBody: signed, DeliveryID: "msg_" + id, DeliveredAt: now, UserMetadata: md})
		if err != nil && !errors.Is(err, ingest.ErrNotFoundYet) {
			t.Fatalf("hint about %s: %v", id, err)
		}
		return res
	}
	for _, id := range []string{"jwt", "v1a"} {
		w.fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: now, ResponsesFile: "files/" + id})
		recordIntent(t, w.store, "int_"+id, "batch", now)
	}
	if res := hint("jwt", "int_jwt", false); res.Outcome != ingest.OutcomeCompleted || res.Intent != "" || res.IntentNote != "" {
		t.Fatalf("JWT hint: %+v, want it settled and no intent bound", res)
	}
	if in := mustIntent(t, w.store, "int_jwt"); in.Bound() {
		t.Fatalf("a JWT hint's body bound int_jwt to %s", in.Name)
	}
	if res := hint("v1a", "int_v1a", true); res.Outcome != ingest.OutcomeCompleted || res.Intent != "int_v1a" {
		t.Fatalf("v1a hint: %+v, want it settled and int_v1a bound", res)
	}
	if m := w.received()[1].UserMetadata; !reflect.DeepEqual(m, callerMeta()) {
		t.Fatalf("v1a-bound message metadata %v, want the intent's", m)
	}

	// Gemini's answer echoes the intent: a JWT hint binds it.
	recordIntent(t, w.store, "int_echo", "batch", now)
	w.fake.SetBatch("echo", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: now, ResponsesFile: "files/echo",
		Webhook: &fakegemini.WebhookConfig{UserMetadata: map[string]any{"lrosink_intent": "int_echo"}}})
	if res := hint("echo", "int_forged", false); res.Intent != "int_echo" {
		t.Fatalf("JWT hint, Gemini echoing int_echo: %+v, want int_echo bound", res)
	}

	// Another project's operation, replayed: nothing stored or bound.
	recordIntent(t, w.store, "int_foreign", "batch", now)
	hint("foreign", "int_foreign", true)
	if in := mustIntent(t, w.store, "int_foreign"); in.Bound() {
		t.Fatalf("a v1a hint Gemini did not confirm bound int_foreign")
	}
	if _, err := w.store.GetOperation(t.Context(), "gemini:batches%2Fforeign"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("unconfirmed hint stored its operation: %v", err)
	}
}

// TestIntentOnTheDecisionLine: the ingest decision line says what became
// of the intent an event names (intent_note) and which key (intent), once;
// an event naming none says nothing of intents.
func TestIntentOnTheDecisionLine(t *testing.T) {
	e := newEnv(t)
	logs := &testutil.SyncBuffer{}
	d, err := ingest.New(ingest.Config{Store: claims.New(e.store), Sink: e.results, Log: logging.New(logs, slog.LevelInfo, ""), Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	recordIntent(t, e.store, "int_line", "batch", tRun)
	mustIngest(t, d, delivered("batches/line1", lifecycle.Running, "int_line"))
	mustIngest(t, d, delivered("batches/line2", lifecycle.Running, "int_nobody"))
	mustIngest(t, d, ev("batches/line3", lifecycle.Running, tRun, event.SourceWebhook))
	for _, c := range []struct{ op, want string }{
		{"batches/line1", `"intent_note":"bound-intent","intent":"int_line"`},
		{"batches/line2", `"intent_note":"intent-unknown","intent":"int_nobody"`},
	} {
		if n := logs.CountLines(`"operation":"` + c.op + `"`); n != 1 || logs.CountLines(c.want) != 1 {
			t.Errorf("%s: %d lines, want one with %s:\n%s", c.op, n, c.want, logs)
		}
	}
	if logs.CountLines(`"intent`) != 2 {
		t.Errorf("an event naming no intent logged one:\n%s", logs)
	}
}
