package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fetcherr"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
)

// Confirmer fetches an operation's current state from the Gemini API: the
// reconciler's fetch (*gemini.Fetcher). Its errors have a fetcherr kind:
// NotFound means the API does not know the operation (404).
type Confirmer interface {
	Fetch(ctx context.Context, kind opname.Kind, apiName string) (event.Event, error)
}

// ErrNotConfirmed wraps a failed confirmation: the hint can be neither
// applied nor rejected for now (503, so the sender redelivers). The cause
// is wrapped too.
var ErrNotConfirmed = errors.New("hint not confirmed with the Gemini API")

// OutcomeUnconfirmed: a terminal hint that nobody could confirm (no Gemini
// API key); not applied.
const OutcomeUnconfirmed Outcome = "unconfirmed"

// Reasons of hint outcomes.
const (
	// ReasonNotConfirmed: Gemini does not know the operation; nothing stored.
	ReasonNotConfirmed = "not-confirmed"
	// ReasonNoGeminiAPIKey: there is no Confirmer to ask.
	ReasonNoGeminiAPIKey = "no-gemini-api-key"
)

// confirmedByGemini is the confirmedBy value of events built from Gemini's
// answer.
const confirmedByGemini = "gemini"

// ErrVideoModelUnknown wraps ErrNotConfirmed for a video hint that names
// only operations/ID when the ledger keeps no model path for it either:
// Gemini answers 404 for a Veo operation asked without its model, which
// says nothing about whether the video exists. Nothing is stored (the
// delivery may be about another project's video) and the answer is 503,
// so Gemini redelivers: a registration with the model path in the
// meantime lets the redelivery settle it.
var ErrVideoModelUnknown = errors.New("video operation named without its model, which the ledger does not know either")

// bodyless keeps what the door may use from a hint: which operation, the
// stated state, and where it came from. Output, error and user metadata are
// dropped: a forger could have written them, and they would end up in the
// results message. So is the time: a hint never sets the operation's clock
// (a far-future time would make every genuine same-rank answer from Gemini
// stale). Without a time a stated non-terminal state can move the rank up
// but loses every tie, and a terminal one is replaced by Gemini's answer.
func bodyless(ev event.Event) applied {
	ev.Output, ev.Error, ev.UserMetadata = nil, nil, nil
	ev.UpdateTime = time.Time{}
	return applied{Event: ev, delivered: ev.State}
}

