package reconcile_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestReconcileOnlyEndStatesSettleOnce: interactions that end incomplete
// or budget_exceeded have no webhook event, so the reconciler is the only
// path that sees them. Through the real pass, the real genai SDK and the
// fake Gemini, on both stores, each settles exactly once as INCOMPLETE with
// Gemini's raw status in gemini_status; later passes and a repeated fetch
// publish nothing more. requires_continuation and queued keep an operation
// pending (RUNNING, PENDING) with its status recorded.
func TestReconcileOnlyEndStatesSettleOnce(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		ctx := context.Background()
		clk := &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
		sink, logs := &testutil.Recorder{}, &testutil.SyncBuffer{}
		log := logging.New(logs, slog.LevelInfo, "")
		door, err := ingest.New(ingest.Config{Store: s, Sink: sink, Log: log, Now: clk.Now, Grace: 90 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		fake := fakegemini.New()
		srv := fake.Start(t)
		f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: srv.URL, HTTPClient: srv.Client(),
			Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := reconcile.New(reconcile.Config{Ledger: s, Door: door, Gemini: f, Log: log, Now: clk.Now, StuckAfter: 6 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		pass := func() reconcile.Summary {
			t.Helper()
			sum, err := rec.Pass(ctx)
			if err != nil {
				t.Fatalf("pass: %v", err)
			}
			return sum
		}
		get := func(id string) ledger.Operation {
			t.Helper()
			op, err := s.GetOperation(ctx, "gemini:interactions%2F"+id)
			if err != nil {
				t.Fatal(err)
			}
			return op
		}

		// Gemini's path for each: first answer, then the end state.
		ops := []struct{ id, first, last string }{
			{"inc", "requires_continuation", "incomplete"},
			{"bud", "queued", "budget_exceeded"},
		}
		firstState := map[string]lifecycle.State{"requires_continuation": lifecycle.Running, "queued": lifecycle.Pending}
		upd := clk.Now().Add(-time.Minute)
		for _, o := range ops {
			if _, err := door.Ingest(ctx, ingest.Event{Name: "interactions/" + o.id, State: lifecycle.Pending, Source: ingest.SourceRegister}); err != nil {
				t.Fatal(err)
			}
			fake.SetInteraction(o.id, fakegemini.InteractionState{Status: o.first, Updated: upd})
		}
		clk.Advance(2 * time.Minute)
		if sum := pass(); sum.Checked != 2 || sum.Settled != 0 || sum.StillPending != 2 || sum.Errors != 0 {
			t.Fatalf("first pass %+v", sum)
		}
		for _, o := range ops {
			if op := get(o.id); op.State != firstState[o.first] || op.GeminiStatus != o.first {
				t.Fatalf("%s after %s: state %s gemini status %q", o.id, o.first, op.State, op.GeminiStatus)
			}
			fake.SetInteraction(o.id, fakegemini.InteractionState{Status: o.last, Updated: upd.Add(time.Minute)})
		}

		clk.Advance(time.Hour)
		if sum := pass(); sum.Checked != 2 || sum.Settled != 2 || sum.Errors != 0 {
			t.Fatalf("settling pass %+v", sum)
		}
		for range 3 { // later passes find nothing due
			clk.Advance(2 * time.Hour)
			if sum := pass(); sum.Checked != 0 || sum.Settled != 0 {
				t.Fatalf("later pass %+v", sum)
			}
		}
		// Another reconciler's fetch of the same answer is a duplicate.
		for _, o := range ops {
			ev, err := f.Fetch(ctx, opname.KindInteraction, "interactions/"+o.id)
			if err != nil {
				t.Fatal(err)
			}
			if res, err := door.Ingest(ctx, ev); err != nil || res.Outcome != ingest.OutcomeDuplicate {
				t.Fatalf("repeated fetch of %s: %+v, %v", o.id, res, err)
			}
		}

		msgs := sink.All()
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
			if op := get(o.id); op.State != lifecycle.Incomplete || op.GeminiStatus != o.last || !op.NextCheckAt.IsZero() {
				t.Errorf("%s stored as %s %q (next check %v)", o.id, op.State, op.GeminiStatus, op.NextCheckAt)
			}
		}
	})
}
