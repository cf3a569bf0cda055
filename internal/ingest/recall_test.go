package ingest_test

import (
	"context"
	"errors"
	"sync"
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
)

// recallWorld is a door whose confirmer is the real Gemini adapter against
// the fake, with a memory of size entries.
type recallWorld struct {
	*env
	fake *fakegemini.Server
	url  string
	door *ingest.Door
}

func newRecallWorld(t *testing.T, size int) *recallWorld {
	t.Helper()
	e := newEnv(t)
	w := &recallWorld{env: e, fake: fakegemini.New(fakegemini.WithClock(e.clock.Now))}
	w.url = w.fake.Start(t).URL
	var err error
	if w.door, err = ingest.New(ingest.Config{Store: claims.New(w.store), Sink: w.results, Log: logging.Discard(), Now: w.clock.Now,
		Confirmer: w.confirmer(t), RecallEntries: size}); err != nil {
		t.Fatal(err)
	}
	return w
}

// confirmer is the real Gemini adapter against the world's fake.
func (w *recallWorld) confirmer(t *testing.T) ingest.Confirmer {
	t.Helper()
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: w.url,
		MaxAttempts: 1, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// hint delivers a terminal hint about batches/id as attempt msg.
func (w *recallWorld) hint(t *testing.T, id, msg string) ingest.Result {
	t.Helper()
	res, err := w.door.Ingest(t.Context(), event.Event{Name: "batches/" + id, State: lifecycle.Succeeded, GeminiStatus: "batch.succeeded",
		Source: event.SourceWebhook, Hint: true, DeliveryID: msg, DeliveredAt: w.clock.Now()})
	if err != nil {
		t.Fatalf("hint about %s: %v", id, err)
	}
	return res
}

// TestRecallIsBounded: the memory holds at most RecallEntries answers; an
// operation whose answer was evicted (the least recently used) is asked
// about again, one still held is not.
func TestRecallIsBounded(t *testing.T) {
	w := newRecallWorld(t, 2)
	for _, id := range []string{"r1", "r2", "r3"} {
		w.fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: w.clock.Now(), ResponsesFile: "files/" + id})
		if res := w.hint(t, id, "msg_"+id); res.Outcome != ingest.OutcomeCompleted {
			t.Fatalf("%s: %+v", id, res)
		}
	}
	if res := w.hint(t, "r3", "msg_r3b"); res.Outcome != ingest.OutcomeDuplicate || res.Reason != ingest.ReasonRecalled {
		t.Fatalf("r3 again: %+v, want a duplicate answered from memory", res)
	}
	if res := w.hint(t, "r1", "msg_r1b"); res.Outcome != ingest.OutcomeDuplicate || res.Reason == ingest.ReasonRecalled {
		t.Fatalf("r1 again: %+v, want a duplicate Gemini was asked about (its answer was evicted)", res)
	}
	for id, want := range map[string]int{"r1": 2, "r2": 1, "r3": 1} {
		if n := w.fake.Calls("/v1beta/batches/" + id); n != want {
			t.Errorf("%s: %d GETs, want %d", id, n, want)
		}
	}
	if n := len(w.received()); n != 3 {
		t.Fatalf("%d messages, want 3", n)
	}
}

// commitFailingStore wraps a real ledger and fails its first fails
// CommitOperation calls: a real store cannot be made to fail one write of
// its choosing.
type commitFailingStore struct {
	ingest.Store
	mu    sync.Mutex
	fails int
}

func (s *commitFailingStore) CommitOperation(ctx context.Context, op ledger.Operation, c *ledger.Claim) (ledger.Revision, *ledger.Lease, error) {
	s.mu.Lock()
	fail := s.fails > 0
	s.fails--
	s.mu.Unlock()
	if fail {
		return ledger.Revision{}, nil, errStoreDown
	}
	return s.Store.CommitOperation(ctx, op, c)
}

// TestRecalledStateNeedsTheLedger: a remembered answer is used only where
// the ledger already holds it. A terminal answer whose commit failed is
// asked for again by the next delivery (no answer from memory), and that
// one settles the operation with Gemini's full answer (its output), which
// the memory does not keep.
func TestRecalledStateNeedsTheLedger(t *testing.T) {
	w := newRecallWorld(t, 10)
	var err error
	if w.door, err = ingest.New(ingest.Config{Store: &commitFailingStore{Store: claims.New(w.store), fails: 1}, Sink: w.results,
		Log: logging.Discard(), Now: w.clock.Now, Confirmer: w.confirmer(t)}); err != nil {
		t.Fatal(err)
	}
	w.fake.SetBatch("lost", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: w.clock.Now(), ResponsesFile: "files/lost-out"})
	ev := event.Event{Name: "batches/lost", State: lifecycle.Succeeded, GeminiStatus: "batch.succeeded", Source: event.SourceWebhook,
		Hint: true, DeliveryID: "msg_1", DeliveredAt: w.clock.Now()}
	if _, err := w.door.Ingest(t.Context(), ev); !errors.Is(err, ingest.ErrUnavailable) {
		t.Fatalf("first: %v, want the commit's failure", err)
	}
	res := w.hint(t, "lost", "msg_2")
	if res.Outcome != ingest.OutcomeCompleted || res.Reason == ingest.ReasonRecalled {
		t.Fatalf("redelivery: %+v, want completed from a new confirmation", res)
	}
	if n := w.fake.Calls("/v1beta/batches/lost"); n != 2 {
		t.Fatalf("%d GETs, want 2", n)
	}
	if msgs := w.received(); len(msgs) != 1 || msgs[0].Output["responses_file"] != "files/lost-out" {
		t.Fatalf("messages %+v, want one with Gemini's output", msgs)
	}
}

// TestTerminalAnswerStandsForTheReplayWindow: Gemini's terminal answer is
// reused for ingest.ReplayWindow (as long as a captured delivery verifies),
// also for an operation Gemini first did not know (whose first sighting is
// kept far longer); after it, Gemini is asked again.
func TestTerminalAnswerStandsForTheReplayWindow(t *testing.T) {
	w := newRecallWorld(t, 10)
	w.fake.SetBatch("late", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: w.clock.Now(), ResponsesFile: "files/late",
		NotFoundUntil: w.clock.Now().Add(time.Second)})
	ev := event.Event{Name: "batches/late", State: lifecycle.Succeeded, GeminiStatus: "batch.succeeded", Source: event.SourceWebhook,
		Hint: true, DeliveryID: "msg_0", DeliveredAt: w.clock.Now()}
	if _, err := w.door.Ingest(t.Context(), ev); !errors.Is(err, ingest.ErrNotFoundYet) {
		t.Fatalf("first: %v, want not found yet", err)
	}
	w.clock.Advance(ingest.RecheckEvery)
	if res := w.hint(t, "late", "msg_1"); res.Outcome != ingest.OutcomeCompleted {
		t.Fatalf("once Gemini knows it: %+v", res)
	}
	w.clock.Advance(ingest.ReplayWindow - time.Nanosecond)
	if res := w.hint(t, "late", "msg_2"); res.Reason != ingest.ReasonRecalled {
		t.Fatalf("inside the replay window: %+v, want answered from memory", res)
	}
	w.clock.Advance(time.Nanosecond)
	if res := w.hint(t, "late", "msg_3"); res.Outcome != ingest.OutcomeDuplicate || res.Reason == ingest.ReasonRecalled {
		t.Fatalf("after the replay window: %+v, want a duplicate Gemini was asked about", res)
	}
	if n := w.fake.Calls("/v1beta/batches/late"); n != 3 {
		t.Fatalf("%d GETs, want 3", n)
	}
}
