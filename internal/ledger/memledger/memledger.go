// Package memledger is an in-memory adapter of the ledger port, for tests
// about logic (the door, the reconciler, the HTTP layer) that should not
// need the Firestore emulator. It passes the same storage-semantics suite
// (ledgertest) as the Firestore and SQLite adapters and keeps their
// semantics:
//
//   - every document write is fenced on the revision read (ErrConflict),
//     and a create only succeeds if the document is absent;
//   - the writes of one Apply are checked before any is made, so a call
//     writes all of them or none;
//   - queries answer in the adapters' orders, bounded by their limit.
//
// Revision.Version counts every write to a document, as ledger.Revision
// defines it, and fences every write; Revision.Stamp stays zero.
//
// Values are copied on the way in and out, so neither a writer nor a reader
// shares memory with the store. Free-form values (user metadata, output, the
// claim's message) are kept as their ledger.EncodeJSON text, as both other
// adapters keep them, so they read back in the same normalized form
// (numbers float64, arrays []any); times and lists are kept in the forms
// of ledger.StoredTime and ledger.StoredHistory, as the other stores keep
// them.
//
// It tallies reads, writes and commits as the Firestore adapter does, so a
// test that asserts what a path costs, or that nothing was written, means
// the same on either store. One mutex serializes every call: the store is
// for tests, where clarity beats throughput.
package memledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/shard"
)

// Store is the in-memory ledger. It is safe for concurrent use.
type Store struct {
	mu     sync.Mutex
	ops    map[string]storedOp
	claims map[string]storedClaim
	// intents are kept by key (intents.go).
	intents map[string]storedIntent
	// deliveries is the delivery log, kept apart from the operations as
	// the other adapters keep it in a collection or table of its own.
	deliveries map[string][]deliverylog.Entry
	// logExpiry is the delivery logs in the order they expire
	// (expireLogs).
	logExpiry []logExpiry
	counts    Counts
	// due and stuck index the due and stuck orders per bucket (index.go).
	due, stuck orderIndex
}

var _ ledger.Ledger = (*Store)(nil)

// New returns an empty ledger.
func New() *Store {
	return &Store{ops: map[string]storedOp{}, claims: map[string]storedClaim{}, intents: map[string]storedIntent{},
		deliveries: map[string][]deliverylog.Entry{}}
}

// Counts tallies what the Firestore adapter would bill (ledger.Counts).
type Counts = ledger.Counts

// Counts returns the store's tallies.
func (s *Store) Counts() *Counts { return &s.counts }

// storedOp is an operation as kept: its free-form maps as JSON text, and no
// slice or pointer shared with any caller.
type storedOp struct {
	op           ledger.Operation // UserMetadata and Output are nil here
	meta, output []byte           // nil when absent
}

// storedClaim is a claim as kept, its message as JSON text.
type storedClaim struct {
	c   ledger.Claim // Message is zero here
	msg []byte
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// encodeMap is m as kept: its JSON text, or nil when m is nil.
func encodeMap(what string, m map[string]any) ([]byte, error) {
	if m == nil {
		return nil, nil
	}
	b, err := ledger.EncodeJSON(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", what, err)
	}
	return b, nil
}

func decodeMap(what string, b []byte) (map[string]any, error) {
	if b == nil {
		return nil, nil
	}
	m, err := ledger.DecodeMap(b)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, err)
	}
	return m, nil
}

// keepOp returns o as kept at version: copied and normalized.
func keepOp(o ledger.Operation, version int64) (storedOp, error) {
	meta, err := encodeMap("user_metadata", o.UserMetadata)
	if err != nil {
		return storedOp{}, err
	}
	output, err := encodeMap("output", o.Output)
	if err != nil {
		return storedOp{}, err
	}
	o.Rev = ledger.Revision{Version: version}
	o.UpdateTime = lifecycle.ServerTime(o.UpdateTime)
	o.SubmittedAt, o.SettledAt = ledger.StoredTime(o.SubmittedAt), ledger.StoredTime(o.SettledAt)
	o.NextCheckAt, o.LastCheckAt = ledger.StoredTime(o.NextCheckAt), ledger.StoredTime(o.LastCheckAt)
	o.History, o.Conflicts, o.Replays = ledger.StoredHistory(o.History), ledger.StoredHistory(o.Conflicts), ledger.StoredReplays(o.Replays)
	o.UserMetadata, o.Output, o.Error = nil, nil, copyPtr(o.Error)
	o.Effect.LeaseUntil = ledger.StoredTime(o.Effect.LeaseUntil)
	o.StuckAlertedAt, o.StuckFrom = ledger.StoredTime(o.StuckAlertedAt), ledger.StuckKey(o)
	return storedOp{op: o, meta: meta, output: output}, nil
}

