package action_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/action"
	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/testutil"
)

// flakySink is the recording sink, failing every publish while down is
// set: a real sink cannot be made to fail on demand.
type flakySink struct {
	testutil.Recorder
	down atomic.Bool
}

func (s *flakySink) Publish(ctx context.Context, m results.Message) error {
	if s.down.Load() {
		return errors.New("sink down")
	}
	return s.Recorder.Publish(ctx, m)
}

// TestRunner: each action on the real door over the memory ledger, its
// refusals, and its delivery log entry (who, what, the outcome).
// Publish now publishes a message a failed publish left owed, once; a
// second one has nothing to publish; Replay publishes again with a new
// replay_id; an action on a pending operation that needs it settled, or a
// Check now without a Gemini key, is refused and publishes nothing.
func TestRunner(t *testing.T) {
	ctx := t.Context()
	store := testutil.MemLedger(t)
	clk := testutil.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sink := &flakySink{}
	door, err := ingest.New(ingest.Config{Store: claims.New(store), Sink: sink, Log: log, Now: clk.Now, Grace: time.Minute, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rec := deliverylog.NewRecorder(store, deliverylog.Retention{}, log)
	t.Cleanup(func() { _ = rec.Close(context.Background()) })
	r, err := action.NewRunner(action.Config{Door: door, Ledger: store, Log: log, Now: clk.Now,
		Deliveries: &deliverylog.Log{Recorder: rec}, Flush: rec.Flush})
	if err != nil {
		t.Fatal(err)
	}
	do := func(k action.Kind, name string) action.Result {
		t.Helper()
		res, err := r.Do(ctx, action.Request{Action: k, Operation: name, Actor: "session 0a1b2c3d"})
		if err != nil {
			t.Fatalf("%s %s: %v", k, name, err)
		}
		return res
	}
	if _, err := door.Ingest(ctx, event.Event{Name: "batches/pend", State: lifecycle.Pending, Source: event.SourceRegister}); err != nil {
		t.Fatal(err)
	}
	sink.down.Store(true)
	if _, err := door.Ingest(ctx, event.Event{Name: "batches/owed", State: lifecycle.Succeeded, Source: event.SourceWebhook,
		UpdateTime: clk.Now(), DeliveryID: "msg_1"}); !errors.Is(err, ingest.ErrSideEffect) {
		t.Fatalf("a completion with the sink down: %v, want a side effect not completed", err)
	}

	for _, c := range []struct {
		k            action.Kind
		name         string
		outcome, why string
	}{
		{action.Replay, "batches/pend", action.OutcomeRefused, action.ReasonNotSettled},
		{action.PublishNow, "batches/pend", action.OutcomeRefused, action.ReasonNotSettled},
		{action.CheckNow, "batches/pend", action.OutcomeRefused, action.ReasonNoGeminiKey},
		{action.Replay, "batches/none", action.OutcomeRefused, action.ReasonUnknownOperation},
		{"delete", "batches/owed", action.OutcomeRefused, action.ReasonInvalidAction},
		{action.Replay, "not a name", action.OutcomeRefused, action.ReasonInvalidAction},
		// Still down: the retry fails, and says so.
		{action.PublishNow, "batches/owed", action.OutcomeError, action.ReasonSideEffectFailed},
	} {
		if res := do(c.k, c.name); res.Outcome != c.outcome || res.Reason != c.why {
			t.Errorf("%s %s: %s/%s, want %s/%s", c.k, c.name, res.Outcome, res.Reason, c.outcome, c.why)
		}
	}
	if res, _ := r.Do(ctx, action.Request{Action: action.Replay, Operation: "batches/owed"}); res.Reason != action.ReasonInvalidAction {
		t.Errorf("no actor: %+v, want invalid-action", res)
	}
	if n := len(sink.All()); n != 0 {
		t.Fatalf("%d messages published by refused or failed actions", n)
	}

	sink.down.Store(false)
	if res := do(action.PublishNow, "batches/owed"); res.Outcome != action.OutcomePublished {
		t.Fatalf("Publish now: %+v, want published", res)
	}
	if res := do(action.PublishNow, "batches/owed"); res.Outcome != action.OutcomeRefused || res.Reason != action.ReasonNothingOwed {
		t.Fatalf("Publish now again: %+v, want refused nothing-owed", res)
	}
	res := do(action.Replay, "batches/owed")
	msgs := sink.All()
	if res.Outcome != action.OutcomeReplayed || len(msgs) != 2 || msgs[0].ReplayID != "" || msgs[1].ReplayID != res.ReplayID || res.ReplayID == "" {
		t.Fatalf("Replay: %+v with messages %+v; want the owed one, then one replay with its new replay_id", res, msgs)
	}

	entries, err := store.ListDeliveries(ctx, "gemini:batches%2Fowed")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.Source == deliverylog.SourceConsole {
			if e.Actor != "session 0a1b2c3d" {
				t.Errorf("entry %+v: actor %q", e, e.Actor)
			}
			got = append(got, e.Status+" "+e.Outcome+" "+e.Reason+" "+e.DeliveryID)
		}
	}
	want := []string{"replay replayed  " + res.ReplayID, "publish-now refused nothing-owed ", "publish-now published  ", "publish-now error side-effect-failed "}
	if len(got) != len(want) {
		t.Fatalf("console entries %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %q, want %q", i, got[i], want[i])
		}
	}
}
