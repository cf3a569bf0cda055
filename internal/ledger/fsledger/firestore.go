// Package fsledger is the Firestore adapter of the ledger port.
//
// Collections: `operations` (one document per operation) and `claims` (one
// per idempotency key), both keyed by opname.DocID of the key, and
// `intents` (one per intent key, keyed by its opname.DocID).
//
// Fencing uses Firestore preconditions instead of reads inside transactions:
// an operation is updated only if its update time still equals the one read
// (LastUpdateTime), and created only if absent (Create). So a state change
// costs the one read the ingest door already made, plus the writes, and
// concurrent writers never wait on each other's locks; the loser gets
// ErrConflict and re-reads. Claims are fenced the same way on their own
// update time, which every write of a claim moves. Both kinds
// of document also keep the write count ledger.Revision defines in a
// "version" field, which no precondition reads.
package fsledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/shard"
)

// Collection names.
const (
	Operations = "operations"
	Claims     = "claims"
	// Deliveries holds the delivery log: one document per operation (same
	// id), never written with the operation (deliveries.go).
	Deliveries = "deliveries"
	// Intents holds the intents (ledger.Intent), keyed by opname.DocID of
	// the intent key.
	Intents = "intents"
)

// Counts tallies document reads and writes and commits, so benchmarks can
// report the Firestore cost of each ingest path.
type Counts = ledger.Counts

// Store is the Firestore ledger.
type Store struct {
	client *firestore.Client
	counts *Counts
	// retention, when positive, gives a settled operation whose effect is
	// DONE an expire_at this long after its settlement, which the TTL
	// policy on operations.expire_at (terraform/firestore.tf) deletes.
	retention time.Duration
}

// WithRetention makes s write expire_at = settled_at + d on settled
// operations once their effect is DONE (LROSINK_RETENTION), and remove it
// while the effect is owed: the port's retention rule
// (ledger.PatchMirrorDone). 0 writes none. It returns s.
func (s *Store) WithRetention(d time.Duration) *Store {
	s.retention = d
	return s
}

// New returns a store on client. counts may be nil.
func New(client *firestore.Client, counts *Counts) *Store {
	if counts == nil {
		counts = &Counts{}
	}
	return &Store{client: client, counts: counts}
}

// Counts returns the store's read/write tallies.
func (s *Store) Counts() *Counts { return s.counts }

func (s *Store) op(id string) *firestore.DocumentRef    { return s.client.Collection(Operations).Doc(id) }
func (s *Store) claim(id string) *firestore.DocumentRef { return s.client.Collection(Claims).Doc(id) }

// intent is the document of intent key. A key register accepted is always
// a valid DocID; one that is not makes a reference Firestore refuses.
func (s *Store) intent(key string) *firestore.DocumentRef {
	id, err := opname.DocID(key)
	if err != nil {
		id = key
	}
	return s.client.Collection(Intents).Doc(id)
}

// opDoc is the stored form of an operation. Field names are part of the
// deployment (indexes, TTL policies, log queries): change them only with a
// migration.
type opDoc struct {
	Name    string `firestore:"name"`
	APIName string `firestore:"api_name"`
	Kind    string `firestore:"kind"`
	State   string `firestore:"state"`
	// GeminiStatus is absent from documents written before it existed,
	// which reads as "".
	GeminiStatus string     `firestore:"gemini_status"`
	UpdateTime   time.Time  `firestore:"update_time"`
	Version      int64      `firestore:"version"`
	SubmittedAt  time.Time  `firestore:"submitted_at"`
	SettledAt    *time.Time `firestore:"settled_at"`
	SettledBy    string     `firestore:"settled_by"`
	NextCheckAt  *time.Time `firestore:"next_check_at,omitempty"`
	// PendingSince is the submission time while the operation is pending and
	// absent once settled: the stuck query is a single-field range on it.
	PendingSince *time.Time `firestore:"pending_since,omitempty"`
	Checks       int        `firestore:"checks"`
	LastCheck    string     `firestore:"last_check"`
	LastCheckAt  *time.Time `firestore:"last_check_at"`
	// StuckAlertedAt is absent until the first stuck alert.
	StuckAlertedAt *time.Time `firestore:"stuck_alerted_at,omitempty"`
	// StuckFrom is ledger.StuckKey, absent once settled: the stuck scan is
	// a single-field range on it. Documents written before it existed get
	// it at their next write; every pending operation's next check is one.
	StuckFrom *time.Time `firestore:"stuck_from,omitempty"`
	// Bucket is shard.Of of the document id, written with every write (it
	// never changes): the ranged due and stuck queries filter on it.
	// Documents written before it existed lack it until their next write
	// (a check rewrites it) or BackfillBuckets; a whole-ledger pass does
	// not use it.
	Bucket *int `firestore:"bucket,omitempty"`
	// ExpireAt is when the TTL policy deletes a settled operation whose
	// results message is published (absent without LROSINK_RETENTION,
	// while pending, and while the message is owed).
	ExpireAt  *time.Time   `firestore:"expire_at,omitempty"`
	History   []historyDoc `firestore:"history"`
	Conflicts []historyDoc `firestore:"conflicts"`
	// UserMetadata and Output are written as one JSON string each
	// (ledger.EncodeJSON; null when absent): a Firestore map refuses
	// arrays inside arrays and keys such as "__name__" or "", which JSON
	// metadata may carry. Documents written before hold a map: read either.
	UserMetadata any                `firestore:"user_metadata"`
	Output       any                `firestore:"output"`
	Error        *results.ErrorInfo `firestore:"error"`
	Effect       effectDoc          `firestore:"effect"`
	Replays      []replayDoc        `firestore:"replays"`
	// Intent is the key of the intent bound to the operation; absent
	// (read as "") in documents written before intents.
	Intent string `firestore:"intent"`
}

type historyDoc struct {
	At         time.Time `firestore:"at"`
	Source     string    `firestore:"source"`
	State      string    `firestore:"state"`
	UpdateTime time.Time `firestore:"update_time"`
	Reason     string    `firestore:"reason"`
	DeliveryID string    `firestore:"delivery_id"`
}