// confirm handles a terminal hint, and a non-terminal one when a Confirmer
// is configured. The dynamic-webhook token does not cover the body, so a
// stated terminal is never applied: the door asks Gemini and applies its
// answer instead (which may not be terminal at all). Concurrent terminal
// hints for one operation share one fetch: the answer does not depend on
// what they stated (confirmKey). It runs as the confirm stage, inside
// coalesce, drain and observe: the decision logged is about the event it
// passes on.
//
// A non-terminal hint about an operation the ledger holds is applied as
// stated, without its time (bodyless), and without asking Gemini: it can
// raise the rank but loses every tie with a timed answer. About an
// operation the ledger does not know it is confirmed like a terminal one,
// so a delivery about an operation Gemini does not know (another project's,
// replayed; or forged) stores nothing.
//
// Gemini is asked under the name the ledger keeps, the most specific one (a
// Veo operation's model path, which deliveries may omit); the delivered
// name is used only for an operation the ledger does not know, or knows by
// nothing more than its canonical name. The read serves the apply too.
func (d *Door) confirm(ctx context.Context, j *job, next handler) (Result, error) {
	id, name, hint := j.id, j.name, j.ev
	if d.cfg.Confirmer == nil {
		return d.unconfirmed(ctx, j, next)
	}
	op, err := d.current(ctx, id, nil)
	if err != nil {
		return Result{Operation: name.Canonical}, fmt.Errorf("%w: read %s: %w", ErrUnavailable, name.Canonical, err)
	}
	if !hint.State.Terminal() && op.Rev.Exists() {
		j.read = &op
		return next(ctx, j)
	}
	if op.Rev.Exists() {
		if stored, serr := opname.Normalize(op.APIName, name.Kind); serr == nil && stored.Key() == name.Key() &&
			!(stored.APIName == stored.Canonical && moreSpecific(name.APIName, stored.APIName)) {
			name = stored
		}
	}
	got, err := d.cfg.Confirmer.Fetch(ctx, name.Kind, name.APIName)
	switch {
	case fetcherr.KindOf(err) == fetcherr.NotFound && name.Kind == opname.KindVideo && name.APIName == name.Canonical:
		return Result{Operation: name.Canonical}, fmt.Errorf("%w: %w: %s (register it as models/MODEL/%s): %w",
			ErrNotConfirmed, ErrVideoModelUnknown, name.Canonical, name.Canonical, err)
	case fetcherr.KindOf(err) == fetcherr.NotFound:
		// Redelivering cannot help: answer 200 and store nothing. A
		// registered operation keeps being checked by the reconciler.
		return Result{Outcome: OutcomeDropped, Reason: ReasonNotConfirmed, Operation: name.Canonical}, nil
	case err != nil:
		return Result{Operation: name.Canonical}, fmt.Errorf("%w: %s: %w", ErrNotConfirmed, name.Canonical, err)
	}
	j.ev = applied{Event: event.Event{Name: got.Name, Kind: name.Kind, State: got.State, GeminiStatus: got.GeminiStatus, UpdateTime: got.UpdateTime,
		Source: hint.Source, DeliveryID: hint.DeliveryID,
		Output: got.Output, Error: got.Error, UserMetadata: got.UserMetadata},
		delivered: hint.State, confirmedBy: confirmedByGemini}
	// Gemini may name the operation more specifically (a video's model);
	// anything that is not the same operation keeps the name we asked for.
	if n, nerr := opname.Normalize(got.Name, name.Kind); nerr == nil && n.Key() == name.Key() && !moreSpecific(name.APIName, n.APIName) {
		name = n
	}
	j.name, j.read = name, &op
	return next(ctx, j)
}

// confirmKey groups concurrent hints for coalesce: terminal hints for one
// operation share one fetch (the answer does not depend on what they
// stated); a non-terminal one may be applied as stated, so it is shared only
// with hints stating the same state.
func confirmKey(id string, stated lifecycle.State) string {
	if !stated.Terminal() {
		return id + "|hint|" + string(stated)
	}
	return id + "|confirm"
}

// unconfirmed handles a terminal hint with no Confirmer: the terminal is not
// applied, but a first sighting is recorded PENDING, so the reconciler
// checks the operation once a key is configured. Whatever the operation
// owes (a released claim) is still run by the door as for any event.
func (d *Door) unconfirmed(ctx context.Context, j *job, next handler) (Result, error) {
	hint := j.ev
	j.ev = applied{Event: event.Event{Name: hint.Name, Kind: hint.Kind, State: lifecycle.Pending, Source: hint.Source,
		DeliveryID: hint.DeliveryID}, delivered: hint.State}
	res, err := next(ctx, j)
	if err != nil {
		return res, err
	}
	d.cfg.Log.WarnContext(ctx, "dynamic-webhook terminal state not applied: set GEMINI_API_KEY so the Gemini API can confirm it",
		"operation", j.name.Canonical, "delivered_state", string(hint.State), "delivery_id", hint.DeliveryID)
	if res.Outcome == OutcomeApplied || res.Outcome == OutcomeDropped {
		res.Outcome, res.Reason = OutcomeUnconfirmed, ReasonNoGeminiAPIKey
	}
	return res, nil
}

// historyReason makes a confirmed (or unconfirmed) hint visible in the
// operation's history.
func historyReason(ev applied, dec lifecycle.Decision) string {
	switch {
	case ev.confirmedBy != "":
		return string(dec.Reason) + "; confirmed-by-" + ev.confirmedBy
	case ev.delivered != "":
		return string(dec.Reason) + "; unconfirmed-" + string(ev.delivered) + "-hint"
	}
	return string(dec.Reason)
}
