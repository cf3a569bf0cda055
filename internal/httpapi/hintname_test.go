package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/register"
)

// peers are the other functions of a deployment beside the hint rig's
// Webhook function: Register and Reconcile, each with its own door over the
// same ledger and sink, the reconciler asking the same fake Gemini through
// the real genai SDK. The reconciler's clock runs past every grace.
type peers struct {
	door *ingest.Door
	rec  *reconcile.Reconciler
}

func newPeers(t *testing.T, h *hintRig) *peers {
	t.Helper()
	p := &peers{}
	var err error
	if p.door, err = ingest.New(ingest.Config{Store: claims.New(h.store), Sink: h.rec, Log: logging.Discard(),
		Now: func() time.Time { return now }}); err != nil {
		t.Fatal(err)
	}
	srv := h.fake.Start(t)
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: srv.URL, HTTPClient: srv.Client(),
		MaxAttempts: 2, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	if p.rec, err = reconcile.New(reconcile.Config{Ledger: claims.New(h.store), Door: p.door, Gemini: f, Log: logging.Discard(),
		Now: func() time.Time { return now.Add(time.Hour) }, StuckAfter: 6 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *peers) register(t *testing.T, name string) {
	t.Helper()
	if _, err := register.Register(t.Context(), p.door, register.Request{Name: name}); err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
}

func (p *peers) reconcile(t *testing.T) reconcile.Summary {
	t.Helper()
	s, err := p.rec.Pass(t.Context())
	if err != nil {
		t.Fatalf("reconcile pass: %v", err)
	}
	return s
}

// TestVideoHintConfirmedUnderStoredAPIName: a registered Veo operation
// (models/veo-3/operations/vid1) whose dynamic-webhook delivery names only
// operations/vid1 settles from that delivery with one confirmation call,
// made under the model path the ledger keeps; the message names it.
func TestVideoHintConfirmedUnderStoredAPIName(t *testing.T) {
	t.Parallel()
	h := newHintRig(t, true)
	p := newPeers(t, h)
	p.register(t, "models/veo-3/operations/vid1")
	h.fake.SetVideo("veo-3", "vid1", fakegemini.VideoState{Done: true, VideoURIs: []string{"https://gen.example/v1.mp4"}})

	status, outcome, reason := h.deliver(t, `{"type":"video.generated","timestamp":"2026-12-29T09:20:00Z","data":{"id":"operations/vid1"}}`)
	if status != http.StatusOK || outcome != "completed" {
		t.Fatalf("%d %s %s, want 200 completed", status, outcome, reason)
	}
	if n := h.fake.Calls("/v1beta/models/veo-3/operations/vid1"); n != 1 {
		t.Errorf("%d confirmation calls under the model path, want 1", n)
	}
	if n := h.fake.TotalCalls(); n != 1 {
		t.Errorf("%d Gemini calls in all, want 1 (bare operations/vid1: %d)", n, h.fake.Calls("/v1beta/operations/vid1"))
	}
	msgs := h.rec.All()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.State != string(lifecycle.Succeeded) || m.Operation != "operations/vid1" || m.APIName != "models/veo-3/operations/vid1" {
		t.Fatalf("message %+v, want SUCCEEDED operations/vid1 with api_name models/veo-3/operations/vid1", m)
	}
	if a := m.Attributes()["api_name"]; a != "models/veo-3/operations/vid1" {
		t.Fatalf("api_name attribute %q", a)
	}
}

// TestBareVideoHintIsNotDropped: a delivery naming only operations/vid2 for
// a video the ledger does not know cannot be confirmed (Gemini answers 404
// without the model): it is answered 503 video-model-unknown, nothing is
// stored, and a redelivery after the submitter registered the model path
// settles it.
func TestBareVideoHintIsNotDropped(t *testing.T) {
	t.Parallel()
	h := newHintRig(t, true)
	p := newPeers(t, h)
	h.fake.SetVideo("veo-3", "vid2", fakegemini.VideoState{Done: true, VideoURIs: []string{"https://gen.example/v2.mp4"}})
	body := `{"type":"video.generated","timestamp":"2026-12-29T09:20:00Z","data":{"id":"operations/vid2"}}`

	status, outcome, reason := h.deliver(t, body)
	if status != http.StatusServiceUnavailable || outcome != "error" || reason != "video-model-unknown" {
		t.Fatalf("%d %s %s, want 503 error video-model-unknown", status, outcome, reason)
	}
	if _, ok := h.operation(t, "operations/vid2"); ok || len(h.rec.All()) != 0 {
		t.Fatal("an unconfirmed video was stored or published")
	}
	// Registered without its model, the ledger cannot name it better: the
	// door asks under the same name, so within ingest.RecheckEvery its
	// memory answers, and after it Gemini is asked again.
	p.register(t, "operations/vid2")
	if status, outcome, reason = h.deliver(t, body); status != http.StatusServiceUnavailable || reason != "answered-from-memory" {
		t.Fatalf("registered without the model: %d %s %s, want 503 answered-from-memory", status, outcome, reason)
	}
	h.clk.Advance(ingest.RecheckEvery)
	if status, outcome, reason = h.deliver(t, body); status != http.StatusServiceUnavailable || reason != "video-model-unknown" {
		t.Fatalf("registered without the model, asked again: %d %s %s, want 503 video-model-unknown", status, outcome, reason)
	}
	if op, ok := h.operation(t, "operations/vid2"); !ok || op.State != lifecycle.Pending {
		t.Fatalf("the registered video is %+v (found %v), want PENDING", op, ok)
	}
	// A registration naming the model gives the ledger the name to ask with.
	p.register(t, "models/veo-3/operations/vid2")
	if op, _ := h.operation(t, "operations/vid2"); op.APIName != "models/veo-3/operations/vid2" {
		t.Fatalf("api name after registering the model path: %q", op.APIName)
	}
	status, outcome, reason = h.deliver(t, body)
	if status != http.StatusOK || outcome != "completed" {
		t.Fatalf("redelivery after registration: %d %s %s, want 200 completed", status, outcome, reason)
	}
	if msgs := h.rec.All(); len(msgs) != 1 || msgs[0].APIName != "models/veo-3/operations/vid2" {
		t.Fatalf("messages %+v, want one naming models/veo-3/operations/vid2", msgs)
	}
	if n := h.fake.Calls("/v1beta/models/veo-3/operations/vid2"); n != 1 {
		t.Fatalf("%d calls under the model path, want 1", n)
	}
}

// TestFarFutureHintDoesNotSetTheClock: a JWT interaction.requires_action
// stamped 9999-12-31T23:59:59Z is recorded without its time, so Gemini's
// genuine same-rank answers (read by the reconciler) are applied after it.
func TestFarFutureHintDoesNotSetTheClock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ status, want string }{
		{"requires_action", string(lifecycle.RequiresAction)},
		{"in_progress", string(lifecycle.Running)},
	} {
		t.Run(tc.status, func(t *testing.T) {
			t.Parallel()
			h := newHintRig(t, true)
			p := newPeers(t, h)
			p.register(t, "interactions/far") // known: the hint is applied without asking Gemini
			body := `{"type":"interaction.requires_action","version":"v1","timestamp":"9999-12-31T23:59:59Z","data":{"id":"interactions/far"}}`
			if status, outcome, reason := h.deliver(t, body); status != http.StatusOK || outcome != "applied" {
				t.Fatalf("hint: %d %s %s", status, outcome, reason)
			}
			if n := h.fake.TotalCalls(); n != 0 {
				t.Fatalf("Gemini asked %d times about a known operation's non-terminal hint", n)
			}
			if op, _ := h.operation(t, "interactions/far"); op.State != lifecycle.RequiresAction || !lifecycle.ServerTime(op.UpdateTime).Equal(time.Unix(0, 0)) {
				t.Fatalf("after the hint: %s at %s, want REQUIRES_ACTION with no time", op.State, op.UpdateTime)
			}
			upd := now.Add(-time.Minute)
			h.fake.SetInteraction("far", fakegemini.InteractionState{Status: tc.status, Updated: upd})
			p.reconcile(t)
			op, ok := h.operation(t, "interactions/far")
			if !ok || string(op.State) != tc.want || !op.UpdateTime.Equal(upd) {
				t.Fatalf("after the reconciler: %s at %s (found %v), want Gemini's %s at %s; history %+v",
					op.State, op.UpdateTime, ok, tc.want, upd, op.History)
			}
		})
	}
}