type effectDoc struct {
	Status     string     `firestore:"status"`
	LeaseUntil *time.Time `firestore:"lease_until"`
}

type replayDoc struct {
	ID string    `firestore:"id"`
	At time.Time `firestore:"at"`
}

type claimDoc struct {
	Key        string     `firestore:"key"`
	Operation  string     `firestore:"operation"`
	Status     string     `firestore:"status"`
	Holder     string     `firestore:"holder"`
	LeaseUntil time.Time  `firestore:"lease_until"`
	Attempts   int        `firestore:"attempts"`
	CreatedAt  time.Time  `firestore:"created_at"`
	UpdatedAt  time.Time  `firestore:"updated_at"`
	DoneAt     *time.Time `firestore:"done_at"`
	ExpireAt   time.Time  `firestore:"expire_at"`
	// DueAt is set while the side effect is owed (lease end, or release
	// time) and removed once DONE, so "claims to retry" is a single-field
	// range query.
	DueAt *time.Time `firestore:"due_at,omitempty"`
	// Version counts the claim's writes (ledger.Revision). Claims written
	// before it existed lack it and read their attempts instead, the
	// number they reported then; the next write continues from there.
	Version int64 `firestore:"version"`
	// Message is the results message data (CONTRACT.md §6) as JSON, kept
	// verbatim so every holder publishes byte-identical data.
	Message string `firestore:"message"`
}

func ptr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func val(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

func toHistory(h []ledger.HistoryEntry) []historyDoc {
	out := make([]historyDoc, len(h))
	for i, e := range h {
		out[i] = historyDoc{At: e.At, Source: e.Source, State: string(e.State), UpdateTime: e.UpdateTime, Reason: e.Reason, DeliveryID: e.DeliveryID}
	}
	return out
}

// fromHistory reads a stored list; an empty one is nil, as every adapter
// reads it (ledger.StoredHistory).
func fromHistory(h []historyDoc) []ledger.HistoryEntry {
	if len(h) == 0 {
		return nil
	}
	out := make([]ledger.HistoryEntry, len(h))
	for i, e := range h {
		out[i] = ledger.HistoryEntry{At: e.At.UTC(), Source: e.Source, State: lifecycle.State(e.State), UpdateTime: e.UpdateTime.UTC(), Reason: e.Reason, DeliveryID: e.DeliveryID}
	}
	return out
}

func pendingSince(o ledger.Operation) *time.Time {
	if o.State.Terminal() {
		return nil
	}
	return ptr(o.SubmittedAt)
}

func orDelete(t *time.Time) any {
	if t == nil {
		return firestore.Delete
	}
	return *t
}

// encodeMap is a free-form map as stored: its JSON text, or nil (null).
func encodeMap(what string, m map[string]any) (any, error) {
	if m == nil {
		return nil, nil
	}
	s, err := ledger.EncodeJSONString(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", what, err)
	}
	return s, nil
}

// decodeMap reads a free-form map: JSON text, or the map of a document
// written before maps were stored as text (normalized through JSON where it
// can be, so both adapters return the same values).
func decodeMap(what string, v any) (map[string]any, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		m, err := ledger.DecodeMap([]byte(v))
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", what, err)
		}
		return m, nil
	case map[string]any:
		b, err := ledger.EncodeJSON(v)
		if err != nil {
			return v, nil // kept as read: an old map JSON cannot express (e.g. NaN)
		}
		return ledger.DecodeMap(b)
	default:
		return nil, fmt.Errorf("decode %s: unexpected %T", what, v)
	}
}

func toOpDoc(o ledger.Operation, version int64) (opDoc, error) {
	meta, err := encodeMap("user_metadata", o.UserMetadata)
	if err != nil {
		return opDoc{}, err
	}
	out, err := encodeMap("output", o.Output)
	if err != nil {
		return opDoc{}, err
	}
	d := opDoc{
		Name: o.Name, APIName: o.APIName, Kind: string(o.Kind), State: string(o.State), GeminiStatus: o.GeminiStatus,
		UpdateTime: lifecycle.ServerTime(o.UpdateTime), Version: version,
		SubmittedAt: o.SubmittedAt, SettledAt: ptr(o.SettledAt), SettledBy: o.SettledBy,
		NextCheckAt: ptr(o.NextCheckAt), PendingSince: pendingSince(o), Checks: o.Checks, LastCheck: o.LastCheck, LastCheckAt: ptr(o.LastCheckAt),
		History: toHistory(o.History), Conflicts: toHistory(o.Conflicts),
		UserMetadata: meta, Output: out, Error: o.Error,
		Effect:         effectDoc{Status: string(o.Effect.Status), LeaseUntil: ptr(o.Effect.LeaseUntil)},
		StuckAlertedAt: ptr(o.StuckAlertedAt), StuckFrom: ptr(ledger.StuckKey(o)),
		Bucket: bucketOf(o.ID), Intent: o.Intent,
	}
	for _, r := range o.Replays {
		d.Replays = append(d.Replays, replayDoc{ID: r.ID, At: r.At})
	}
	return d, nil
}

// updates lists every field of d, so an Update (which, unlike Set, takes a
// precondition) replaces the whole document. A settled operation loses
// next_check_at entirely, keeping it out of the pending query.
func (d opDoc) updates() []firestore.Update {
	return []firestore.Update{
		{Path: "name", Value: d.Name}, {Path: "api_name", Value: d.APIName}, {Path: "kind", Value: d.Kind},
		{Path: "state", Value: d.State}, {Path: "gemini_status", Value: d.GeminiStatus}, {Path: "update_time", Value: d.UpdateTime}, {Path: "version", Value: d.Version},
		{Path: "submitted_at", Value: d.SubmittedAt}, {Path: "settled_at", Value: d.SettledAt}, {Path: "settled_by", Value: d.SettledBy},
		{Path: "next_check_at", Value: orDelete(d.NextCheckAt)}, {Path: "pending_since", Value: orDelete(d.PendingSince)},
		{Path: "checks", Value: d.Checks},
		{Path: "last_check", Value: d.LastCheck}, {Path: "last_check_at", Value: d.LastCheckAt},
		{Path: "history", Value: d.History}, {Path: "conflicts", Value: d.Conflicts},
		{Path: "user_metadata", Value: d.UserMetadata}, {Path: "output", Value: d.Output}, {Path: "error", Value: d.Error},
		{Path: "effect", Value: d.Effect}, {Path: "replays", Value: d.Replays},
		{Path: "stuck_alerted_at", Value: orDelete(d.StuckAlertedAt)}, {Path: "stuck_from", Value: orDelete(d.StuckFrom)},
		{Path: "expire_at", Value: orDelete(d.ExpireAt)}, {Path: "bucket", Value: d.Bucket},
		{Path: "intent", Value: d.Intent},
	}
}