// operation returns a copy of the kept operation for a caller.
func (s storedOp) operation() (ledger.Operation, error) {
	o := s.op
	var err error
	if o.UserMetadata, err = decodeMap("user_metadata", s.meta); err != nil {
		return ledger.Operation{}, fmt.Errorf("memledger: operation %s: %w", o.ID, err)
	}
	if o.Output, err = decodeMap("output", s.output); err != nil {
		return ledger.Operation{}, fmt.Errorf("memledger: operation %s: %w", o.ID, err)
	}
	// Copies: the caller may change what it gets.
	o.History, o.Conflicts, o.Replays = ledger.StoredHistory(o.History), ledger.StoredHistory(o.Conflicts), ledger.StoredReplays(o.Replays)
	o.Error = copyPtr(o.Error)
	return o, nil
}

// keepClaim returns c as kept at version: copied and normalized.
func keepClaim(c ledger.Claim, version int64) (storedClaim, error) {
	var msg []byte
	if !c.Rev.Exists() {
		// An update keeps the stored message (ledger.PutClaim): Apply
		// copies it over under the lock.
		m, err := ledger.EncodeJSON(c.Message)
		if err != nil {
			return storedClaim{}, fmt.Errorf("encode claim message %s: %w", c.Operation, err)
		}
		msg = m
	}
	c.Rev = ledger.Revision{Version: version}
	c.LeaseUntil, c.CreatedAt, c.UpdatedAt = ledger.StoredTime(c.LeaseUntil), ledger.StoredTime(c.CreatedAt), ledger.StoredTime(c.UpdatedAt)
	c.DoneAt, c.ExpireAt = ledger.StoredTime(c.DoneAt), ledger.StoredTime(c.ExpireAt)
	c.Message = results.Message{}
	return storedClaim{c: c, msg: msg}, nil
}

// claim returns a copy of the kept claim for a caller.
func (s storedClaim) claim() (ledger.Claim, error) {
	c := s.c
	if err := ledger.DecodeJSON(s.msg, &c.Message); err != nil {
		return ledger.Claim{}, fmt.Errorf("memledger: decode claim message %s: %w", c.ID, err)
	}
	return c, nil
}

// due reports whether the claim's side effect is owed at now: not DONE and
// its lease ended (or it was released, which ends the lease) by then.
func (s storedClaim) due(now time.Time) bool {
	return s.c.Status != ledger.ClaimDone && !s.c.LeaseUntil.IsZero() && !s.c.LeaseUntil.After(now)
}

// lock takes the store's lock unless ctx is done: a done context is
// reported as such, never as a fencing error.
func (s *Store) lock(ctx context.Context, what string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memledger: %s: %w", what, err)
	}
	s.mu.Lock()
	return nil
}

// GetOperation implements ledger.Reads.
func (s *Store) GetOperation(ctx context.Context, id string) (ledger.Operation, error) {
	s.counts.Reads.Add(1)
	if err := s.lock(ctx, "get operation "+id); err != nil {
		return ledger.Operation{}, err
	}
	defer s.mu.Unlock()
	so, ok := s.ops[id]
	if !ok {
		return ledger.Operation{}, fmt.Errorf("memledger: get operation %s: %w", id, ledger.ErrNotFound)
	}
	return so.operation()
}