// TestVideoHintWithAnotherModelUsesTheLedgers: a hint naming the video under
// a model other than the one registered is confirmed under the registered
// path (the ledger's name wins over what an unauthenticated body says).
func TestVideoHintWithAnotherModelUsesTheLedgers(t *testing.T) {
	t.Parallel()
	h := newHintRig(t, true)
	p := newPeers(t, h)
	p.register(t, "models/veo-3/operations/vid3")
	h.fake.SetVideo("veo-3", "vid3", fakegemini.VideoState{Done: true, VideoURIs: []string{"https://gen.example/v3.mp4"}})

	status, outcome, reason := h.deliver(t, `{"type":"video.generated","data":{"id":"models/veo-other-model/operations/vid3"}}`)
	if status != http.StatusOK || outcome != "completed" {
		t.Fatalf("%d %s %s, want 200 completed", status, outcome, reason)
	}
	if n, all := h.fake.Calls("/v1beta/models/veo-3/operations/vid3"), h.fake.TotalCalls(); n != 1 || all != 1 {
		t.Fatalf("%d calls under the registered path, %d in all; want 1 and 1", n, all)
	}
	if op, _ := h.operation(t, "operations/vid3"); op.APIName != "models/veo-3/operations/vid3" {
		t.Fatalf("api name %q, want the registered one kept", op.APIName)
	}
}