// bucketOf is the stored bucket of the operation with document id id.
func bucketOf(id string) *int {
	b := shard.Of(id)
	return &b
}

func fromOpDoc(id string, snap *firestore.DocumentSnapshot) (ledger.Operation, error) {
	var d opDoc
	if err := snap.DataTo(&d); err != nil {
		return ledger.Operation{}, fmt.Errorf("decode operation %s: %w", id, err)
	}
	meta, err := decodeMap("user_metadata", d.UserMetadata)
	if err != nil {
		return ledger.Operation{}, fmt.Errorf("decode operation %s: %w", id, err)
	}
	out, err := decodeMap("output", d.Output)
	if err != nil {
		return ledger.Operation{}, fmt.Errorf("decode operation %s: %w", id, err)
	}
	o := ledger.Operation{
		ID: id, Rev: ledger.Revision{Version: d.Version, Stamp: snap.UpdateTime},
		Name: d.Name, APIName: d.APIName, Kind: opname.Kind(d.Kind), State: lifecycle.State(d.State), GeminiStatus: d.GeminiStatus,
		UpdateTime: d.UpdateTime.UTC(), SubmittedAt: d.SubmittedAt.UTC(), SettledAt: val(d.SettledAt), SettledBy: d.SettledBy,
		NextCheckAt: val(d.NextCheckAt), Checks: d.Checks, LastCheck: d.LastCheck, LastCheckAt: val(d.LastCheckAt),
		History: fromHistory(d.History), Conflicts: fromHistory(d.Conflicts),
		UserMetadata: meta, Output: out, Error: d.Error,
		Effect:         ledger.EffectMirror{Status: ledger.ClaimStatus(d.Effect.Status), LeaseUntil: val(d.Effect.LeaseUntil)},
		StuckAlertedAt: val(d.StuckAlertedAt), StuckFrom: val(d.StuckFrom), Intent: d.Intent,
	}
	for _, r := range d.Replays {
		o.Replays = append(o.Replays, ledger.Replay{ID: r.ID, At: r.At.UTC()})
	}
	return o, nil
}

func toClaimDoc(c ledger.Claim, version int64) (claimDoc, error) {
	d := claimDoc{
		Key: c.Key, Operation: c.Operation, Status: string(c.Status), Holder: c.Holder,
		LeaseUntil: c.LeaseUntil, Attempts: c.Attempts, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
		DoneAt: ptr(c.DoneAt), ExpireAt: c.ExpireAt, DueAt: dueAt(c), Version: version,
	}
	if c.Rev.Exists() {
		return d, nil // an update keeps the stored message (ledger.PutClaim; updates)
	}
	msg, err := ledger.EncodeJSONString(c.Message)
	if err != nil {
		return claimDoc{}, fmt.Errorf("encode claim message %s: %w", c.Operation, err)
	}
	d.Message = msg
	return d, nil
}

// dueAt is when the claim's side effect is owed: at its lease's end (or
// release time); never once DONE.
func dueAt(c ledger.Claim) *time.Time {
	if c.Status == ledger.ClaimDone {
		return nil
	}
	return ptr(c.LeaseUntil)
}

// updates lists every field of d but the message, which an update keeps
// (ledger.PutClaim), so an Update (which, unlike Set, takes a precondition)
// replaces the rest of the claim; a DONE claim loses due_at.
func (d claimDoc) updates() []firestore.Update {
	return []firestore.Update{
		{Path: "key", Value: d.Key}, {Path: "operation", Value: d.Operation}, {Path: "status", Value: d.Status},
		{Path: "holder", Value: d.Holder}, {Path: "lease_until", Value: d.LeaseUntil}, {Path: "attempts", Value: d.Attempts},
		{Path: "created_at", Value: d.CreatedAt}, {Path: "updated_at", Value: d.UpdatedAt}, {Path: "done_at", Value: d.DoneAt},
		{Path: "expire_at", Value: d.ExpireAt}, {Path: "due_at", Value: orDelete(d.DueAt)}, {Path: "version", Value: d.Version},
	}
}

func fromClaimDoc(id string, snap *firestore.DocumentSnapshot) (ledger.Claim, error) {
	var d claimDoc
	if err := snap.DataTo(&d); err != nil {
		return ledger.Claim{}, fmt.Errorf("decode claim %s: %w", id, err)
	}
	var m results.Message
	if err := ledger.DecodeJSON([]byte(d.Message), &m); err != nil {
		return ledger.Claim{}, fmt.Errorf("decode claim message %s: %w", id, err)
	}
	if d.Version == 0 {
		d.Version = int64(d.Attempts)
	}
	return ledger.Claim{
		ID: id, Rev: ledger.Revision{Version: d.Version, Stamp: snap.UpdateTime},
		Key: d.Key, Operation: d.Operation, Status: ledger.ClaimStatus(d.Status), Holder: d.Holder,
		LeaseUntil: d.LeaseUntil.UTC(), Attempts: d.Attempts, CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
		DoneAt: val(d.DoneAt), ExpireAt: d.ExpireAt.UTC(), Message: m,
	}, nil
}

// GetOperation implements ledger.Reads.
func (s *Store) GetOperation(ctx context.Context, id string) (ledger.Operation, error) {
	s.counts.Reads.Add(1)
	snap, err := s.op(id).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return ledger.Operation{}, fmt.Errorf("operation %s: %w", id, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Operation{}, fmt.Errorf("firestore: get operation %s: %w", id, err)
	}
	return fromOpDoc(id, snap)
}

