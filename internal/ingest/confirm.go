package ingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fetcherr"
	"github.com/lrosink/lrosink/internal/ledger"
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
	// ReasonRecalled: the hint was answered from the door's memory of a
	// recent confirmation, with no Gemini call, and changed nothing.
	ReasonRecalled = "answered-from-memory"
)

// ErrNotFoundYet (with ErrNotConfirmed): Gemini answered 404 for an
// operation the ledger does not know, within NotFoundWindow of the first
// delivery the door asked about. Gemini has been seen not to know its own
// operation yet right after creating it (GEMINI.md §12), so nothing is
// stored and the answer is 503: Gemini redelivers, and the door asks again.
var ErrNotFoundYet = errors.New("Gemini does not know the operation (yet)")

// ErrRecalled marks a door error answered from the memory of a recent
// confirmation (a 404 inside the window, a failure), with no Gemini call:
// the 503 that confirmation was answered with, again.
var ErrRecalled = errors.New("answered from the memory of a recent confirmation")

// What the door remembers of its confirmations (CONTRACT.md §3). The
// memory is per process (per Cloud Run instance) and bounded by
// Config.RecallEntries.
const (
	// NotFoundWindow is how long after the first delivery about an
	// operation the ledger does not know a Gemini 404 is answered 503 (not
	// yet) instead of dropping the delivery: it takes in Gemini's
	// redeliveries at once, after about 5 s and after about 5 min (GEMINI.md
	// §1.2), and a 404 that outlasts them is dropped at the next one
	// (GEMINI.md §12; CONTRACT.md §3 says why 10 minutes).
	NotFoundWindow = 10 * time.Minute
	// RecheckEvery is how long a 404, a failure or a non-terminal answer
	// stands for a new delivery: Gemini is asked about an operation at most
	// once per interval, however many deliveries (replayed or redelivered)
	// arrive.
	RecheckEvery = 15 * time.Second
	// ReplayWindow is how long a delivery attempt can be replayed: its
	// signed time verifies for ±5 min (webhook.DefaultTolerance). A replay
	// of an attempt answered within it, or any delivery about an operation
	// Gemini answered terminal within it, costs no call.
	ReplayWindow = 10 * time.Minute
	// notFoundMemory is how long an operation Gemini did not know is
	// remembered: Gemini retries a delivery for 24 h, and forgetting the
	// first sighting sooner would open a new window for a late retry.
	notFoundMemory = 24 * time.Hour
	// DefaultRecallEntries is Config.RecallEntries' default: each memory
	// (answers per operation, attempts per delivery) holds at most this
	// many entries; both full took 8 MB of heap (19 MB with every error at
	// its 512-byte message bound).
	DefaultRecallEntries = 10_000
)

// answer is what Gemini answered about one operation (or how asking
// failed), as the door remembers it. It keeps Gemini's state, not its
// output: a remembered state is used only when the ledger already holds
// it (recalled), so applying it again changes nothing.
type answer struct {
	apiName string    // the name Gemini was asked under
	at      time.Time // when Gemini answered
	first   time.Time // when the door first asked about the operation: the window's start
	kind    answerKind
	// notFoundSeen: Gemini answered 404 for it at least once.
	notFoundSeen bool
	state        lifecycle.State
	status       string
	updated      time.Time
	err          error // the 404, or the failure
}

type answerKind uint8

const (
	answeredState answerKind = iota + 1
	answeredNotFound
	answeredFailure
)

