package register

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/opname"
)

// Intent is a submission to record before its Gemini create (CONTRACT.md
// §5): the caller's idempotency key and what the create will be.
type Intent struct {
	Key, Kind, Model, DisplayName string
	Metadata                      map[string]any
}

// The states of an intent.
const (
	StateUnbound = "unbound"
	StateBound   = "bound"
)

// IntentStatus is an intent as the ledger holds it (the status object of
// CONTRACT.md §5).
type IntentStatus struct {
	Intent
	State                  string // StateUnbound or StateBound
	Name, APIName, BoundBy string // set once bound
	// GraceUntil is CreatedAt + LROSINK_INTENT_GRACE: until then a retried
	// submission of an unbound intent is answered "in flight", after it
	// the intent is alerted.
	CreatedAt, GraceUntil, BoundAt time.Time
}

// MaxKeyLen bounds an intent key, in bytes; MaxFieldLen a model or a
// display name.
const (
	MaxKeyLen   = 128
	MaxFieldLen = 1024
)

// IntentStore is what Intents reads and writes of the ledger.
type IntentStore interface {
	GetIntent(ctx context.Context, key string) (ledger.Intent, error)
	Apply(ctx context.Context, writes ...ledger.Write) ([]ledger.Revision, error)
}

// Intents is the one intent path: POST /Register's intent protocol and the
// embedded `lrosink submit` (package submit) both call it. Record writes
// the intent; Bind registers the operation through the ingest door, which
// binds the intent in the same commit (internal/ingest, intent.go).
type Intents struct {
	door  Door
	store IntentStore
	now   func() time.Time
	grace time.Duration
}

// NewIntents returns the intents over store, binding through door, on the
// clock now, with grace (LROSINK_INTENT_GRACE).
func NewIntents(door Door, store IntentStore, now func() time.Time, grace time.Duration) (*Intents, error) {
	if door == nil || store == nil || now == nil || grace <= 0 {
		return nil, errors.New("register: NewIntents needs a door, a store, a clock and a positive grace")
	}
	return &Intents{door: door, store: store, now: now, grace: grace}, nil
}

// Grace is the intents' LROSINK_INTENT_GRACE.
func (s *Intents) Grace() time.Duration { return s.grace }

func invalid(reason string, format string, a ...any) error {
	return &event.InvalidError{Reason: reason, Err: fmt.Errorf(format, a...)}
}

// CheckKey reports an intent key that is not 1 to MaxKeyLen bytes of
// A-Z a-z 0-9 . _ : - (an *event.InvalidError, invalid-intent).
func CheckKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return invalid(event.ReasonInvalidIntent, "intent key %q: want 1 to %d characters", clip(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return invalid(event.ReasonInvalidIntent, "intent key %q: only letters, digits and . _ : - are allowed", clip(key))
		}
	}
	return nil
}

// clip shortens s for an error text.
func clip(s string) string {
	if len(s) > 2*MaxKeyLen {
		return ledger.Truncate(s, 2*MaxKeyLen) + "..."
	}
	return s
}

// validate checks in and returns its kind; the error is an
// *event.InvalidError.
func (in Intent) validate() (opname.Kind, error) {
	if err := CheckKey(in.Key); err != nil {
		return "", err
	}
	kind, ok := opname.ParseKind(in.Kind)
	if !ok || kind == opname.KindUnknown {
		return "", invalid(event.ReasonInvalidKind, "kind %q: want batch, video or interaction", in.Kind)
	}
	for _, f := range []struct{ name, v string }{{"model", in.Model}, {"display_name", in.DisplayName}} {
		if len(f.v) > MaxFieldLen || !utf8.ValidString(f.v) {
			return "", invalid(event.ReasonInvalidIntent, "%s: want UTF-8 text of at most %d bytes", f.name, MaxFieldLen)
		}
	}
	if _, ok := in.Metadata[event.IntentMetadataKey]; ok {
		return "", invalid(event.ReasonInvalidMetadata, "metadata key %q is lrosink's: the create carries the intent key under it", event.IntentMetadataKey)
	}
	if err := ledger.CheckMetadata(in.Metadata); err != nil {
		return "", invalid(event.ReasonInvalidMetadata, "metadata: %v", err)
	}
	return kind, nil
}