// TestNonTerminalHintAboutAnUnknownOperation: a non-terminal hint about an
// operation the ledger does not know is confirmed like a terminal one: a
// delivery about an interaction Gemini does not know (another project's,
// replayed, or forged) stores nothing (503 not-found-yet inside the
// window); one Gemini knows is recorded as Gemini answers, with Gemini's
// state and time.
func TestNonTerminalHintAboutAnUnknownOperation(t *testing.T) {
	t.Parallel()
	h := newHintRig(t, true)
	body := func(id string) string {
		return `{"type":"interaction.requires_action","timestamp":"9999-12-31T23:59:59Z","data":{"id":"interactions/` + id + `"}}`
	}
	status, outcome, reason := h.deliver(t, body("foreign"))
	if status != http.StatusServiceUnavailable || outcome != "error" || reason != "not-found-yet" {
		t.Fatalf("unknown to Gemini: %d %s %s, want 503 error not-found-yet", status, outcome, reason)
	}
	if _, ok := h.operation(t, "interactions/foreign"); ok {
		t.Fatal("an operation Gemini does not know was stored")
	}
	upd := now.Add(-time.Minute)
	h.fake.SetInteraction("mine", fakegemini.InteractionState{Status: "in_progress", Updated: upd})
	status, outcome, reason = h.deliver(t, body("mine"))
	if status != http.StatusOK || outcome != "applied" {
		t.Fatalf("known to Gemini: %d %s %s, want 200 applied", status, outcome, reason)
	}
	op, ok := h.operation(t, "interactions/mine")
	if !ok || op.State != lifecycle.Running || !op.UpdateTime.Equal(upd) {
		t.Fatalf("recorded %s at %s (found %v), want Gemini's RUNNING at %s", op.State, op.UpdateTime, ok, upd)
	}
	if n := h.fake.TotalCalls(); n != 2 {
		t.Fatalf("%d Gemini calls, want one per delivery", n)
	}
}