// GetClaim implements ledger.Reads.
func (s *Store) GetClaim(ctx context.Context, id string) (ledger.Claim, error) {
	s.counts.Reads.Add(1)
	snap, err := s.claim(id).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return ledger.Claim{}, fmt.Errorf("claim %s: %w", id, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Claim{}, fmt.Errorf("firestore: get claim %s: %w", id, err)
	}
	return fromClaimDoc(id, snap)
}

// Apply implements ledger.Writes: one commit of every write, each with its
// precondition (an update fenced on the update time read, or a create; the
// mirror patch an update that only needs the operation to exist). No
// document is read: a failed precondition fails the commit, and Firestore
// then writes nothing. The mirror bumps the operation's version with an
// increment transform, part of the same write.
func (s *Store) Apply(ctx context.Context, writes ...ledger.Write) ([]ledger.Revision, error) {
	if err := ledger.CheckWrites(writes); err != nil {
		return nil, fmt.Errorf("firestore: %w", err)
	}
	what := "apply"
	steps := make([]func(*firestore.Transaction) error, len(writes))
	versions := make([]int64, len(writes))
	for i, w := range writes {
		what += " " + w.Describe()
		var err error
		switch {
		case w.Op != nil:
			versions[i] = w.Op.Rev.Version + 1
			steps[i], err = s.putOp(*w.Op, versions[i])
		case w.Claim != nil:
			versions[i] = w.Claim.Rev.Version + 1
			steps[i], err = s.putClaim(*w.Claim, versions[i])
		case w.Intent != nil:
			versions[i] = w.Intent.Rev.Version + 1
			steps[i], err = s.putIntent(*w.Intent, versions[i])
		case w.Schedule != nil:
			v := *w.Schedule
			versions[i] = v.Rev.Version + 1
			ref, ups := s.op(v.ID), []firestore.Update{
				// Zero times remove the field, as a put stores them: a
				// zero next check leaves the due query.
				{Path: "next_check_at", Value: orDelete(ptr(v.NextCheckAt))}, {Path: "checks", Value: v.Checks},
				{Path: "last_check", Value: v.LastCheck}, {Path: "last_check_at", Value: ptr(v.LastCheckAt)},
				{Path: "stuck_alerted_at", Value: orDelete(ptr(v.StuckAlertedAt))},
				// Also moves a document written before stuck_from existed
				// into the stuck scan, and one written before bucket did
				// into the ranged queries.
				{Path: "stuck_from", Value: orDelete(ptr(ledger.StuckKey(v)))},
				{Path: "bucket", Value: bucketOf(v.ID)},
				{Path: "version", Value: versions[i]},
			}
			fence := firestore.LastUpdateTime(v.Rev.Stamp)
			if len(writes) == 1 {
				// The reconciler's write after each check, alone: one
				// fenced update needs no transaction (one RPC, not a
				// begin and a commit).
				return s.updateAlone(ctx, what, ref, ups, fence, versions[0])
			}
			steps[i] = func(tx *firestore.Transaction) error {
				return tx.Update(ref, ups, fence)
			}
		case w.Mirror != nil:
			ref, m := s.op(w.Mirror.OpID), w.Mirror.Effect
			ups := []firestore.Update{
				{Path: "effect", Value: effectDoc{Status: string(m.Status), LeaseUntil: ptr(m.LeaseUntil)}},
				{Path: "version", Value: firestore.Increment(1)},
			}
			if s.retention > 0 {
				ups = append(ups, firestore.Update{Path: "expire_at", Value: orDelete(s.expireAt(m.Status, w.Mirror.SettledAt))})
			}
			steps[i] = func(tx *firestore.Transaction) error {
				return tx.Update(ref, ups)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("firestore: apply %s: %w", w.Describe(), err)
		}
	}
	var resp firestore.CommitResponse
	err := s.client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
		for _, step := range steps {
			if err := step(tx); err != nil {
				return err
			}
		}
		return nil
	}, firestore.WithCommitResponseTo(&resp))
	s.counts.Commits.Add(1)
	if err != nil {
		return nil, mapErr(err, ledger.ErrConflict, what)
	}
	results, err := resp.WriteResults()
	if err != nil || len(results) != len(writes) {
		return nil, fmt.Errorf("firestore: %s: %d write results for %d writes: %w", what, len(results), len(writes), err)
	}
	s.counts.Writes.Add(int64(len(results)))
	revs := make([]ledger.Revision, len(writes))
	for i, w := range writes {
		if w.Mirror == nil {
			revs[i] = ledger.Revision{Version: versions[i], Stamp: results[i].UpdateTime}
		}
	}
	return revs, nil
}

// updateAlone is Apply of one fenced update, without a transaction.
func (s *Store) updateAlone(ctx context.Context, what string, ref *firestore.DocumentRef, ups []firestore.Update, fence firestore.Precondition, version int64) ([]ledger.Revision, error) {
	wr, err := ref.Update(ctx, ups, fence)
	s.counts.Commits.Add(1)
	if err != nil {
		return nil, mapErr(err, ledger.ErrConflict, what)
	}
	s.counts.Writes.Add(1)
	return []ledger.Revision{{Version: version, Stamp: wr.UpdateTime}}, nil
}

// putOp is the write of the whole of op at version. A settled operation
// whose effect is DONE gets its expire_at (WithRetention); any other has
// none.
func (s *Store) putOp(op ledger.Operation, version int64) (func(*firestore.Transaction) error, error) {
	doc, err := toOpDoc(op, version)
	if err != nil {
		return nil, err
	}
	if op.State.Terminal() {
		doc.ExpireAt = s.expireAt(op.Effect.Status, op.SettledAt)
	}
	return put(s.op(op.ID), op.Rev, doc, doc.updates()), nil
}

