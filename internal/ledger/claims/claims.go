// Package claims is the claim protocol, written once over the ledger port:
// how a claim is created with its operation's terminal state, seized by a
// new holder when its lease runs out, released, completed, and how every
// one of those steps mirrors the claim's status on its operation; and the
// reconciler's two updates of an operation (ScheduleCheck,
// RecordStuckAlert). The stores (package ledger's adapters) only keep
// documents under preconditions; the lease and fencing rules live here.
//
// Each step is one ledger.Ledger.Apply: the writes of a step commit together
// or not at all, and each is fenced on the revision it was decided from, so
// the protocol adds no read to what its callers already read. A claim write
// whose precondition fails is reported as ledger.ErrFenced (the lease is
// lost); an operation write as ledger.ErrConflict (re-read and decide
// again).
package claims

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
)

// Ledger is a ledger.Ledger with the claim protocol on top: the reads,
// queries and Apply of the store it wraps, plus the protocol's steps. The
// door, the reconciler, the CLI and the console use it.
type Ledger struct {
	ledger.Ledger
}

// New returns the protocol over store.
func New(store ledger.Ledger) *Ledger { return &Ledger{Ledger: store} }

// Unwrap returns the store, for its adapter-specific extras (the delivery
// log, pruning, read counts).
func (l *Ledger) Unwrap() ledger.Ledger { return l.Ledger }

// CommitOperation writes op if the stored revision still equals op.Rev
// (zero: it must not exist), with Version = op.Rev.Version+1. If claim is
// non-nil it is created in the same atomic commit and must not exist: held
// by claim.Holder until claim.LeaseUntil, its first attempt, and mirrored
// on op (the protocol sets those; the caller gives the holder, the lease,
// the times and the message). Returns the new operation revision and, with
// a claim, its lease. A failed precondition is ledger.ErrConflict.
func (l *Ledger) CommitOperation(ctx context.Context, op ledger.Operation, claim *ledger.Claim) (ledger.Revision, *ledger.Lease, error) {
	return l.commit(ctx, op, claim, nil)
}

// CommitBound is CommitOperation with intent in the same atomic commit:
// the bind of an intent (CONTRACT.md §5) to the operation it becomes the
// registration of, fenced on the intent's revision as read (in.Rev) as op
// is on its own. A failed precondition on either is ledger.ErrConflict,
// and nothing is written.
func (l *Ledger) CommitBound(ctx context.Context, op ledger.Operation, claim *ledger.Claim, in ledger.Intent) (ledger.Revision, *ledger.Lease, error) {
	return l.commit(ctx, op, claim, &in)
}

func (l *Ledger) commit(ctx context.Context, op ledger.Operation, claim *ledger.Claim, in *ledger.Intent) (ledger.Revision, *ledger.Lease, error) {
	var c ledger.Claim
	if claim != nil {
		c = *claim
		c.Rev = ledger.Revision{} // created: must not exist
		c.Status, c.Attempts, c.UpdatedAt = ledger.ClaimHeld, 1, c.CreatedAt
		op.Effect = ledger.EffectMirror{Status: ledger.ClaimHeld, LeaseUntil: c.LeaseUntil}
	}
	writes := []ledger.Write{ledger.PutOperation(op)}
	if claim != nil {
		writes = append(writes, ledger.PutClaim(c))
	}
	if in != nil {
		writes = append(writes, ledger.PutIntent(*in))
	}
	revs, err := l.Apply(ctx, writes...)
	if err != nil {
		return ledger.Revision{}, nil, err
	}
	if claim == nil {
		return revs[0], nil, nil
	}
	return revs[0], lease(c, op.ID, revs[1]), nil
}

// SeizeClaim gives claim c (as read, at c.Rev) to a new holder with a new
// lease and one more attempt, sets its ExpireAt to expireAt, and mirrors
// that on the operation. ErrFenced if the claim changed since it was read
// (or its operation is gone).
func (l *Ledger) SeizeClaim(ctx context.Context, c ledger.Claim, holder string, leaseUntil, expireAt, now time.Time) (*ledger.Lease, error) {
	next := c
	next.Status, next.Holder, next.LeaseUntil, next.Attempts = ledger.ClaimHeld, holder, leaseUntil, c.Attempts+1
	next.UpdatedAt, next.ExpireAt = now, expireAt
	revs, err := l.Apply(ctx, ledger.PutClaim(next),
		ledger.PatchMirror(c.ID, ledger.EffectMirror{Status: ledger.ClaimHeld, LeaseUntil: leaseUntil}))
	if err != nil {
		return nil, fenced("seize claim "+c.ID, err)
	}
	return lease(next, c.ID, revs[0]), nil
}

// ReleaseClaim gives up a held claim at once so the next attempt retries
// (its lease ends now, so it is due), and sets its ExpireAt to expireAt.
// ErrFenced if le no longer holds the claim.
func (l *Ledger) ReleaseClaim(ctx context.Context, le ledger.Lease, expireAt, now time.Time) error {
	c, err := held(le, "release claim")
	if err != nil {
		return err
	}
	c.Status, c.Holder, c.LeaseUntil, c.UpdatedAt, c.ExpireAt = ledger.ClaimReleased, "", now, now, expireAt
	if _, err := l.Apply(ctx, ledger.PutClaim(c),
		ledger.PatchMirror(opID(le), ledger.EffectMirror{Status: ledger.ClaimReleased, LeaseUntil: now})); err != nil {
		return fenced("release claim "+le.ID, err)
	}
	return nil
}

