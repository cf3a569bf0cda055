// Package ledger is the port between lrosink and the stores that keep
// operation state and completion claims: storage only. Adapters (memory,
// SQLite, Firestore) live in sub-packages and must all pass the
// storage-semantics suite in ledgertest; the claim protocol written on top
// of the port lives in package claims.
//
// Every write is fenced: a document is written only if it is still at the
// revision the writer read (or, to create it, only if absent). A fenced-out
// write fails with ErrConflict and must be decided again from a new read; it
// never overwrites newer data. The claim protocol reports a fenced claim
// write as ErrFenced.
package ledger

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/shard"
)

// Errors adapters return (wrapped); callers test them with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	// ErrConflict: the operation changed since it was read, or a claim that
	// should have been created already exists. Re-read and decide again.
	ErrConflict = errors.New("revision conflict")
	// ErrFenced: the claim is no longer held by this lease (seized, released
	// or completed by someone else).
	ErrFenced = errors.New("claim fenced")
)

// Limits on the lists kept in an operation document, so a document never
// grows without bound (Firestore caps documents at 1 MiB).
const (
	MaxHistory   = 32
	MaxConflicts = 16
)

// Bounds on what an operation keeps from outside sources (submitters,
// webhook senders, Gemini). Together with the list limits above they keep an
// operation document and its claim (which carries the results message, so
// metadata, output and error again) far below Firestore's 1 MiB: the
// protocol suite commits an operation at every bound (claimstest, with
// ledgertest.MaximalOperation), about a third of the limit. The map bounds are measured on
// EncodeJSON, the form both adapters store.
const (
	// MaxMetadataBytes bounds user metadata. /Register refuses more; the
	// door drops an event's metadata that would take an operation past it.
	MaxMetadataBytes = 64 << 10
	// MaxOutputBytes bounds an operation's output (file and video URIs, an
	// interaction's output text); the door drops an event's output that
	// would take an operation past it.
	MaxOutputBytes = 256 << 10
	// MaxErrorMessageBytes bounds the kept error message (truncated).
	MaxErrorMessageBytes = 8 << 10
	// MaxDeliveryIDBytes bounds the delivery id kept in history (truncated).
	MaxDeliveryIDBytes = 128
	// MaxGeminiStatusBytes bounds the kept raw Gemini status (truncated);
	// real ones are short words such as "budget_exceeded".
	MaxGeminiStatusBytes = 128
)