// expireAt is the expire_at of a settled operation whose effect is in
// status effect: settledAt + retention once DONE; nil (no expiry, the field
// removed) while the message is owed, without retention, or with no
// settlement time. Removing it on every owed write also takes it off a
// document an older version gave one while the message was owed.
func (s *Store) expireAt(effect ledger.ClaimStatus, settledAt time.Time) *time.Time {
	if s.retention <= 0 || effect != ledger.ClaimDone || settledAt.IsZero() {
		return nil
	}
	at := settledAt.Add(s.retention)
	return &at
}

// intentDoc is the stored form of an intent. Its field names are part of
// the deployment (the TTL policy on expire_at, the single-field indexes
// the queries use).
type intentDoc struct {
	// Key is the intent key as given (the document id is its DocID).
	Key         string `firestore:"key"`
	Kind        string `firestore:"kind"`
	Model       string `firestore:"model"`
	DisplayName string `firestore:"display_name"`
	// Metadata is one JSON string, as an operation's (encodeMap).
	Metadata  any        `firestore:"metadata"`
	CreatedAt time.Time  `firestore:"created_at"`
	Name      string     `firestore:"name"`
	APIName   string     `firestore:"api_name"`
	BoundAt   *time.Time `firestore:"bound_at,omitempty"`
	BoundBy   string     `firestore:"bound_by"`
	AlertedAt *time.Time `firestore:"alerted_at,omitempty"`
	// AlertFrom is ledger.IntentAlertKey and UnboundSince the creation
	// time, both absent once bound: the alert scan and the unbound listing
	// are single-field ranges on them.
	AlertFrom    *time.Time `firestore:"alert_from,omitempty"`
	UnboundSince *time.Time `firestore:"unbound_since,omitempty"`
	// ExpireAt is ledger.IntentExpiry with the store's retention: absent
	// while unbound and without LROSINK_RETENTION. The TTL policy on
	// intents.expire_at deletes the document after it.
	ExpireAt *time.Time `firestore:"expire_at,omitempty"`
	Version  int64      `firestore:"version"`
}

func (s *Store) toIntentDoc(in ledger.Intent, version int64) (intentDoc, error) {
	meta, err := encodeMap("intent metadata", in.Metadata)
	if err != nil {
		return intentDoc{}, err
	}
	d := intentDoc{Key: in.Key, Kind: string(in.Kind), Model: in.Model, DisplayName: in.DisplayName, Metadata: meta,
		CreatedAt: in.CreatedAt, Name: in.Name, APIName: in.APIName, BoundAt: ptr(in.BoundAt), BoundBy: in.BoundBy,
		AlertedAt: ptr(in.AlertedAt), AlertFrom: ptr(ledger.IntentAlertKey(in)),
		ExpireAt: ptr(ledger.IntentExpiry(in, s.retention)), Version: version}
	if !in.Bound() {
		d.UnboundSince = ptr(in.CreatedAt)
	}
	return d, nil
}

// updates lists every field of d, so an Update replaces the whole document.
func (d intentDoc) updates() []firestore.Update {
	return []firestore.Update{
		{Path: "key", Value: d.Key}, {Path: "kind", Value: d.Kind}, {Path: "model", Value: d.Model},
		{Path: "display_name", Value: d.DisplayName}, {Path: "metadata", Value: d.Metadata}, {Path: "created_at", Value: d.CreatedAt},
		{Path: "name", Value: d.Name}, {Path: "api_name", Value: d.APIName}, {Path: "bound_at", Value: orDelete(d.BoundAt)},
		{Path: "bound_by", Value: d.BoundBy}, {Path: "alerted_at", Value: orDelete(d.AlertedAt)},
		{Path: "alert_from", Value: orDelete(d.AlertFrom)}, {Path: "unbound_since", Value: orDelete(d.UnboundSince)},
		{Path: "expire_at", Value: orDelete(d.ExpireAt)}, {Path: "version", Value: d.Version},
	}
}

func fromIntentDoc(_ string, snap *firestore.DocumentSnapshot) (ledger.Intent, error) {
	var d intentDoc
	if err := snap.DataTo(&d); err != nil {
		return ledger.Intent{}, fmt.Errorf("decode intent %s: %w", snap.Ref.ID, err)
	}
	meta, err := decodeMap("metadata", d.Metadata)
	if err != nil {
		return ledger.Intent{}, fmt.Errorf("decode intent %s: %w", d.Key, err)
	}
	return ledger.Intent{Key: d.Key, Rev: ledger.Revision{Version: d.Version, Stamp: snap.UpdateTime},
		Kind: opname.Kind(d.Kind), Model: d.Model, DisplayName: d.DisplayName, Metadata: meta,
		CreatedAt: d.CreatedAt.UTC(), Name: d.Name, APIName: d.APIName, BoundAt: val(d.BoundAt), BoundBy: d.BoundBy,
		AlertedAt: val(d.AlertedAt), AlertFrom: val(d.AlertFrom)}, nil
}

// putIntent is the write of the whole of in at version.
func (s *Store) putIntent(in ledger.Intent, version int64) (func(*firestore.Transaction) error, error) {
	doc, err := s.toIntentDoc(in, version)
	if err != nil {
		return nil, err
	}
	return put(s.intent(in.Key), in.Rev, doc, doc.updates()), nil
}

// GetIntent implements ledger.Reads.
func (s *Store) GetIntent(ctx context.Context, key string) (ledger.Intent, error) {
	s.counts.Reads.Add(1)
	snap, err := s.intent(key).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return ledger.Intent{}, fmt.Errorf("intent %s: %w", key, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Intent{}, fmt.Errorf("firestore: get intent %s: %w", key, err)
	}
	return fromIntentDoc(key, snap)
}

// UnboundIntents implements ledger.Queries: the single-field index on
// unbound_since, which only unbound intents carry (its entries are ordered
// by document id within a value, so the __name__ order the cursor needs
// costs no index).
func (s *Store) UnboundIntents(ctx context.Context, before time.Time, after ledger.IntentCursor, limit int) ([]ledger.Intent, error) {
	if limit <= 0 {
		return nil, nil
	}
	q := s.client.Collection(Intents).Where("unbound_since", "<=", before).
		OrderBy("unbound_since", firestore.Asc).OrderBy("__name__", firestore.Asc).Limit(limit)
	if after.Key != "" {
		q = q.StartAfter(after.CreatedAt, s.intent(after.Key).ID)
	}
	return query(ctx, s, q, "unbound intents", fromIntentDoc)
}

