package submit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/lrosink/lrosink/internal/event"
)

// The kinds of operation a submission creates.
const (
	KindBatch       = "batch"
	KindVideo       = "video"
	KindInteraction = "interaction"
)

// The states of an intent.
const (
	StateUnbound = "unbound" // recorded, no Gemini operation bound to it yet
	StateBound   = "bound"   // it is the registration of operation Name
)

// MetadataKey is the user_metadata key every create carries the intent key
// under, so a delivery about the operation names its intent. A caller's
// metadata may not use it.
const MetadataKey = event.IntentMetadataKey

// MaxKeyLen bounds an intent key, in bytes.
const MaxKeyLen = 128

// Intent is what is recorded before the Gemini create (CONTRACT.md §5):
// the idempotency key and what the create will be.
type Intent struct {
	Key  string
	Kind string // KindBatch, KindVideo or KindInteraction
	// Model is models/M for a batch, a video or a model interaction, the
	// agent's name for an agent interaction.
	Model string
	// DisplayName is the batch's display name as sent (lrosink-KEY unless
	// the caller gave one); empty for the other kinds.
	DisplayName string
	// Metadata is the caller's metadata, kept exactly: numbers are
	// json.Number when read back.
	Metadata map[string]any
}

// IntentStatus is an intent as the ledger holds it.
type IntentStatus struct {
	Intent
	State string // StateUnbound or StateBound
	// Name, APIName, BoundBy ("submit", "webhook", "reconcile") and BoundAt
	// are set once bound.
	Name, APIName, BoundBy string
	CreatedAt, GraceUntil  time.Time
	BoundAt                time.Time
	// Recorded reports that this Record call wrote the intent (HTTP 201
	// intent-recorded); false when the key was known already.
	Recorded bool
}

// Intents is where intents are recorded and bound: the Register
// function's intent protocol (HTTP) or a ledger (embedded).
type Intents interface {
	// Record writes the intent, or returns the one already recorded under
	// its key when every field is the same (Recorded false); a key known
	// with other fields is an error matching ErrIntentMismatch.
	Record(ctx context.Context, in Intent) (IntentStatus, error)
	// Bind makes the intent the registration of operation name (an API
	// name). Binding again to the same name succeeds; to another name is
	// an error matching ErrIntentBoundElsewhere.
	Bind(ctx context.Context, key, name string) (IntentStatus, error)
}

// Errors the intent protocol answers with (match with errors.Is; the
// error is a *RegisterError carrying the reason).
var (
	ErrIntentMismatch       = errors.New("intent-mismatch")
	ErrIntentUnknown        = errors.New("intent-unknown")
	ErrIntentBoundElsewhere = errors.New("intent-bound-elsewhere")
	ErrInvalidIntent        = errors.New("invalid-intent")
)

// ErrInvalidRequest is wrapped by every error for a request submit refused
// before recording anything (a bad key, model, input or metadata).
var ErrInvalidRequest = errors.New("submit: invalid request")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, a...))
}

// NewKey returns a fresh random intent key: "int_" and 20 lowercase hex
// digits.
func NewKey() (string, error) {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("submit: new key: %w", err)
	}
	return "int_" + hex.EncodeToString(b[:]), nil
}

// CheckKey reports whether key is a valid intent key: 1 to MaxKeyLen bytes
// of letters, digits and . _ : -.
func CheckKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return invalid("intent key %q: want 1 to %d characters", key, MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return invalid("intent key %q: only letters, digits and . _ : - are allowed", key)
		}
	}
	return nil
}