// GetClaim implements ledger.Reads.
func (s *Store) GetClaim(ctx context.Context, id string) (ledger.Claim, error) {
	s.counts.Reads.Add(1)
	if err := s.lock(ctx, "get claim "+id); err != nil {
		return ledger.Claim{}, err
	}
	defer s.mu.Unlock()
	sc, ok := s.claims[id]
	if !ok {
		return ledger.Claim{}, fmt.Errorf("memledger: get claim %s: %w", id, ledger.ErrNotFound)
	}
	return sc.claim()
}

// Apply implements ledger.Writes: every precondition is checked before
// anything is written, so a failed call changes nothing.
func (s *Store) Apply(ctx context.Context, writes ...ledger.Write) ([]ledger.Revision, error) {
	if err := ledger.CheckWrites(writes); err != nil {
		return nil, fmt.Errorf("memledger: %w", err)
	}
	// Encode outside the lock: a value that cannot be kept fails the call
	// before it is counted as a commit.
	ops := make([]storedOp, len(writes))
	claims := make([]storedClaim, len(writes))
	intents := make([]storedIntent, len(writes))
	for i, w := range writes {
		var err error
		switch {
		case w.Op != nil:
			ops[i], err = keepOp(*w.Op, w.Op.Rev.Version+1)
		case w.Claim != nil:
			claims[i], err = keepClaim(*w.Claim, w.Claim.Rev.Version+1)
		case w.Intent != nil:
			intents[i], err = keepIntent(*w.Intent, w.Intent.Rev.Version+1)
		}
		if err != nil {
			return nil, fmt.Errorf("memledger: apply %s: %w", w.Describe(), err)
		}
	}
	s.counts.Commits.Add(1)
	if err := s.lock(ctx, "apply "+writes[0].Describe()); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	for _, w := range writes {
		if err := s.precondition(w); err != nil {
			return nil, fmt.Errorf("memledger: apply %s: %w", w.Describe(), err)
		}
	}
	revs := make([]ledger.Revision, len(writes))
	for i, w := range writes {
		switch {
		case w.Op != nil:
			old, had := s.ops[w.Op.ID]
			s.ops[w.Op.ID] = ops[i]
			s.reindex(opOrNil(old, had), ops[i].op)
			revs[i] = ops[i].op.Rev
		case w.Claim != nil:
			if w.Claim.Rev.Exists() {
				claims[i].msg = s.claims[w.Claim.ID].msg
			}
			s.claims[w.Claim.ID] = claims[i]
			revs[i] = claims[i].c.Rev
		case w.Mirror != nil:
			so := s.ops[w.Mirror.OpID]
			so.op.Rev.Version++
			so.op.Effect = ledger.EffectMirror{Status: w.Mirror.Effect.Status, LeaseUntil: ledger.StoredTime(w.Mirror.Effect.LeaseUntil)}
			s.ops[w.Mirror.OpID] = so
		case w.Schedule != nil:
			v, so := w.Schedule, s.ops[w.Schedule.ID]
			old := so.op
			so.op.Rev.Version++
			so.op.NextCheckAt, so.op.Checks, so.op.LastCheck = ledger.StoredTime(v.NextCheckAt), v.Checks, v.LastCheck
			so.op.LastCheckAt, so.op.StuckAlertedAt, so.op.StuckFrom = ledger.StoredTime(v.LastCheckAt), ledger.StoredTime(v.StuckAlertedAt), ledger.StuckKey(*v)
			s.ops[v.ID] = so
			s.reindex(&old, so.op)
			revs[i] = so.op.Rev
		case w.Intent != nil:
			s.intents[w.Intent.Key] = intents[i]
			revs[i] = intents[i].in.Rev
		}
	}
	s.counts.Writes.Add(int64(len(writes)))
	return revs, nil
}