// CountUnboundIntents implements ledger.Queries: a count aggregation over
// UnboundIntents' index.
func (s *Store) CountUnboundIntents(ctx context.Context, before time.Time) (int64, error) {
	return s.count(ctx, "count unbound intents", s.client.Collection(Intents).Where("unbound_since", "<=", before))
}

// IntentAlertsDue implements ledger.Queries: the single-field index on
// alert_from, which only unbound intents carry.
func (s *Store) IntentAlertsDue(ctx context.Context, cutoff time.Time, limit int) ([]ledger.Intent, error) {
	if limit <= 0 {
		return nil, nil
	}
	q := s.client.Collection(Intents).Where("alert_from", "<=", cutoff).
		OrderBy("alert_from", firestore.Asc).OrderBy("__name__", firestore.Asc).Limit(limit)
	return query(ctx, s, q, "intent alerts due", fromIntentDoc)
}

// putClaim is the write of the whole of c at version.
func (s *Store) putClaim(c ledger.Claim, version int64) (func(*firestore.Transaction) error, error) {
	doc, err := toClaimDoc(c, version)
	if err != nil {
		return nil, err
	}
	return put(s.claim(c.ID), c.Rev, doc, doc.updates()), nil
}

// put writes a whole document read at rev: a create if rev is zero, else an
// update of every field (updates) fenced on the update time read.
func put(ref *firestore.DocumentRef, rev ledger.Revision, doc any, updates []firestore.Update) func(*firestore.Transaction) error {
	if !rev.Exists() {
		return func(tx *firestore.Transaction) error { return tx.Create(ref, doc) }
	}
	return func(tx *firestore.Transaction) error {
		return tx.Update(ref, updates, firestore.LastUpdateTime(rev.Stamp))
	}
}

// mapErr turns a failed precondition (or a create that found the document,
// or an update that found none) into the port's fencing error; anything else
// is the store being unavailable.
func mapErr(err error, fenced error, what string) error {
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.AlreadyExists, codes.NotFound:
		return fmt.Errorf("firestore: %s: %w (%v)", what, fenced, err)
	}
	return fmt.Errorf("firestore: %s: %w", what, err)
}

