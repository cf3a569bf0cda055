package ingest_test

import (
	"testing"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/results"
)

// TestGeminiStatusIsKeptAndPublished: the raw Gemini status of every
// applied event is kept on the operation (a registration, which has none,
// does not clear it), the settling event's status goes into the results
// message, and a later event that is not applied changes neither.
func TestGeminiStatusIsKeptAndPublished(t *testing.T) {
	onBothStores(t, func(t *testing.T, s testStore) {
		c := newClock()
		d, rec, _ := loggingDoor(t, s, c)
		const name, id = "interactions/st1", "gemini:interactions%2Fst1"
		status := func(e event.Event, st string) event.Event { e.GeminiStatus = st; return e }

		mustIngest(t, d, ev(name, lifecycle.Pending, tRun, event.SourceRegister))
		if got := mustOp(t, s, id).GeminiStatus; got != "" {
			t.Fatalf("after register: gemini status %q", got)
		}
		mustIngest(t, d, status(ev(name, lifecycle.Running, tRun, event.SourceReconcile), "requires_continuation"))
		if got := mustOp(t, s, id).GeminiStatus; got != "requires_continuation" {
			t.Fatalf("after RUNNING: gemini status %q", got)
		}
		reg := ev(name, lifecycle.Pending, tRun, event.SourceRegister)
		reg.UserMetadata = map[string]any{"job": "j1"}
		if r := mustIngest(t, d, reg); !r.MetadataMerged {
			t.Fatalf("register did not merge metadata: %+v", r)
		}
		if got := mustOp(t, s, id).GeminiStatus; got != "requires_continuation" {
			t.Fatalf("a registration changed the gemini status to %q", got)
		}
		if r := mustIngest(t, d, status(ev(name, lifecycle.Incomplete, tDone, event.SourceReconcile), "budget_exceeded")); r.Outcome != ingest.OutcomeCompleted {
			t.Fatalf("INCOMPLETE: %+v", r)
		}
		mustIngest(t, d, status(ev(name, lifecycle.Incomplete, tDone.Add(1), event.SourceReconcile), "incomplete"))
		mustIngest(t, d, status(ev(name, lifecycle.Succeeded, tDone, event.SourceWebhook), "interaction.completed"))

		op := mustOp(t, s, id)
		if op.State != lifecycle.Incomplete || op.GeminiStatus != "budget_exceeded" {
			t.Fatalf("operation %s gemini status %q, want INCOMPLETE budget_exceeded", op.State, op.GeminiStatus)
		}
		msgs := rec.All()
		if len(msgs) != 1 || msgs[0].State != "INCOMPLETE" || msgs[0].GeminiStatus != results.RawStatus("budget_exceeded") {
			t.Fatalf("messages %+v, want one INCOMPLETE with gemini_status budget_exceeded", msgs)
		}
	})
}