// precondition returns ledger.ErrConflict (wrapped) unless w may be
// written now; the caller holds the lock.
func (s *Store) precondition(w ledger.Write) error {
	var stored, expect ledger.Revision
	var exists bool
	switch {
	case w.Op != nil:
		var so storedOp
		so, exists = s.ops[w.Op.ID]
		stored, expect = so.op.Rev, w.Op.Rev
	case w.Schedule != nil:
		var so storedOp
		so, exists = s.ops[w.Schedule.ID]
		stored, expect = so.op.Rev, w.Schedule.Rev
		if !expect.Exists() {
			return fmt.Errorf("%w (a schedule needs the revision read)", ledger.ErrConflict)
		}
	case w.Claim != nil:
		var sc storedClaim
		sc, exists = s.claims[w.Claim.ID]
		stored, expect = sc.c.Rev, w.Claim.Rev
	case w.Mirror != nil:
		if _, ok := s.ops[w.Mirror.OpID]; !ok {
			return fmt.Errorf("%w (operation is gone)", ledger.ErrConflict)
		}
		return nil
	case w.Intent != nil:
		var si storedIntent
		si, exists = s.intents[w.Intent.Key]
		stored, expect = si.in.Rev, w.Intent.Rev
	}
	switch {
	case expect.Exists() && !exists:
		return fmt.Errorf("%w (document is gone)", ledger.ErrConflict)
	case !expect.Exists() && exists:
		return fmt.Errorf("%w (document exists)", ledger.ErrConflict)
	case exists && stored.Version != expect.Version:
		return fmt.Errorf("%w (version %d, read %d)", ledger.ErrConflict, stored.Version, expect.Version)
	}
	return nil
}

// opOrNil is &so.op if the operation was kept, else nil.
func opOrNil(so storedOp, kept bool) *ledger.Operation {
	if !kept {
		return nil
	}
	return &so.op
}

