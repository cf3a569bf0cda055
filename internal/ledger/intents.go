package ledger

import (
	"cmp"
	"time"

	"github.com/lrosink/lrosink/internal/opname"
)

// Intent is a submission recorded before its Gemini create (CONTRACT.md
// §5): the caller's idempotency key and what the create will be. Once the
// operation is known it is bound to it, in the same commit that makes the
// intent the operation's registration (Operation.Intent names the key).
// An unbound intent is never deleted; a bound one is kept IntentKeep
// longer than LROSINK_RETENTION after its binding (IntentExpiry).
type Intent struct {
	// Key is the idempotency key (register checks it: 1 to 128 of
	// A-Z a-z 0-9 . _ : -); stores key the document by it.
	Key  string
	Rev  Revision
	Kind opname.Kind
	// Model is what the caller gave (models/M, or an agent's name);
	// DisplayName the batch's display name as sent ("" for other kinds).
	Model, DisplayName string
	// Metadata is the caller's metadata, kept as EncodeJSON text like an
	// operation's (numbers read back as json.Number: exactly).
	Metadata  map[string]any
	CreatedAt time.Time
	// Name (canonical), APIName, BoundAt and BoundBy ("submit", "webhook",
	// "reconcile") are set once bound.
	Name, APIName string
	BoundAt       time.Time
	BoundBy       string
	// AlertedAt is when the reconciler last raised the intent-unbound
	// alert (zero: never). AlertFrom orders the alert scan as StuckFrom
	// orders the stuck scan: stores keep IntentAlertKey.
	AlertedAt, AlertFrom time.Time
}

// Bound reports whether the intent is bound to an operation.
func (i Intent) Bound() bool { return i.Name != "" }

// IntentAlertKey is the alert scan's key of i (Intent.AlertFrom): zero
// (out of the scan) once bound, else AlertFrom, or CreatedAt before the
// first alert. Every store keeps it, derived on every write, in an
// indexed field, and reads it back as AlertFrom.
func IntentAlertKey(i Intent) time.Time {
	switch {
	case i.Bound():
		return time.Time{}
	case !i.AlertFrom.IsZero():
		return StoredTime(i.AlertFrom)
	default:
		return StoredTime(i.CreatedAt)
	}
}

// IntentKeep is how much longer than LROSINK_RETENTION a bound intent is
// kept after its binding. Retention counts an operation's time from its
// settlement, which the intent does not know; every Gemini operation
// settles within days of its creation (a batch within 48 h, or it
// expires), so an intent bound IntentKeep + retention ago belongs to an
// operation that is deleted or deletable. Deleting it sooner would make a
// retried submission of its key create the operation again.
const IntentKeep = 30 * 24 * time.Hour

// IntentExpiry is when a store may delete intent i kept with retention:
// BoundAt + retention + IntentKeep; zero (never) while i is unbound or
// without retention. SQLite and memory delete them in PruneSettled,
// Firestore by its TTL policy on intents.expire_at.
func IntentExpiry(i Intent, retention time.Duration) time.Time {
	if !i.Bound() || retention <= 0 || i.BoundAt.IsZero() {
		return time.Time{}
	}
	return StoredTime(i.BoundAt.Add(retention + IntentKeep))
}

// PutIntent is a Write of the whole of in, fenced on in.Rev (zero: that
// it does not exist, a create-if-absent).
func PutIntent(in Intent) Write { return Write{Intent: &in} }

// IntentCursor is a position in UnboundIntents' order: (CreatedAt, Key).
type IntentCursor struct {
	CreatedAt time.Time
	Key       string
}

// IntentAfter returns the cursor just past i.
func IntentAfter(i Intent) IntentCursor { return IntentCursor{CreatedAt: i.CreatedAt, Key: i.Key} }

// ByCreated is UnboundIntents' order, (CreatedAt, Key).
func ByCreated(a, b Intent) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.Key, b.Key))
}

// ByAlert is IntentAlertsDue's order, (IntentAlertKey, Key); stores read
// the key back in AlertFrom.
func ByAlert(a, b Intent) int {
	return cmp.Or(a.AlertFrom.Compare(b.AlertFrom), cmp.Compare(a.Key, b.Key))
}

// StoredIntent is in as a store keeps it: its times at StoredTime and its
// alert key derived (read back as AlertFrom). Metadata is left to the
// store's own encoding.
func StoredIntent(in Intent) Intent {
	in.CreatedAt, in.BoundAt, in.AlertedAt = StoredTime(in.CreatedAt), StoredTime(in.BoundAt), StoredTime(in.AlertedAt)
	in.AlertFrom = IntentAlertKey(in)
	return in
}