// EncodeJSON is the one encoding of free-form values in the ledger (user
// metadata, output, the claim's results message): encoding/json without
// HTML escaping, so that "<" stays one byte and the stored size is what the
// bounds above measure. Firestore keeps such values as one JSON string:
// any JSON value then fits (arrays inside arrays, keys such as "__name__"
// or "", which a Firestore map refuses), and both adapters read back the
// same Go values (numbers as float64, arrays as []any).
func EncodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := encodeJSONTo(&b, v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// EncodeJSONString is EncodeJSON as text, for a store that keeps the text:
// the encoder writes its output once into a strings.Builder, whose String
// needs no copy (string(EncodeJSON(v)) copies every column it stores).
func EncodeJSONString(v any) (string, error) {
	var b strings.Builder
	if err := encodeJSONTo(&b, v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func encodeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// DecodeMap reads a map written by EncodeJSON; "null" reads as nil.
// Numbers read as json.Number (DecodeJSON).
func DecodeMap(b []byte) (map[string]any, error) {
	var m map[string]any
	if err := DecodeJSON(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeJSON is json.Unmarshal keeping every number in a free-form value
// (any, map[string]any) as the json.Number literal it was written as:
// user metadata such as a job id 1234567890123456789 must come back exactly
// (CONTRACT.md §8), which float64 cannot do. EncodeJSON writes a
// json.Number back as the same literal. Anything after the value is an
// error, as with json.Unmarshal.
func DecodeJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("invalid JSON: data after the value")
	}
	return nil
}

// ErrUnstorable marks a free-form value the ledger will not keep: not
// JSON-encodable, or over its bound.
var ErrUnstorable = errors.New("value cannot be stored")

// CheckMap reports why m cannot be kept in a field bounded by limit bytes
// of EncodeJSON (wrapping ErrUnstorable), or nil. The error never contains
// a value of m.
func CheckMap(m map[string]any, limit int) error {
	if m == nil {
		return nil
	}
	b, err := EncodeJSON(m)
	if err != nil {
		// In JSON's words: the encoder's error names Go types, and this
		// error becomes a 400's detail (no Go type in any detail).
		return fmt.Errorf("%w: not JSON-encodable (a value JSON has no form for: NaN, an infinity, a function, a channel)", ErrUnstorable)
	}
	if len(b) > limit {
		return fmt.Errorf("%w: %d bytes as JSON, over the limit of %d", ErrUnstorable, len(b), limit)
	}
	return nil
}

// CheckMetadata is CheckMap with MaxMetadataBytes.
func CheckMetadata(m map[string]any) error { return CheckMap(m, MaxMetadataBytes) }

// Truncate returns s cut to at most n bytes, never inside a UTF-8 sequence.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Revision identifies the stored version of a document; it means the same
// in every adapter (ledgertest and claimstest pin it).
//
// Version counts the writes to the document: 1 when it is created, and every
// later write, whichever Write makes it, sets it to one more. An operation
// is written by a put (the protocol's CommitOperation), the schedule patch
// (ScheduleCheck, RecordStuckAlert) and the effect-mirror patch (of
// SeizeClaim, ReleaseClaim and CompleteClaim); a claim is put by
// CommitOperation, SeizeClaim, ReleaseClaim and CompleteClaim.
//
// Why every write: each of them can race a fenced write made from an earlier
// read (a seize's mirror against the door's commit of the mirror it read, a
// completion against a seize from a stale read), so each must move the
// fence. It costs no read: a fenced write knows the version it replaces, and
// the mirror write, fenced on the claim rather than on the operation, bumps
// the operation's version in place (SQL "version + 1", a Firestore increment
// transform in the same write).
//
// SQLite and memledger fence on Version. Firestore fences on Stamp, the
// store's own update time, which every write moves too (its preconditions
// compare update times), and keeps Version all the same, so a version the
// door reports or the CLI shows counts the same writes on every store. Stamp
// is zero where it is not used. The zero Revision means "does not exist yet".
type Revision struct {
	Version int64
	Stamp   time.Time
}

// FirstVersion is the Version of a document just created.
const FirstVersion int64 = 1

// Exists reports whether the revision refers to a stored document.
func (r Revision) Exists() bool { return r.Version > 0 }

// HistoryEntry is one recorded event: an applied one, or a terminal conflict.
type HistoryEntry struct {
	At         time.Time       `json:"at"`
	Source     string          `json:"source"`
	State      lifecycle.State `json:"state"`
	UpdateTime time.Time       `json:"update_time"`
	Reason     string          `json:"reason"`
	DeliveryID string          `json:"delivery_id,omitempty"`
}

// EffectMirror is the operation document's copy of its claim's status, kept
// so that a duplicate delivery can tell from the one operation read that no
// side effect is owed, and a console page can show every row's claim status
// without reading the claims. It is written when the claim is created,
// seized, released and committed DONE (in the same commit as the claim); a
// duplicate that sees an expired mirror lease on a held claim reads the claim.
type EffectMirror struct {
	Status     ClaimStatus `json:"status,omitempty"`
	LeaseUntil time.Time   `json:"lease_until,omitzero"`
}

// Owed reports whether the mirror says a side effect may still be owed at
// now: the claim was released, or its lease has run out.
func (m EffectMirror) Owed(now time.Time) bool {
	switch m.Status {
	case ClaimReleased:
		return true
	case ClaimHeld:
		return !now.Before(m.LeaseUntil)
	default:
		return false
	}
}

// Operation is one operation's document.
type Operation struct {
	ID      string // document id (opname.DocID of the key)
	Rev     Revision
	Name    string // canonical name
	APIName string // the name to ask the Gemini API with
	Kind    opname.Kind
	State   lifecycle.State
	// UpdateTime is the server time of State.
	UpdateTime time.Time
	// GeminiStatus is the provider's raw status string as last applied
	// ("budget_exceeded", "JOB_STATE_SUCCEEDED", "video.generated"...), so
	// consumers can tell what Gemini said behind lrosink's State.
	GeminiStatus string
	SubmittedAt  time.Time
	SettledAt    time.Time
	SettledBy    string
	// NextCheckAt is when the reconciler should next ask Gemini; zero once
	// settled (so the pending query never sees settled operations).
	NextCheckAt time.Time
	Checks      int
	// LastCheck records the last reconcile answer that was not a state
	// (e.g. "not-found" for a Gemini 404).
	LastCheck   string
	LastCheckAt time.Time
	// StuckAlertedAt is when the reconciler last raised the stuck alert for
	// the operation (zero: never); it paces the alert's repetitions.
	StuckAlertedAt time.Time
	// StuckFrom orders the stuck scan (see StuckKey): the operation's next
	// stuck alert is due once StuckFrom + LROSINK_STUCK_AFTER has passed.
	// Zero until the first alert (the scan then uses SubmittedAt); each alert
	// moves it forward to when the next one is due, less StuckAfter, so the
	// scan reads only operations whose alert is due, earliest first, and
	// old stuck operations never hide a newly stuck one. Stores read back
	// StuckKey (SubmittedAt before the first alert, zero once terminal).
	StuckFrom    time.Time
	History      []HistoryEntry
	Conflicts    []HistoryEntry
	UserMetadata map[string]any
	Output       map[string]any
	Error        *results.ErrorInfo
	Effect       EffectMirror
	Replays      []Replay
	// Intent is the key of the intent bound to the operation (its
	// registration, CONTRACT.md §5), "" for none: a delivery naming it
	// needs no read of the intent to know it is bound here.
	Intent string
}

// Replay records a deliberate re-publication (lrosink replay).
type Replay struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// Current is the reducer's view of the operation.
func (o Operation) Current() lifecycle.Current {
	return lifecycle.Current{Exists: o.Rev.Exists(), State: o.State, UpdateTime: o.UpdateTime}
}

// HasConflict reports whether a terminal conflict with state s is already
// recorded, so a repeated conflicting delivery costs no write.
func (o Operation) HasConflict(s lifecycle.State) bool {
	for _, c := range o.Conflicts {
		if c.State == s {
			return true
		}
	}
	return false
}

// ClaimStatus is a claim's lifecycle.
type ClaimStatus string

// Claim statuses.
const (
	ClaimHeld     ClaimStatus = "CLAIMED"
	ClaimReleased ClaimStatus = "RELEASED"
	ClaimDone     ClaimStatus = "DONE"
)

// Claim is the idempotency record of one operation's side effect. It is
// created in the same commit as the operation's first terminal state and
// carries the message to publish, so a later holder republishes exactly the
// same message.
type Claim struct {
	ID         string // document id (same as the operation's)
	Rev        Revision
	Key        string // idempotency key
	Operation  string // canonical name
	Status     ClaimStatus
	Holder     string // fencing token of the current holder
	LeaseUntil time.Time
	Attempts   int
	CreatedAt  time.Time
	UpdatedAt  time.Time
	DoneAt     time.Time
	// ExpireAt drives a TTL policy far beyond Gemini's 24 h retry window.
	// The door sets it to now + its ClaimTTL at creation and at every
	// seize and release, so a claim is never deleted while it is retried.
	ExpireAt time.Time
	Message  results.Message
}

// Live reports whether the claim is held and its lease has not run out.
func (c Claim) Live(now time.Time) bool {
	return c.Status == ClaimHeld && now.Before(c.LeaseUntil)
}

// Lease is what a holder keeps to commit or release its claim: the claim
// as it last wrote it (Claim, whose Rev is the fence), so the protocol
// (package claims) can write the whole document again without a read.
type Lease struct {
	ID     string
	OpID   string
	Holder string
	Rev    Revision
	// Claim is the claim as the holder last wrote it; the store still holds
	// exactly this while Rev is current.
	Claim Claim
}

// Write is one conditional write of Apply. Exactly one of its fields is set:
//
//   - Op puts a whole operation document, on the precondition that the
//     stored revision still equals Op.Rev (zero: that it does not exist);
//     its new Version is Op.Rev.Version+1.
//   - Claim puts a whole claim document on the same precondition on
//     Claim.Rev.
//   - Mirror patches the effect mirror of an existing operation and bumps
//     its Version in place: no precondition on the operation's revision
//     (the claim write in the same call fences it), only that it exists.
//   - Schedule writes only the reconciler's fields of an existing operation
//     (NextCheckAt, Checks, LastCheck, LastCheckAt, StuckAlertedAt and the
//     StuckKey of Schedule), on the same precondition as Op, keeping every
//     other field as stored: the reconciler schedules against the revision
//     the door just wrote without having read what the door wrote.
//   - Intent puts a whole intent document on the precondition that its
//     stored revision still equals Intent.Rev (zero: that it does not
//     exist), so that a bind commits with the operation it binds.
type Write struct {
	Op       *Operation
	Claim    *Claim
	Mirror   *Mirror
	Schedule *Operation
	Intent   *Intent
}

// Mirror is the effect-mirror patch of one operation (Write.Mirror).
type Mirror struct {
	OpID   string
	Effect EffectMirror
	// SettledAt is the operation's settlement time, given with a DONE
	// mirror (PatchMirrorDone): a store that expires settled operations by
	// a stored time (Firestore's expire_at) starts the retention from it
	// without reading the operation. Zero: not known, nothing expires.
	SettledAt time.Time
}

// PutOperation is a Write of the whole of op, fenced on op.Rev.
func PutOperation(op Operation) Write { return Write{Op: &op} }

// PutClaim is a Write of the whole of c, fenced on c.Rev, but for its
// message: a claim's message is fixed when the claim is created, so every
// holder publishes the same one, and a put of an existing claim keeps the
// stored message whatever c.Message holds (a store neither encodes nor
// writes it again).
func PutClaim(c Claim) Write { return Write{Claim: &c} }

// PatchSchedule is a Write of the reconciler's fields of op, fenced on
// op.Rev.
func PatchSchedule(op Operation) Write { return Write{Schedule: &op} }

// PatchMirror is a Write of the effect mirror of operation opID.
func PatchMirror(opID string, m EffectMirror) Write {
	return Write{Mirror: &Mirror{OpID: opID, Effect: m}}
}

// PatchMirrorDone is a Write of a DONE effect mirror on operation opID,
// which settled at settledAt.
//
// Retention (LROSINK_RETENTION) is a rule of the port, kept by every store
// however it deletes (SQLite and memory in the reconcile pass, Firestore by
// its TTL policy on expire_at; ledgertest.RunRetention): a settled
// operation is deleted only once its effect is DONE, and not before
// Retention after its settlement. One still owing its results message is
// kept whatever its age: deleting it would leave its claim unseizable (a
// seize patches the operation's mirror) and the message unpublished. This
// write is the one after which a store may expire the operation.
func PatchMirrorDone(opID string, settledAt time.Time) Write {
	return Write{Mirror: &Mirror{OpID: opID, Effect: EffectMirror{Status: ClaimDone}, SettledAt: settledAt}}
}

// Describe names the write in errors: "operation ID", "claim ID" or
// "mirror of operation ID".
func (w Write) Describe() string {
	switch {
	case w.Op != nil:
		return "operation " + w.Op.ID
	case w.Claim != nil:
		return "claim " + w.Claim.ID
	case w.Mirror != nil:
		return "mirror of operation " + w.Mirror.OpID
	case w.Schedule != nil:
		return "schedule of operation " + w.Schedule.ID
	case w.Intent != nil:
		return "intent " + w.Intent.Key
	}
	return "empty write"
}

// Validate reports a write that sets none or more than one of its fields.
func (w Write) Validate() error {
	n := 0
	for _, set := range []bool{w.Op != nil, w.Claim != nil, w.Mirror != nil, w.Schedule != nil, w.Intent != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("ledger: a write sets exactly one of Op, Claim, Mirror, Schedule, Intent (this one sets %d)", n)
	}
	return nil
}

// Reads are the document reads of the port.
type Reads interface {
	// GetOperation reads one operation; ErrNotFound if absent.
	GetOperation(ctx context.Context, id string) (Operation, error)
	// GetClaim reads one claim; ErrNotFound if absent.
	GetClaim(ctx context.Context, id string) (Claim, error)
	// GetIntent reads the intent recorded under key; ErrNotFound if absent.
	GetIntent(ctx context.Context, key string) (Intent, error)
}

// Writes is the one write entry point of the port.
type Writes interface {
	// Apply commits writes atomically: all of them or none. Each has its
	// own precondition (see Write); one that fails fails the call with
	// ErrConflict, wrapped with which write (where the store can tell),
	// and nothing is written. It returns each write's new revision, in
	// order; a Mirror's is the zero Revision (knowing it would cost a read
	// on Firestore).
	Apply(ctx context.Context, writes ...Write) ([]Revision, error)
}

// Queries is what the reconciler and the operator CLI need. Every query is
// served by an index and bounded by limit: never a scan of the ledger.
type Queries interface {
	// DueOperations returns up to limit pending operations of the buckets
	// of rg (shard.Of of their ID) whose NextCheckAt is at or before now, in
	// (NextCheckAt, ID) order, starting strictly after the cursor (the zero
	// cursor starts at the beginning). shard.All() is every operation.
	DueOperations(ctx context.Context, rg shard.Range, now time.Time, after DueCursor, limit int) ([]Operation, error)
	// CountDue returns how many operations DueOperations would list for rg
	// and now: a count aggregation over the same index, which reads no
	// documents. A pass counts what it left due (its backlog).
	CountDue(ctx context.Context, rg shard.Range, now time.Time) (int64, error)
	// CountPending returns how many operations are not in a terminal
	// state: a count aggregation over the pending_since index.
	CountPending(ctx context.Context) (int64, error)
	// StuckOperations returns up to limit operations of the buckets of rg
	// not in a terminal state whose StuckKey is at or before cutoff, in
	// (StuckKey, ID) order: for a cutoff of now minus StuckAfter, those
	// whose stuck alert is due, earliest due first.
	StuckOperations(ctx context.Context, rg shard.Range, cutoff time.Time, limit int) ([]Operation, error)
	// DueClaims returns up to limit claims that are not DONE and whose lease
	// ended (or that were released) at or before now, in (LeaseUntil, ID)
	// order, earliest first, starting strictly after the cursor (the zero
	// cursor starts at the beginning).
	DueClaims(ctx context.Context, now time.Time, after ClaimCursor, limit int) ([]Claim, error)
	// CountDueClaims returns how many claims DueClaims would list for now
	// and after, without a limit: a count aggregation over the same index,
	// which reads no documents. A pass counts the due claims it left.
	CountDueClaims(ctx context.Context, now time.Time, after ClaimCursor) (int64, error)
	// ListOperations returns up to limit operations, newest submission first,
	// optionally only those in state (empty: any).
	ListOperations(ctx context.Context, state lifecycle.State, limit int) ([]Operation, error)
	// PageOperations returns up to limit operations matching f, newest
	// submission first (ties: larger ID first), starting strictly after the
	// cursor (the zero cursor starts at the newest). The console pages with
	// it; every combination of f's fields is served by an index.
	PageOperations(ctx context.Context, f Filter, after ListCursor, limit int) ([]Operation, error)
	// CountOperations returns how many operations match f: an aggregation
	// over the same index as PageOperations, which reads no documents.
	CountOperations(ctx context.Context, f Filter) (int64, error)
	// SearchOperations returns up to limit operations whose canonical name
	// starts with prefix ("batches/batch_12"), in document id order (name
	// order, escapes aside), with an id strictly after after ("": from the
	// first), so that a search reads on where its last page ended. Document
	// ids are a prefix-preserving escape of the name (opname.DocID), so it
	// is a range read on the id, which every store indexes: never a scan.
	SearchOperations(ctx context.Context, prefix, after string, limit int) ([]Operation, error)
	// UnboundIntents returns up to limit intents bound to no operation
	// that were recorded at or before before, in (CreatedAt, Key) order,
	// starting strictly after the cursor: for a cutoff of now minus
	// LROSINK_INTENT_GRACE, those alerted (ops list --stuck, the console).
	UnboundIntents(ctx context.Context, before time.Time, after IntentCursor, limit int) ([]Intent, error)
	// CountUnboundIntents returns how many intents UnboundIntents would
	// list for before: a count aggregation over the same index.
	CountUnboundIntents(ctx context.Context, before time.Time) (int64, error)
	// IntentAlertsDue returns up to limit unbound intents whose
	// IntentAlertKey is at or before cutoff, in (key, Key) order: for a
	// cutoff of now minus the grace, those whose alert is due, earliest
	// due first (as StuckOperations for operations).
	IntentAlertsDue(ctx context.Context, cutoff time.Time, limit int) ([]Intent, error)
}

// NameRange returns the document-id range [lo, hi) of the operations whose
// canonical name starts with prefix: DocID escapes character by character,
// so the ids of those names are exactly the ids starting with lo, and
// U+10FFFF sorts after every other character in UTF-8 byte order.
func NameRange(prefix string) (lo, hi string, err error) {
	lo, err = opname.DocID(opname.KeyPrefix + prefix)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrBadPrefix, err)
	}
	hi = lo + "\U0010FFFF"
	if len(hi) > opname.MaxDocIDLen {
		// Firestore refuses a document id this long even as a bound.
		return "", "", fmt.Errorf("%w: %d bytes escaped, the longest searchable is %d", ErrBadPrefix, len(lo), opname.MaxDocIDLen-len("\U0010FFFF"))
	}
	return lo, hi, nil
}

// ErrBadPrefix wraps a name prefix that cannot be searched (too long once
// escaped): the caller's input, not the store's failure.
var ErrBadPrefix = errors.New("name prefix cannot be searched")

// Filter selects operations for PageOperations and CountOperations. The
// zero Filter selects every operation.
type Filter struct {
	// State, when set, keeps operations in exactly this state.
	State lifecycle.State
	// Kind, when set, keeps operations of this kind.
	Kind opname.Kind
	// StuckAt, when set, keeps operations not in a terminal state that were
	// submitted at or before it: the stuck ones, for a cutoff of now minus
	// LROSINK_STUCK_AFTER (the same set StuckOperations walks).
	StuckAt time.Time
}

// ListCursor is a position in PageOperations' order: (SubmittedAt, ID),
// both descending.
type ListCursor struct {
	SubmittedAt time.Time
	ID          string
}

// IsZero reports whether c is the start of the list.
func (c ListCursor) IsZero() bool { return c.SubmittedAt.IsZero() && c.ID == "" }

// ListAfter returns the cursor just past op in PageOperations' order.
func ListAfter(op Operation) ListCursor { return ListCursor{SubmittedAt: op.SubmittedAt, ID: op.ID} }

// DueCursor is a position in the due order: (NextCheckAt, ID). A pass
// pages with it so that it always moves past what it already tried, even
// an operation it could not reschedule.
type DueCursor struct {
	NextCheckAt time.Time
	ID          string
}

// After returns the cursor just past op.
func After(op Operation) DueCursor { return DueCursor{NextCheckAt: op.NextCheckAt, ID: op.ID} }

// ClaimCursor is a position in the due-claims order: (LeaseUntil, ID), the
// lease's end being when a claim not DONE is due (a release ends it). A
// pass pages with it so that it moves past every claim it tried, even one
// still due after its retry.
type ClaimCursor struct {
	DueAt time.Time
	ID    string
}

// ClaimAfter returns the cursor just past c.
func ClaimAfter(c Claim) ClaimCursor { return ClaimCursor{DueAt: c.LeaseUntil, ID: c.ID} }

// Ledger is the port: a store of operation and claim documents. It reads
// them, writes them under preconditions (Apply) and answers the indexed
// queries; it knows nothing of leases, holders or tokens. The rules that
// decide what to write (seize, release, complete, the effect mirror, the
// reconciler's schedule and stuck-alert updates) live once, in package
// claims, over any Ledger.
type Ledger interface {
	Reads
	Writes
	Queries
}

// CheckWrites reports a call to Apply that no store accepts: no writes, a
// malformed write, or two writes of one document (Firestore refuses them in
// one commit, and their order would be a rule, which the port does not
// keep).
func CheckWrites(writes []Write) error {
	if len(writes) == 0 {
		return errors.New("apply: no writes")
	}
	// A call holds a few writes: comparing each with those before it
	// allocates nothing, where a set of document names did per call.
	for i, w := range writes {
		if err := w.Validate(); err != nil {
			return fmt.Errorf("apply: write %d: %w", i, err)
		}
		for _, before := range writes[:i] {
			if before.doc() == w.doc() {
				return fmt.Errorf("apply: write %d: a second write of %s in one call", i, w.doc())
			}
		}
	}
	return nil
}

// docRef is the document a valid write writes.
type docRef struct {
	collection, id string
}

func (d docRef) String() string { return d.collection + "/" + d.id }

func (w Write) doc() docRef {
	switch {
	case w.Claim != nil:
		return docRef{"claims", w.Claim.ID}
	case w.Op != nil:
		return docRef{"operations", w.Op.ID}
	case w.Schedule != nil:
		return docRef{"operations", w.Schedule.ID}
	case w.Intent != nil:
		return docRef{"intents", w.Intent.Key}
	}
	return docRef{"operations", w.Mirror.OpID}
}

// ByDue is DueOperations' order, (NextCheckAt, ID), for a store that
// merges the pages of several index reads.
func ByDue(a, b Operation) int {
	return cmp.Or(a.NextCheckAt.Compare(b.NextCheckAt), cmp.Compare(a.ID, b.ID))
}

// ByStuck is StuckOperations' order, (StuckKey, ID); stores read the key
// back in StuckFrom.
func ByStuck(a, b Operation) int {
	return cmp.Or(a.StuckFrom.Compare(b.StuckFrom), cmp.Compare(a.ID, b.ID))
}

// FirstOf merges pages read in order into the first limit operations in
// order (a ranged query read bucket by bucket, or in groups of buckets).
func FirstOf(limit int, order func(a, b Operation) int, pages ...[]Operation) []Operation {
	out := slices.Concat(pages...)
	slices.SortFunc(out, order)
	return out[:min(limit, len(out))]
}