// CompleteClaim marks the claim DONE if le still holds it, and the
// operation's mirror DONE in the same commit (a list page then needs no
// claim read per row, and a duplicate none after the lease). ErrFenced if
// le no longer holds it: a holder whose lease was seized or released can
// never mark the claim DONE.
func (l *Ledger) CompleteClaim(ctx context.Context, le ledger.Lease, now time.Time) error {
	c, err := held(le, "complete claim")
	if err != nil {
		return err
	}
	c.Status, c.DoneAt, c.UpdatedAt = ledger.ClaimDone, now, now
	// The claim was created in the commit that settled the operation, so
	// its CreatedAt is the settlement the retention counts from.
	if _, err := l.Apply(ctx, ledger.PutClaim(c), ledger.PatchMirrorDone(opID(le), c.CreatedAt)); err != nil {
		return fenced("complete claim "+le.ID, err)
	}
	return nil
}

// CloseOrphanClaim marks claim c (as read, at c.Rev) DONE without touching
// an operation: the end of a replay that published the message of a claim
// whose operation is gone, which nobody can seize (a seize patches the
// operation's mirror) and which would otherwise stay owed, alerting every
// pass. ErrFenced if the claim changed since it was read.
func (l *Ledger) CloseOrphanClaim(ctx context.Context, c ledger.Claim, now time.Time) error {
	c.Status, c.Holder, c.DoneAt, c.UpdatedAt = ledger.ClaimDone, "", now, now
	if _, err := l.Apply(ctx, ledger.PutClaim(c)); err != nil {
		return fenced("close claim "+c.ID, err)
	}
	return nil
}

// ScheduleCheck records a reconcile check without touching state: the next
// check time, one more check, and a note (e.g. "not-found"). A zero next
// means no check is scheduled: it reads back as zero and the operation is
// not due. It is fenced on op.Rev like any write (ErrConflict) and bumps
// the version; no other field is written.
func (l *Ledger) ScheduleCheck(ctx context.Context, op ledger.Operation, next time.Time, note string, now time.Time) (ledger.Revision, error) {
	op.NextCheckAt, op.Checks, op.LastCheck, op.LastCheckAt = next, op.Checks+1, note, now
	return l.patchSchedule(ctx, op)
}

// RecordStuckAlert sets op's StuckAlertedAt to at and its StuckFrom to from
// without touching anything else; fenced on op.Rev (ErrConflict) and bumps
// the version.
func (l *Ledger) RecordStuckAlert(ctx context.Context, op ledger.Operation, at, from time.Time) (ledger.Revision, error) {
	op.StuckAlertedAt, op.StuckFrom = at, from
	return l.patchSchedule(ctx, op)
}

// patchSchedule writes the reconciler's fields of op (not a whole put: op may be
// the operation as read with the revision the door wrote since, whose other
// fields the reconciler has not read).
func (l *Ledger) patchSchedule(ctx context.Context, op ledger.Operation) (ledger.Revision, error) {
	revs, err := l.Apply(ctx, ledger.PatchSchedule(op))
	if err != nil {
		return ledger.Revision{}, err
	}
	return revs[0], nil
}

// MarkDone records on op's effect mirror that its side effect is done, for
// a commit of op without its claim: a replay that republished a message
// rebuilt from the operation, its claim being gone.
func MarkDone(op *ledger.Operation) { op.Effect = ledger.EffectMirror{Status: ledger.ClaimDone} }

// lease is the lease on c, just written at rev.
func lease(c ledger.Claim, opID string, rev ledger.Revision) *ledger.Lease {
	c.Rev = rev
	return &ledger.Lease{ID: c.ID, OpID: opID, Holder: c.Holder, Rev: rev, Claim: c}
}

// held returns the claim le holds, at le.Rev. A lease this package did not
// give (it carries no claim, or another one) is fenced without a write: the
// protocol writes whole claims, and a lease without its claim would erase
// the claim's message.
func held(le ledger.Lease, what string) (ledger.Claim, error) {
	if le.Claim.ID != le.ID || le.ID == "" {
		return ledger.Claim{}, fmt.Errorf("%s %s: %w (the lease carries no claim)", what, le.ID, ledger.ErrFenced)
	}
	c := le.Claim
	c.Rev = le.Rev
	return c, nil
}

// opID is the operation whose mirror le's claim keeps (the same document
// id; older leases may leave OpID empty).
func opID(le ledger.Lease) string {
	if le.OpID != "" {
		return le.OpID
	}
	return le.ID
}

// fenced reports a claim step whose precondition failed as ErrFenced (the
// claim changed, is gone, or its operation is gone), and any other error as
// it is.
func fenced(what string, err error) error {
	if errors.Is(err, ledger.ErrConflict) {
		return fmt.Errorf("%s: %w (%v)", what, ledger.ErrFenced, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