// selectOps returns copies of up to limit kept operations that match keep,
// in order.
func (s *Store) selectOps(ctx context.Context, what string, limit int, keep func(ledger.Operation) bool, order func(a, b ledger.Operation) int) ([]ledger.Operation, error) {
	// A limit of 0 or less reads nothing, as the SQL adapter answers it.
	if limit <= 0 {
		return nil, nil
	}
	if err := s.lock(ctx, what); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var hits []storedOp
	for _, so := range s.ops {
		if keep(so.op) {
			hits = append(hits, so)
		}
	}
	slices.SortFunc(hits, func(a, b storedOp) int { return order(a.op, b.op) })
	s.counts.Reads.Add(int64(max(1, min(limit, len(hits)))))
	out := make([]ledger.Operation, 0, min(limit, len(hits)))
	for _, so := range hits[:min(limit, len(hits))] {
		o, err := so.operation()
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// DueOperations implements ledger.Queries: pending operations (settled ones
// have no next check) of the buckets of rg due by now, strictly after the
// cursor in (NextCheckAt, ID) order, read from the due index.
func (s *Store) DueOperations(ctx context.Context, rg shard.Range, now time.Time, after ledger.DueCursor, limit int) ([]ledger.Operation, error) {
	if limit <= 0 {
		return nil, nil
	}
	if err := s.lock(ctx, "due operations"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.indexed(s.due.front(rg, orderKey{at: after.NextCheckAt, id: after.ID}, now, limit), limit)
}

// StuckOperations implements ledger.Queries: operations of the buckets of
// rg not yet terminal whose stuck key (kept in StuckFrom) is at or before
// cutoff, earliest first (ties by id), read from the stuck index.
func (s *Store) StuckOperations(ctx context.Context, rg shard.Range, cutoff time.Time, limit int) ([]ledger.Operation, error) {
	if limit <= 0 {
		return nil, nil
	}
	if err := s.lock(ctx, "stuck operations"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.indexed(s.stuck.front(rg, orderKey{}, cutoff, limit), limit)
}

// ListOperations implements ledger.Queries: newest submission first (ties
// by id, descending), optionally only those in state.
func (s *Store) ListOperations(ctx context.Context, state lifecycle.State, limit int) ([]ledger.Operation, error) {
	return s.selectOps(ctx, "list operations", limit, func(o ledger.Operation) bool {
		return state == "" || o.State == state
	}, func(a, b ledger.Operation) int {
		return cmp.Or(b.SubmittedAt.Compare(a.SubmittedAt), cmp.Compare(b.ID, a.ID))
	})
}

// matches reports whether o is selected by f (see ledger.Filter).
func matches(f ledger.Filter, o ledger.Operation) bool {
	switch {
	case f.State != "" && o.State != f.State, f.Kind != "" && o.Kind != f.Kind:
		return false
	case !f.StuckAt.IsZero():
		return !o.State.Terminal() && !o.SubmittedAt.IsZero() && !o.SubmittedAt.After(f.StuckAt)
	}
	return true
}

// byNewest is PageOperations' order: submission time, then id, both
// descending.
func byNewest(a, b ledger.Operation) int {
	return cmp.Or(b.SubmittedAt.Compare(a.SubmittedAt), cmp.Compare(b.ID, a.ID))
}

// PageOperations implements ledger.Queries.
func (s *Store) PageOperations(ctx context.Context, f ledger.Filter, after ledger.ListCursor, limit int) ([]ledger.Operation, error) {
	cursor := ledger.Operation{SubmittedAt: after.SubmittedAt, ID: after.ID}
	return s.selectOps(ctx, "page operations", limit, func(o ledger.Operation) bool {
		return matches(f, o) && (after.IsZero() || byNewest(cursor, o) < 0)
	}, byNewest)
}

// SearchOperations implements ledger.Queries: the id range of the names
// starting with prefix, in id (and so name) order.
func (s *Store) SearchOperations(ctx context.Context, prefix, after string, limit int) ([]ledger.Operation, error) {
	lo, hi, err := ledger.NameRange(prefix)
	if err != nil {
		return nil, err
	}
	return s.selectOps(ctx, "search operations", limit, func(o ledger.Operation) bool {
		return o.ID >= lo && o.ID > after && o.ID < hi
	}, func(a, b ledger.Operation) int { return cmp.Compare(a.ID, b.ID) })
}

// CountOperations implements ledger.Queries; like a Firestore count
// aggregation it is billed one read per 1,000 entries counted (at least one).
func (s *Store) CountOperations(ctx context.Context, f ledger.Filter) (int64, error) {
	if err := s.lock(ctx, "count operations"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var n int64
	for _, so := range s.ops {
		if matches(f, so.op) {
			n++
		}
	}
	s.counts.Reads.Add(max(1, (n+999)/1000))
	return n, nil
}

// DueClaims implements ledger.Queries: claims not DONE whose lease ended (or
// that were released) by now, earliest first (ties by id), after the cursor.
func (s *Store) DueClaims(ctx context.Context, now time.Time, after ledger.ClaimCursor, limit int) ([]ledger.Claim, error) {
	if limit <= 0 {
		return nil, nil
	}
	if err := s.lock(ctx, "due claims"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	hits := s.dueClaims(now, after)
	s.counts.Reads.Add(int64(max(1, min(limit, len(hits)))))
	out := make([]ledger.Claim, 0, min(limit, len(hits)))
	for _, sc := range hits[:min(limit, len(hits))] {
		c, err := sc.claim()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// CountDueClaims implements ledger.Queries, billed as a count aggregation
// (one read per 1,000 counted).
func (s *Store) CountDueClaims(ctx context.Context, now time.Time, after ledger.ClaimCursor) (int64, error) {
	if err := s.lock(ctx, "count due claims"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := int64(len(s.dueClaims(now, after)))
	s.counts.Reads.Add(max(1, (n+999)/1000))
	return n, nil
}

// dueClaims lists the claims due by now strictly after the cursor, in
// (LeaseUntil, ID) order. The caller holds s.mu.
func (s *Store) dueClaims(now time.Time, after ledger.ClaimCursor) []storedClaim {
	var hits []storedClaim
	for _, sc := range s.claims {
		if sc.due(now) && cmp.Or(sc.c.LeaseUntil.Compare(after.DueAt), cmp.Compare(sc.c.ID, after.ID)) > 0 {
			hits = append(hits, sc)
		}
	}
	slices.SortFunc(hits, func(a, b storedClaim) int {
		return cmp.Or(a.c.LeaseUntil.Compare(b.c.LeaseUntil), cmp.Compare(a.c.ID, b.c.ID))
	})
	return hits
}