func (k answerKind) String() string {
	switch k {
	case answeredState:
		return "state"
	case answeredNotFound:
		return "not-found"
	case answeredFailure:
		return "failure"
	}
	return ""
}

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
// results message (the intent a v1a body names is kept apart, for once
// Gemini confirms the operation: job.bodyIntent). So is the time: a hint never sets the operation's clock
// (a far-future time would make every genuine same-rank answer from Gemini
// stale). Without a time a stated non-terminal state can move the rank up
// but loses every tie, and a terminal one is replaced by Gemini's answer.
func bodyless(ev event.Event) applied {
	ev.Output, ev.Error, ev.UserMetadata, ev.Intent = nil, nil, nil, ""
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
//
// A recent answer of Gemini's about the operation stands in for the call
// (recalled): a replayed delivery, or any number of deliveries about one
// operation, cost at most one call per RecheckEvery. A 404 for an operation
// the ledger does not know is "not yet" for NotFoundWindow (confirmed).
func (d *Door) confirm(ctx context.Context, j *job, next handler) (Result, error) {
	id, name := j.id, j.name
	if d.cfg.Confirmer == nil {
		return d.unconfirmed(ctx, j, next)
	}
	op, err := d.current(ctx, id, nil)
	if err != nil {
		return Result{Operation: name.Canonical}, fmt.Errorf("%w: read %s: %w", ErrUnavailable, name.Canonical, err)
	}
	if !j.ev.State.Terminal() && op.Rev.Exists() {
		j.read = &op
		return next(ctx, j)
	}
	if op.Rev.Exists() {
		if stored, serr := opname.Normalize(op.APIName, name.Kind); serr == nil && stored.Key() == name.Key() &&
			!(stored.APIName == stored.Canonical && moreSpecific(name.APIName, stored.APIName)) {
			name = stored
		}
	}
	if a, ok := d.recalled(j, name, op); ok {
		j.recalled = a.kind.String()
		d.noteAttempt(j)
		return d.confirmed(ctx, j, name, op, a, nil, next)
	}
	got, err := d.cfg.Confirmer.Fetch(ctx, name.Kind, name.APIName)
	if errors.Is(err, fetcherr.ErrBudgetSpent) || (err != nil && ctx.Err() != nil) {
		// No call was made, or nothing was learnt: nothing to remember.
		return Result{Operation: name.Canonical}, fmt.Errorf("%w: %s: %w", ErrNotConfirmed, name.Canonical, err)
	}
	a := d.remember(j.id, name, got, err)
	d.noteAttempt(j)
	return d.confirmed(ctx, j, name, op, a, &got, next)
}

// recalled is the remembered answer to use for j instead of asking Gemini,
// if there is one: asked under the same name, and still standing. A
// terminal state stands for ReplayWindow; a 404, a failure or another
// state for RecheckEvery, or for ReplayWindow to a replay of an attempt
// already answered (the same webhook-id and signed time). A state is used
// only when the ledger holds it already (op, as read), so that applying
// it, without the output the memory does not keep, changes nothing.
func (d *Door) recalled(j *job, name opname.Name, op ledger.Operation) (answer, bool) {
	a, ok := d.answers.Get(j.id)
	if !ok || a.apiName != name.APIName {
		return answer{}, false
	}
	age := d.cfg.Now().Sub(a.at)
	standing := age < RecheckEvery || (age < ReplayWindow && d.replayed(j))
	if a.kind == answeredState {
		if op.State != a.state || lifecycle.ServerTime(op.UpdateTime).Before(lifecycle.ServerTime(a.updated)) {
			return answer{}, false
		}
		standing = standing || (a.state.Terminal() && age < ReplayWindow)
	}
	return a, standing
}

// remember keeps what Gemini answered about the operation id (got, or the
// error err), and returns it. The window's start is kept from the first
// answer on.
func (d *Door) remember(id string, name opname.Name, got event.Event, err error) answer {
	now := d.cfg.Now()
	a := answer{apiName: name.APIName, at: now, first: now}
	if prev, ok := d.answers.Get(id); ok {
		a.first, a.notFoundSeen = prev.first, prev.notFoundSeen
	}
	switch {
	case fetcherr.KindOf(err) == fetcherr.NotFound:
		a.kind, a.err, a.notFoundSeen = answeredNotFound, err, true
	case err != nil:
		a.kind, a.err = answeredFailure, err
	default:
		a.kind, a.state, a.status, a.updated = answeredState, got.State, got.GeminiStatus, got.UpdateTime
	}
	ttl := ReplayWindow
	if a.notFoundSeen {
		ttl = notFoundMemory
	}
	d.answers.Put(id, a, ttl)
	return a
}

// attemptKey names a delivery attempt (webhook-id and signed time), "" for
// an event that carries none.
func attemptKey(ev event.Event) string {
	if ev.DeliveryID == "" || ev.DeliveredAt.IsZero() {
		return ""
	}
	return ev.DeliveryID + "|" + strconv.FormatInt(ev.DeliveredAt.Unix(), 10)
}

// noteAttempt remembers that j's delivery attempt was answered, for the
// time it can be replayed.
func (d *Door) noteAttempt(j *job) {
	if k := attemptKey(j.ev.Event); k != "" {
		d.attempts.Put(k, j.id, ReplayWindow)
	}
}

// replayed reports whether j's delivery attempt was answered before: a
// replay (Gemini's own retries are signed anew).
func (d *Door) replayed(j *job) bool {
	k := attemptKey(j.ev.Event)
	if k == "" {
		return false
	}
	id, ok := d.attempts.Get(k)
	return ok && id == j.id
}

// confirmed goes on with answer a about the operation (op as read), asked
// under name: Gemini's answer got when it was just asked, nil when a is
// remembered.
func (d *Door) confirmed(ctx context.Context, j *job, name opname.Name, op ledger.Operation, a answer, got *event.Event, next handler) (Result, error) {
	hint := j.ev
	recalled := func(err error) error {
		if got == nil {
			return fmt.Errorf("%w: %w", ErrRecalled, err)
		}
		return err
	}
	switch a.kind {
	case answeredNotFound:
		switch {
		case name.Kind == opname.KindVideo && name.APIName == name.Canonical:
			return Result{Operation: name.Canonical}, recalled(fmt.Errorf("%w: %w: %s (register it as models/MODEL/%s): %w",
				ErrNotConfirmed, ErrVideoModelUnknown, name.Canonical, name.Canonical, a.err))
		case !op.Rev.Exists() && d.cfg.Now().Before(a.first.Add(NotFoundWindow)):
			// Gemini may not know its own operation yet: 503, and the
			// redelivery asks again (from RecheckEvery on).
			return Result{Operation: name.Canonical}, recalled(fmt.Errorf("%w: %w: %s, first asked %s, dropped from %s if Gemini still does not know it: %w",
				ErrNotConfirmed, ErrNotFoundYet, name.Canonical, a.first.UTC().Format(time.RFC3339), a.first.Add(NotFoundWindow).UTC().Format(time.RFC3339), a.err))
		}
		// Redelivering cannot help: answer 200 and store nothing. A
		// registered operation keeps being checked by the reconciler.
		res := Result{Outcome: OutcomeDropped, Reason: ReasonNotConfirmed, Operation: name.Canonical}
		if got == nil {
			res.Reason = ReasonRecalled
		}
		return res, nil
	case answeredFailure:
		return Result{Operation: name.Canonical}, recalled(fmt.Errorf("%w: %s: %w", ErrNotConfirmed, name.Canonical, a.err))
	}
	ev := event.Event{Name: name.APIName, State: a.state, GeminiStatus: a.status, UpdateTime: a.updated}
	if got != nil {
		ev = *got
	}
	j.ev = applied{Event: event.Event{Name: ev.Name, Kind: name.Kind, State: ev.State, GeminiStatus: ev.GeminiStatus, UpdateTime: ev.UpdateTime,
		Source: hint.Source, DeliveryID: hint.DeliveryID, DeliveredAt: hint.DeliveredAt,
		Output: ev.Output, Error: ev.Error, UserMetadata: withoutIntentKey(ev).UserMetadata},
		delivered: hint.State, confirmedBy: confirmedByGemini}
	// Gemini has confirmed the operation under our key: the intent its
	// answer names, else the one a signed body (v1a) named, is the
	// operation's (intent.go). A JWT's body names nothing we trust.
	if j.intent = intentNamed(ev); j.intent == "" {
		j.intent = j.bodyIntent
	}
	// Gemini may name the operation more specifically (a video's model);
	// anything that is not the same operation keeps the name we asked for.
	if n, nerr := opname.Normalize(ev.Name, name.Kind); nerr == nil && n.Key() == name.Key() && !moreSpecific(name.APIName, n.APIName) {
		name = n
	}
	j.name, j.read = name, &op
	res, err := next(ctx, j)
	if got == nil && err == nil && (res.Outcome == OutcomeDuplicate || res.Outcome == OutcomeDropped) {
		res.Reason = ReasonRecalled
	}
	return res, err
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
