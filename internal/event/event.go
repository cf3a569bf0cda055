// Package event holds the types the adapters and the core share: the Event
// every source hands to the ingest door, where it came from, and a project
// webhook as the reconciler's health check sees it.
//
// It is a leaf: it imports only packages that themselves import nothing of
// lrosink's own (lifecycle, opname, results). So an adapter (gemini,
// webhook) depends on these types without depending on the door or the
// reconciler; TestAdaptersDependOnLeavesNotCore in internal/reconcile
// checks it.
package event

import (
	"time"

	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
)

// Source says which path observed an event. It becomes `settled_by` when the
// event settles an operation.
type Source string

// The paths that feed the ingest door.
const (
	SourceWebhook   Source = "webhook"
	SourceReconcile Source = "reconcile"
	SourceRegister  Source = "register"
)

// ErrorInfo is an operation's failure detail as Gemini reports it.
type ErrorInfo = results.ErrorInfo

// Event is one observation of an operation, from any source. It is the only
// input that can change operation state.
type Event struct {
	// Name is the operation name as received (any form opname accepts).
	Name string
	// Kind is a hint for bare ids (e.g. "batch" for a batch.* webhook event);
	// KindUnknown when the name carries its own prefix.
	Kind  opname.Kind
	State lifecycle.State
	// GeminiStatus is the provider's raw status string behind State: the
	// webhook event type, the batch job state, the interaction status, or
	// "done"/"not_done" for a Veo operation read from the API. Empty when
	// the source has none (a registration).
	GeminiStatus string
	UpdateTime   time.Time
	Source       Source
	// DeliveryID is the webhook-id of a delivery, shared by Gemini's
	// retries of it.
	DeliveryID string
	// DeliveredAt is the delivery attempt's signed time (webhook-timestamp,
	// or a JWT's iat): with DeliveryID it names one attempt. A replay
	// repeats both; a retry by Gemini is signed anew, with a new time.
	DeliveredAt time.Time
	// Output is what the operation produced (file URIs, video URIs, ...).
	Output map[string]any
	// Error is set for failed operations when the source knows why.
	Error *ErrorInfo
	// UserMetadata is echoed by Gemini from the submission's webhook config.
	UserMetadata map[string]any
	// Hint marks an event whose body nobody authenticated: a dynamic-webhook
	// delivery, whose JWT does not cover the body. The door applies none of
	// its data nor its time, and confirms a terminal state (or any state of
	// an operation the ledger does not know) with the Gemini API first,
	// under the API name the ledger keeps.
	Hint bool
	// LeaveOwed: a settled operation's owed side effect is left to the next
	// delivery or reconcile pass instead of being recovered here (a
	// registration from a command with no results sink configured);
	// Result.EffectOwed says it was.
	LeaveOwed bool
	// Intent is the key of the intent (CONTRACT.md §5) the source says
	// the operation is: a registration binding it, Gemini's answer echoing
	// it, or adoption matching a listed job to it. Empty: the door reads
	// it from UserMetadata (IntentOf) when it trusts them.
	Intent string
	// SignedBody marks a hint whose body Google signed (v1a): once Gemini
	// has confirmed the operation under our key, the intent its body's
	// user metadata names may be bound. A JWT covers no body: never.
	SignedBody bool
}

// IntentMetadataKey is the user_metadata key a submission's create carries
// its intent key under (CONTRACT.md §5); lrosink's own, so the door keeps
// it out of an operation's metadata.
const IntentMetadataKey = "lrosink_intent"

// IntentOf is the intent key user metadata names: its IntentMetadataKey
// when that is a string, else "".
func IntentOf(md map[string]any) string {
	k, _ := md[IntentMetadataKey].(string)
	return k
}

// ListedBatch is a batch job as a listing shows it: the event of its state
// (Intent set when its echoed user metadata names one), and what adoption
// matches an unbound intent on when it does not.
type ListedBatch struct {
	Event
	DisplayName, Model string
	CreateTime         time.Time
}

// Webhook is a project webhook as the reconciler's health check sees it
// (the Gemini adapter lists them for its WebhookLister port).
type Webhook struct {
	ID, Name, URI string
	// State is the API's name for it, as it goes into the alert line
	// (empty if the API sent none).
	State string
	// Disabled: the API delivers nothing to the webhook. The adapter
	// decides which of its states mean that.
	Disabled bool
}

// Reasons of an InvalidError: stable labels, answered as the 400 reason of
// the Webhook and Register functions (CONTRACT.md §3, §5).
const (
	ReasonInvalidKind     = "invalid-kind"
	ReasonInvalidName     = "invalid-name"
	ReasonInvalidMetadata = "invalid-metadata"
	// The intent protocol's (CONTRACT.md §5): a bad key or intent field; a
	// key recorded with other fields; a key never recorded; an intent bound
	// to another operation.
	ReasonInvalidIntent        = "invalid-intent"
	ReasonIntentMismatch       = "intent-mismatch"
	ReasonIntentUnknown        = "intent-unknown"
	ReasonIntentBoundElsewhere = "intent-bound-elsewhere"
)

// InvalidError is an event, a registration or an intent the sender must
// fix (a bad name, kind, metadata or intent); nothing was stored. The door and register both
// return it, so one type serves every caller that maps it to an answer.
type InvalidError struct {
	Reason string // one of the Reason constants
	Err    error
}

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }
