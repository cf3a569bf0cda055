package ingest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ledger"
)

// Binding intents (CONTRACT.md §5). An event whose trusted source names an
// intent that is not yet bound binds it in decide, in the commit that writes
// the operation: on a first sighting the operation is created from the
// intent (its kind, its metadata exactly, its record time as the
// submission's) and the event applied to it; an operation already known
// (adoption registered it, a delivery came first) gets the intent marked
// bound and its metadata, its state untouched. The reducer knows nothing of
// it. Trusted for the intent: a v1 delivery, a reconcile answer or
// adoption, a registration; a hint only once Gemini has confirmed the
// operation under our key (confirm.go), naming it in Gemini's answer or, for
// a v1a delivery, in its signed body.

// intentNamed is the intent ev names: Event.Intent, else its user
// metadata's.
func intentNamed(ev event.Event) string {
	if ev.Intent != "" {
		return ev.Intent
	}
	return event.IntentOf(ev.UserMetadata)
}

// withoutIntentKey is ev with the intent key out of its user metadata: it
// is lrosink's, not the caller's, and the results message carries the
// caller's metadata exactly.
func withoutIntentKey(ev event.Event) event.Event {
	if _, ok := ev.UserMetadata[event.IntentMetadataKey]; ok {
		ev.UserMetadata = maps.Clone(ev.UserMetadata)
		delete(ev.UserMetadata, event.IntentMetadataKey)
		if len(ev.UserMetadata) == 0 {
			ev.UserMetadata = nil
		}
	}
	return ev
}

// intentToBind reads the intent j names when the operation (op, as read)
// is not bound to it already, and returns it when it is to be bound now;
// else why not (a note for the answer and the delivery log), or for a
// registration binding it (strictIntent) the *event.InvalidError that
// says so. One read, only for an event naming an intent its operation is
// not bound to.
func (d *Door) intentToBind(ctx context.Context, j *job, op ledger.Operation) (*ledger.Intent, string, error) {
	key := j.intent
	if key == "" || op.Intent == key {
		return nil, "", nil
	}
	var reason, lenient string
	var why error
	in, err := d.cfg.Store.GetIntent(ctx, key)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		reason, why = event.ReasonIntentUnknown, fmt.Errorf("no intent %s is recorded", key)
	case err != nil:
		return nil, "", fmt.Errorf("%w: read intent %s: %w", ErrUnavailable, key, err)
	case in.Kind != j.name.Kind:
		reason, lenient = event.ReasonInvalidName, event.ReasonIntentMismatch
		why = fmt.Errorf("%s is not a %s, the kind of intent %s", j.name.Canonical, in.Kind, key)
	case in.Bound() && in.Name != j.name.Canonical:
		reason, why = event.ReasonIntentBoundElsewhere, fmt.Errorf("intent %s is bound to %s", key, in.Name)
	case in.Bound():
		return nil, "", nil // bound here: the operation was written again since
	case op.Intent != "":
		reason, why = event.ReasonIntentMismatch, fmt.Errorf("%s is the operation of intent %s, not of %s", j.name.Canonical, op.Intent, key)
	default:
		return &in, "", nil
	}
	if j.strictIntent {
		return nil, "", &event.InvalidError{Reason: reason, Err: why}
	}
	if lenient == "" {
		lenient = reason
	}
	// Said once, on the ingest decision line (intent_note, intent).
	return nil, lenient, nil
}

// bindKnown binds in to the known operation op (as read) without applying
// anything: op names its intent, gains the metadata keys it lacked from it,
// and a history entry says so.
func (d *Door) bindKnown(ctx context.Context, j *job, op ledger.Operation, in ledger.Intent, now time.Time) (ledger.Operation, error) {
	next := op
	next.Intent = in.Key
	next.UserMetadata = d.keep(ctx, j.name, j.ev, "user_metadata", op.UserMetadata, in.Metadata, ledger.MaxMetadataBytes)
	next.History = appendBounded(op.History, ledger.HistoryEntry{At: now, Source: string(j.ev.Source), State: op.State,
		UpdateTime: op.UpdateTime, Reason: ReasonBoundIntent, DeliveryID: ledger.Truncate(j.ev.DeliveryID, ledger.MaxDeliveryIDBytes)},
		ledger.MaxHistory)
	rev, _, err := d.cfg.Store.CommitBound(ctx, next, nil, boundIntent(in, next, j.ev.Source, now))
	if err != nil {
		return op, commitErr(j.name, err)
	}
	next.Rev = rev
	return next, nil
}

// boundIntent is in bound to op (as it is committed) at now by source.
func boundIntent(in ledger.Intent, op ledger.Operation, source event.Source, now time.Time) ledger.Intent {
	in.Name, in.APIName, in.BoundAt, in.BoundBy = op.Name, op.APIName, now, BoundBy(source)
	return in
}

// BoundBy names who bound an intent, as its status says (CONTRACT.md §5):
// "submit" (a registration: the submitter's bind), "webhook" or
// "reconcile".
func BoundBy(source event.Source) string {
	if source == event.SourceRegister {
		return "submit"
	}
	return string(source)
}