// Record writes the intent, unbound, created now; or, when its key is
// recorded already with the same kind, model, display name and metadata,
// returns it as it is (bound or not), created false. A key recorded with
// other fields is an *event.InvalidError intent-mismatch (naming the
// fields, never a metadata value); a bad intent one of invalid-intent,
// invalid-kind, invalid-metadata. Nothing is written then.
func (s *Intents) Record(ctx context.Context, in Intent) (IntentStatus, bool, error) {
	kind, err := in.validate()
	if err != nil {
		return IntentStatus{}, false, err
	}
	if len(in.Metadata) == 0 {
		in.Metadata = nil
	}
	for attempt := 0; ; attempt++ {
		stored, err := s.store.GetIntent(ctx, in.Key)
		switch {
		case err == nil:
			if diff := differs(stored, in, kind); diff != "" {
				return IntentStatus{}, false, invalid(event.ReasonIntentMismatch,
					"intent %s was recorded with another %s: record it with the same fields, or use a new key", in.Key, diff)
			}
			return s.status(stored), false, nil
		case !errors.Is(err, ledger.ErrNotFound):
			return IntentStatus{}, false, fmt.Errorf("read intent %s: %w", in.Key, err)
		}
		rec := ledger.Intent{Key: in.Key, Kind: kind, Model: in.Model, DisplayName: in.DisplayName, Metadata: in.Metadata,
			CreatedAt: ledger.StoredTime(s.now())}
		revs, err := s.store.Apply(ctx, ledger.PutIntent(rec))
		if errors.Is(err, ledger.ErrConflict) && attempt == 0 {
			continue // recorded at the same moment by another call: compare with it
		}
		if err != nil {
			return IntentStatus{}, false, fmt.Errorf("record intent %s: %w", in.Key, err)
		}
		rec.Rev = revs[0]
		return s.status(rec), true, nil
	}
}

// differs names the first field in was recorded with otherwise ("" when
// none): kind, model, display_name, metadata.
func differs(stored ledger.Intent, in Intent, kind opname.Kind) string {
	switch {
	case stored.Kind != kind:
		return "kind"
	case stored.Model != in.Model:
		return "model"
	case stored.DisplayName != in.DisplayName:
		return "display_name"
	}
	a, errA := canonical(stored.Metadata)
	b, errB := canonical(in.Metadata)
	if errA != nil || errB != nil || a != b {
		return "metadata"
	}
	return ""
}

// canonical is metadata as the ledger encodes it (keys sorted, numbers as
// their literal); empty and absent are the same.
func canonical(m map[string]any) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	return ledger.EncodeJSONString(m)
}

// Bind makes the intent key the registration of operation name (any form
// Gemini uses but a bare id): the door registers the operation PENDING
// with the intent's kind and metadata and marks the intent bound in one
// commit, or marks it bound to the operation it already holds. Binding
// again to the same operation succeeds (Result.Created false); the errors
// are an *event.InvalidError: invalid-intent (a bad key), invalid-name,
// intent-unknown, intent-bound-elsewhere, intent-mismatch (the operation
// is another intent's); or the door's own. A settled operation's owed
// message is left to the next reconcile pass, as every registration's.
func (s *Intents) Bind(ctx context.Context, key, name string) (IntentStatus, Result, error) {
	if err := CheckKey(key); err != nil {
		return IntentStatus{}, Result{}, err
	}
	if strings.TrimSpace(name) == "" {
		return IntentStatus{}, Result{}, invalid(event.ReasonInvalidName, "a bind needs the operation's name")
	}
	res, err := register(ctx, s.door, Request{Name: name, LeaveOwed: true}, key)
	if err != nil {
		return IntentStatus{}, res, err
	}
	in, err := s.store.GetIntent(ctx, key)
	if err != nil {
		return IntentStatus{}, res, fmt.Errorf("read intent %s after binding it: %w", key, err)
	}
	return s.status(in), res, nil
}

// Get returns the status of the intent recorded under key (ledger.ErrNotFound
// when none is).
func (s *Intents) Get(ctx context.Context, key string) (IntentStatus, error) {
	in, err := s.store.GetIntent(ctx, key)
	if err != nil {
		return IntentStatus{}, err
	}
	return s.status(in), nil
}

func (s *Intents) status(in ledger.Intent) IntentStatus {
	st := IntentStatus{
		Intent: Intent{Key: in.Key, Kind: string(in.Kind), Model: in.Model, DisplayName: in.DisplayName, Metadata: in.Metadata},
		State:  StateUnbound, CreatedAt: in.CreatedAt, GraceUntil: in.CreatedAt.Add(s.grace),
	}
	if in.Bound() {
		st.State, st.Name, st.APIName, st.BoundBy, st.BoundAt = StateBound, in.Name, in.APIName, in.BoundBy, in.BoundAt
	}
	return st
}