// query runs q and decodes every document with decode; each returned
// document counts as a read (an empty answer still costs one).
func query[T any](ctx context.Context, s *Store, q firestore.Query, what string, decode func(string, *firestore.DocumentSnapshot) (T, error)) ([]T, error) {
	snaps, err := q.Documents(ctx).GetAll()
	s.counts.Reads.Add(int64(max(1, len(snaps))))
	if err != nil {
		return nil, fmt.Errorf("firestore: query %s: %w", what, err)
	}
	out := make([]T, 0, len(snaps))
	for _, snap := range snaps {
		v, err := decode(snap.Ref.ID, snap)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// DueOperations implements ledger.Queries. The whole ledger is served by
// the single-field index on next_check_at: its entries are ordered by
// document id within a value, so the explicit __name__ order, which the
// cursor needs, costs no index. A range of buckets adds an `in` filter on
// bucket, served by the composite index (bucket, next_check_at); Firestore
// merges the buckets in order, and bills only the documents returned.
func (s *Store) DueOperations(ctx context.Context, rg shard.Range, now time.Time, after ledger.DueCursor, limit int) ([]ledger.Operation, error) {
	return inBuckets(rg, limit, ledger.ByDue, func(buckets []any) ([]ledger.Operation, error) {
		q := s.client.Collection(Operations).Where("next_check_at", "<=", now).
			OrderBy("next_check_at", firestore.Asc).OrderBy("__name__", firestore.Asc).Limit(limit)
		if buckets != nil {
			q = q.Where("bucket", "in", buckets)
		}
		if !after.NextCheckAt.IsZero() {
			q = q.StartAfter(after.NextCheckAt, after.ID)
		}
		return query(ctx, s, q, "due operations", fromOpDoc)
	})
}

// StuckOperations implements ledger.Queries: the single-field index on
// stuck_from (its entries are ordered by document id within a value); a
// range of buckets, the composite index (bucket, stuck_from).
func (s *Store) StuckOperations(ctx context.Context, rg shard.Range, cutoff time.Time, limit int) ([]ledger.Operation, error) {
	return inBuckets(rg, limit, ledger.ByStuck, func(buckets []any) ([]ledger.Operation, error) {
		q := s.client.Collection(Operations).Where("stuck_from", "<=", cutoff).
			OrderBy("stuck_from", firestore.Asc).OrderBy("__name__", firestore.Asc).Limit(limit)
		if buckets != nil {
			q = q.Where("bucket", "in", buckets)
		}
		return query(ctx, s, q, "stuck operations", fromOpDoc)
	})
}

// maxIn is the most values Firestore takes in one `in` filter.
const maxIn = 30

// bucketGroups splits rg into the bucket lists of `in` filters: nil (no
// filter) for the whole ledger, one list for a range of up to maxIn
// buckets (3 shards or more), two for a larger one.
func bucketGroups(rg shard.Range) [][]any {
	if rg.IsAll() {
		return [][]any{nil}
	}
	var groups [][]any
	for lo := rg.Lo; lo < rg.Hi; lo += maxIn {
		var g []any
		for b := lo; b < min(lo+maxIn, rg.Hi); b++ {
			g = append(g, b)
		}
		groups = append(groups, g)
	}
	return groups
}

// inBuckets runs query once per bucket group of rg and merges the answers
// in order, keeping the first limit. One group (the whole ledger, or a
// range of up to maxIn buckets) reads exactly what it returns; a range of
// more (2 shards) reads up to limit per group.
func inBuckets(rg shard.Range, limit int, order func(a, b ledger.Operation) int, query func(buckets []any) ([]ledger.Operation, error)) ([]ledger.Operation, error) {
	groups := bucketGroups(rg)
	if len(groups) == 1 {
		return query(groups[0])
	}
	pages := make([][]ledger.Operation, len(groups))
	for i, g := range groups {
		ops, err := query(g)
		if err != nil {
			return nil, err
		}
		pages[i] = ops
	}
	return ledger.FirstOf(limit, order, pages...), nil
}

// DueClaims implements ledger.Queries (single-field index on due_at: its
// entries are ordered by document id within a value, so the explicit
// __name__ order the cursor needs costs no index).
func (s *Store) DueClaims(ctx context.Context, now time.Time, after ledger.ClaimCursor, limit int) ([]ledger.Claim, error) {
	q := s.client.Collection(Claims).Where("due_at", "<=", now).
		OrderBy("due_at", firestore.Asc).OrderBy("__name__", firestore.Asc).Limit(limit)
	return query(ctx, s, startAfterClaim(q, after), "due claims", fromClaimDoc)
}

// CountDueClaims implements ledger.Queries: a count aggregation over
// DueClaims' query, on the same index.
func (s *Store) CountDueClaims(ctx context.Context, now time.Time, after ledger.ClaimCursor) (int64, error) {
	q := s.client.Collection(Claims).Where("due_at", "<=", now).
		OrderBy("due_at", firestore.Asc).OrderBy("__name__", firestore.Asc)
	return s.count(ctx, "count due claims", startAfterClaim(q, after))
}

// startAfterClaim starts q, ordered by (due_at, __name__), after the
// cursor; the zero cursor at the beginning.
func startAfterClaim(q firestore.Query, after ledger.ClaimCursor) firestore.Query {
	if after.DueAt.IsZero() {
		return q
	}
	return q.StartAfter(after.DueAt, after.ID)
}

// ListOperations implements ledger.Queries. With a state it needs the
// composite index (state ASC, submitted_at DESC) declared in terraform/.
func (s *Store) ListOperations(ctx context.Context, state lifecycle.State, limit int) ([]ledger.Operation, error) {
	q := s.client.Collection(Operations).Query
	if state != "" {
		q = q.Where("state", "==", string(state))
	}
	return query(ctx, s, q.OrderBy("submitted_at", firestore.Desc).Limit(limit), "list operations", fromOpDoc)
}

// listQuery is PageOperations' and CountOperations' query without a stuck
// filter: newest submission first, ties by document id (the order a
// descending index keeps them in anyway). Served by the single-field index
// on submitted_at, or with state and/or kind by a composite index declared
// in terraform/firestore_indexes.tf.
func (s *Store) listQuery(f ledger.Filter) firestore.Query {
	q := s.client.Collection(Operations).Query
	if f.Kind != "" {
		q = q.Where("kind", "==", string(f.Kind))
	}
	if f.State != "" {
		q = q.Where("state", "==", string(f.State))
	}
	return q.OrderBy("submitted_at", firestore.Desc).OrderBy("__name__", firestore.Desc)
}

// stuckListQuery is listQuery for the stuck filter: pending_since (which
// equals submitted_at while an operation is not terminal, and is absent
// after) bounds it, so the order is the same.
func (s *Store) stuckListQuery(f ledger.Filter) firestore.Query {
	q := s.client.Collection(Operations).Where("pending_since", "<=", f.StuckAt)
	if f.Kind != "" {
		q = q.Where("kind", "==", string(f.Kind))
	}
	if f.State != "" {
		q = q.Where("state", "==", string(f.State))
	}
	return q.OrderBy("pending_since", firestore.Desc).OrderBy("__name__", firestore.Desc)
}

func (s *Store) filtered(f ledger.Filter) firestore.Query {
	if f.StuckAt.IsZero() {
		return s.listQuery(f)
	}
	return s.stuckListQuery(f)
}

// PageOperations implements ledger.Queries.
func (s *Store) PageOperations(ctx context.Context, f ledger.Filter, after ledger.ListCursor, limit int) ([]ledger.Operation, error) {
	// Limit(0) would mean "no limit" to Firestore: never an unbounded read.
	if limit <= 0 {
		return nil, nil
	}
	q := s.filtered(f).Limit(limit)
	if !after.IsZero() {
		q = q.StartAfter(after.SubmittedAt, after.ID)
	}
	return query(ctx, s, q, "page operations", fromOpDoc)
}

// SearchOperations implements ledger.Queries: a range on the document id,
// served by Firestore's built-in index on __name__ (no declared index).
func (s *Store) SearchOperations(ctx context.Context, prefix, after string, limit int) ([]ledger.Operation, error) {
	if limit <= 0 {
		return nil, nil
	}
	lo, hi, err := ledger.NameRange(prefix)
	if err != nil {
		return nil, err
	}
	c := s.client.Collection(Operations)
	var from firestore.Query
	if after >= lo {
		// Read on from the last page: after is itself in the range (or
		// past it), so it is the tighter lower bound.
		from = c.Where("__name__", ">", c.Doc(after))
	} else {
		from = c.Where("__name__", ">=", c.Doc(lo))
	}
	q := from.Where("__name__", "<", c.Doc(hi)).OrderBy("__name__", firestore.Asc).Limit(limit)
	return query(ctx, s, q, "search operations", fromOpDoc)
}

// CountOperations implements ledger.Queries with a count aggregation on the
// same query (and so the same index): Firestore bills one read per 1,000
// index entries counted, and no document is read.
func (s *Store) CountOperations(ctx context.Context, f ledger.Filter) (int64, error) {
	q := s.filtered(f)
	res, err := q.NewAggregationQuery().WithCount("n").Get(ctx)
	s.counts.Reads.Add(1)
	if err != nil {
		return 0, fmt.Errorf("firestore: count operations: %w", err)
	}
	v, ok := res["n"].(*firestorepb.Value)
	if !ok {
		return 0, fmt.Errorf("firestore: count operations: unexpected result %T", res["n"])
	}
	return v.GetIntegerValue(), nil
}

// WebhookTraffic implements deliverylog.TrafficCounter: the logs whose
// newest webhook entry is at or after since (webhook_at, on its automatic
// single-field index), newest first, at most limit: one read per
// operation delivered to in the window; of each, the webhook entries at
// or after since. With none in the window, Last is lastWebhook's. Counted
// as delivery reads.
func (s *Store) WebhookTraffic(ctx context.Context, since time.Time, limit int) (deliverylog.Tally, error) {
	docs, err := s.client.Collection(Deliveries).Where("webhook_at", ">=", since).
		OrderBy("webhook_at", firestore.Desc).Limit(limit).Documents(ctx).GetAll()
	s.counts.DeliveryReads.Add(int64(max(len(docs), 1)))
	if err != nil {
		return deliverylog.Tally{}, fmt.Errorf("firestore: webhook traffic: %w", err)
	}
	t := deliverylog.Tally{Outcomes: map[string]int{}, Partial: len(docs) >= limit}
	for _, d := range docs {
		log, at, err := decodeDeliveries(d)
		if err != nil {
			return deliverylog.Tally{}, fmt.Errorf("firestore: webhook traffic: %s: %w", d.Ref.ID, err)
		}
		if at != nil && at.After(t.Last) {
			t.Last = *at
		}
		for _, e := range log {
			if e.Source == deliverylog.SourceWebhook && !e.At.Before(since) {
				t.Outcomes[e.Outcome]++
			}
		}
	}
	if len(docs) == 0 {
		if t.Last, err = s.lastWebhook(ctx); err != nil {
			return deliverylog.Tally{}, err
		}
	}
	return t, nil
}

// lastWebhook is the newest webhook entry's time of every log: the first
// document by webhook_at, descending (zero: none).
func (s *Store) lastWebhook(ctx context.Context) (time.Time, error) {
	docs, err := s.client.Collection(Deliveries).OrderBy("webhook_at", firestore.Desc).Limit(1).Documents(ctx).GetAll()
	s.counts.DeliveryReads.Add(1)
	if err != nil {
		return time.Time{}, fmt.Errorf("firestore: last webhook delivery: %w", err)
	}
	for _, d := range docs {
		if _, at, err := decodeDeliveries(d); err == nil && at != nil {
			return at.UTC(), nil
		}
	}
	return time.Time{}, nil
}

// decodeDeliveries reads a delivery log document: its entries and webhook_at.
func decodeDeliveries(snap *firestore.DocumentSnapshot) ([]deliverylog.Entry, *time.Time, error) {
	var d deliveriesDoc
	if err := snap.DataTo(&d); err != nil {
		return nil, nil, err
	}
	log, err := ledger.DecodeDeliveries([]byte(d.Entries))
	return log, d.WebhookAt, err
}

// CountPending implements ledger.Queries: a count aggregation over the
// single-field index on pending_since, which only non-terminal operations
// carry (every submission time is after the epoch).
func (s *Store) CountPending(ctx context.Context) (int64, error) {
	q := s.client.Collection(Operations).Where("pending_since", ">=", time.Unix(0, 0).UTC())
	return s.count(ctx, "count pending", q)
}

// CountDue implements ledger.Queries: a count aggregation over
// DueOperations' index, per bucket group of rg.
func (s *Store) CountDue(ctx context.Context, rg shard.Range, now time.Time) (int64, error) {
	var total int64
	for _, buckets := range bucketGroups(rg) {
		q := s.client.Collection(Operations).Where("next_check_at", "<=", now)
		if buckets != nil {
			q = q.Where("bucket", "in", buckets)
		}
		n, err := s.count(ctx, "count due", q)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func (s *Store) count(ctx context.Context, what string, q firestore.Query) (int64, error) {
	res, err := q.NewAggregationQuery().WithCount("n").Get(ctx)
	s.counts.Reads.Add(1)
	if err != nil {
		return 0, fmt.Errorf("firestore: %s: %w", what, err)
	}
	v, ok := res["n"].(*firestorepb.Value)
	if !ok {
		return 0, fmt.Errorf("firestore: %s: unexpected result %T", what, res["n"])
	}
	return v.GetIntegerValue(), nil
}

// BackfillResult is what one BackfillBuckets run did.
type BackfillResult struct {
	// Scanned counts the pending operations read; Written those that lacked
	// their bucket and got it; Changed those a concurrent write moved
	// first (it wrote the bucket itself: every write does).
	Scanned, Written, Changed int
}

// BackfillBuckets writes the bucket field on every pending operation that
// lacks it (written by a version before shards), so that a pass over a
// range of buckets sees it: a sharded deployment runs it once after the
// upgrade (lrosink ops backfill-shards). It pages through the pending
// operations by (pending_since, id) on the single-field index, pageSize at
// a time; settled operations are in no ranged query and are skipped. Each
// write is fenced on the document's update time and bumps its version,
// like every write; running it again writes nothing. It costs one read per
// pending operation and one write per one lacking the field.
func (s *Store) BackfillBuckets(ctx context.Context, pageSize int) (BackfillResult, error) {
	var res BackfillResult
	var after *firestore.DocumentSnapshot
	for {
		q := s.client.Collection(Operations).Where("pending_since", ">=", time.Unix(0, 0).UTC()).
			OrderBy("pending_since", firestore.Asc).OrderBy("__name__", firestore.Asc).Limit(pageSize)
		if after != nil {
			q = q.StartAfter(after)
		}
		snaps, err := q.Documents(ctx).GetAll()
		s.counts.Reads.Add(int64(max(1, len(snaps))))
		if err != nil {
			return res, fmt.Errorf("firestore: backfill buckets: %w", err)
		}
		for _, snap := range snaps {
			res.Scanned++
			if _, err := snap.DataAt("bucket"); err == nil {
				continue
			}
			op, err := fromOpDoc(snap.Ref.ID, snap)
			if err != nil {
				return res, err
			}
			// A schedule patch of the fields as read: it changes none of
			// them and, like every schedule patch, writes the bucket.
			_, err = s.Apply(ctx, ledger.PatchSchedule(op))
			switch {
			case err == nil:
				res.Written++
			case errors.Is(err, ledger.ErrConflict):
				res.Changed++
			default:
				return res, err
			}
		}
		if len(snaps) < pageSize {
			return res, nil
		}
		after = snaps[len(snaps)-1]
	}
}
