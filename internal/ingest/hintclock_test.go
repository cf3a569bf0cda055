package ingest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
)

// TestHintsNeverBlockGeminisAnswer is the property of CONTRACT.md §3 "a hint
// never sets the clock": whatever hints arrive (any state, terminal ones
// included, with any time: none, far past, far future, Gemini's own), every
// later genuine answer from Gemini (a strictly newer observation of a
// non-terminal interaction, fetched through the real genai SDK from the fake
// Gemini and fed to the door as the reconciler does) is applied: the ledger
// then holds exactly Gemini's state and time. Terminal hints are confirmed
// with the same fake (or, in half the sequences, nobody can confirm them).
// Seeded, so a failure replays; the failing sequence is printed.
func TestHintsNeverBlockGeminisAnswer(t *testing.T) {
	fake := fakegemini.New()
	srv := fake.Start(t)
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: srv.URL, HTTPClient: srv.Client(),
		MaxAttempts: 1, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	farFuture := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	geminiStatus := map[lifecycle.State]string{lifecycle.Running: "in_progress", lifecycle.RequiresAction: "requires_action"}
	rng := rand.New(rand.NewPCG(22, 4))
	const sequences = 150
	for seq := range sequences {
		e := newEnv(t)
		cfg := ingest.Config{Store: claims.New(e.store), Sink: e.results, Log: logging.Discard(), Now: e.clock.Now}
		if seq%2 == 0 {
			cfg.Confirmer = f
		}
		door, err := ingest.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("prop%d", seq)
		name := "interactions/" + id
		docID, err := opname.DocID(opname.KeyPrefix + name)
		if err != nil {
			t.Fatal(err)
		}
		truth, at := lifecycle.Running, base.Add(time.Duration(rng.IntN(3600))*time.Second)
		setTruth := func() {
			fake.SetInteraction(id, fakegemini.InteractionState{Status: geminiStatus[truth], Created: base, Updated: at})
		}
		setTruth()
		var steps []string
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("sequence %d (confirmer %v):\n  %s\n%s", seq, cfg.Confirmer != nil, strings.Join(steps, "\n  "), fmt.Sprintf(format, args...))
		}
		genuine := func() {
			t.Helper()
			at = at.Add(time.Duration(1+rng.IntN(3600)) * time.Second)
			truth = []lifecycle.State{lifecycle.Running, lifecycle.RequiresAction}[rng.IntN(2)]
			setTruth()
			got, err := f.Fetch(t.Context(), opname.KindInteraction, name)
			if err != nil {
				fail("fetch: %v", err)
			}
			res, err := door.Ingest(t.Context(), got)
			steps = append(steps, fmt.Sprintf("gemini %s at %s -> %s %s", truth, at.Format(time.RFC3339), res.Outcome, res.Reason))
			if err != nil {
				fail("genuine answer: %v", err)
			}
			op, err := e.store.GetOperation(t.Context(), docID)
			if err != nil || op.State != truth || !op.UpdateTime.Equal(at) {
				fail("stored %s at %s (%v), want Gemini's %s at %s", op.State, op.UpdateTime, err, truth, at)
			}
		}
		if rng.IntN(2) == 0 {
			genuine()
		}
		for range 1 + rng.IntN(10) {
			if rng.IntN(3) == 0 {
				genuine()
				continue
			}
			states := lifecycle.States()
			st := states[rng.IntN(len(states))]
			var when time.Time
			switch rng.IntN(5) {
			case 0: // none
			case 1:
				when = farFuture
			case 2:
				when = at // Gemini's own current time
			case 3:
				when = at.Add(time.Duration(rng.IntN(7200)-3600) * time.Second)
			default:
				when = time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)
			}
			res, err := door.Ingest(t.Context(), event.Event{Name: name, State: st, GeminiStatus: "interaction.hint",
				UpdateTime: when, Source: event.SourceWebhook, Hint: true, Output: map[string]any{"forged": true}})
			steps = append(steps, fmt.Sprintf("hint %s at %s -> %s %s", st, when.Format(time.RFC3339), res.Outcome, res.Reason))
			if err != nil {
				fail("hint: %v", err)
			}
			e.clock.Advance(time.Second)
		}
		genuine()
		if msgs := e.received(); len(msgs) != 0 {
			fail("published %d message(s) for an interaction Gemini never ended", len(msgs))
		}
	}
}
