package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
)

// Pruner is a ledger that deletes settled operations itself (SQLite,
// memory); Firestore leaves that to its TTL policies.
type Pruner interface {
	ledger.Ledger
	PruneSettled(ctx context.Context, settledBefore, now time.Time, limit int) (int, error)
}

// RunPrune checks PruneSettled: only settled operations whose message is
// published (effect mirror DONE) and that settled by the cutoff go, oldest first,
// at most limit a call; published claims go once past their ExpireAt, a
// claim still held never.
func RunPrune(t *testing.T, newStore func(*testing.T) Pruner) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	mustCommit(t, s, Op("pending"), nil)
	for _, id := range []string{"old-a", "old-b", "owed", "recent"} {
		mustCommit(t, s, Op(id), nil)
		op := terminal(mustGet(t, s, id), t0.Add(time.Minute))
		if id == "recent" {
			op.SettledAt = t0.Add(2 * time.Hour)
		}
		c := Claim(id, "h", t0.Add(time.Minute))
		_, crev := mustCommit(t, s, op, c)
		if id != "owed" { // published: the claim and its mirror DONE
			c.Rev, c.Status, c.DoneAt = *crev, ledger.ClaimDone, t0
			mustApply(t, s, ledger.PutClaim(*c), ledger.PatchMirror(id, ledger.EffectMirror{Status: ledger.ClaimDone}))
		}
	}
	cutoff := t0.Add(time.Hour)
	if n, err := s.PruneSettled(ctx, cutoff, t0, 1); err != nil || n != 1 {
		t.Fatalf("first prune (limit 1) = %d, %v; want 1", n, err)
	}
	if n, err := s.PruneSettled(ctx, cutoff, t0, 10); err != nil || n != 1 {
		t.Fatalf("second prune = %d, %v; want 1 (the other old one)", n, err)
	}
	for id, kept := range map[string]bool{"pending": true, "old-a": false, "old-b": false, "owed": true, "recent": true} {
		_, err := s.GetOperation(ctx, id)
		if gone := errors.Is(err, ledger.ErrNotFound); gone == kept {
			t.Errorf("%s: GetOperation error %v, want kept %v", id, err, kept)
		}
	}
	// The claims outlive their operations (a redelivery must still find
	// one DONE) until their own expiry: 30 days in Claim.
	if c, err := s.GetClaim(ctx, "old-a"); err != nil || c.Status != ledger.ClaimDone {
		t.Fatalf("claim of a pruned operation before its expiry: %+v, %v", c, err)
	}
	if n, err := s.PruneSettled(ctx, cutoff, t0.Add(31*24*time.Hour), 10); err != nil || n != 0 {
		t.Fatalf("third prune = %d, %v; want 0 operations", n, err)
	}
	for id, kept := range map[string]bool{"old-a": false, "old-b": false, "recent": false, "owed": true} {
		_, err := s.GetClaim(ctx, id)
		if gone := errors.Is(err, ledger.ErrNotFound); gone == kept {
			t.Errorf("claim %s after its expiry: error %v, want kept %v", id, err, kept)
		}
	}
}

// Retention is the LROSINK_RETENTION RunRetention's stores are given.
const Retention = 8 * 24 * time.Hour

// Expired says whether store s's retention has deleted operation id by now,
// as the store expresses it: SQLite and memory delete in a prune run at now
// (cutoff now - Retention); Firestore's TTL policy, which the emulator does
// not run, would delete a document whose expire_at is at or before now.
type Expired func(t *testing.T, s ledger.Ledger, id string, now time.Time) bool

// PrunedBy is Expired for a Pruner: a prune at now, then a read.
func PrunedBy(t *testing.T, s ledger.Ledger, id string, now time.Time) bool {
	t.Helper()
	if _, err := s.(Pruner).PruneSettled(t.Context(), now.Add(-Retention), now, 100); err != nil {
		t.Fatalf("prune at %v: %v", now, err)
	}
	_, err := s.GetOperation(t.Context(), id)
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("get %s: %v", id, err)
	}
	return err != nil
}

// RunRetention checks the port's retention rule (ledger.PatchMirrorDone)
// on a store keeping settled operations for Retention: an operation is
// never expired while pending or while its results message is owed (claim
// held, released, seized again; whole puts of it meanwhile), however long
// after its settlement; once its mirror is DONE it expires Retention after
// its settlement, and a whole put with the mirror DONE keeps that.
func RunRetention(t *testing.T, newStore func(*testing.T) ledger.Ledger, expired Expired) {
	t.Parallel()
	s := newStore(t)
	later := t0.Add(10 * Retention) // settled long ago, by any retention
	mustCommit(t, s, Op("rt-pending"), nil)
	notExpired := func(step string, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if expired(t, s, id, later) {
				t.Fatalf("%s: %s expired while pending or owing its message", step, id)
			}
		}
	}
	settle := func(id string) *ledger.Claim {
		mustCommit(t, s, Op(id), nil)
		c := Claim(id, "h1", t0.Add(time.Minute))
		_, crev := mustCommit(t, s, terminal(mustGet(t, s, id), c.LeaseUntil), c)
		c.Rev = *crev
		return c
	}
	owed, merged := settle("rt-owed"), settle("rt-merged")
	notExpired("held", "rt-pending", "rt-owed", "rt-merged")

	// The publish failed: released, then a whole put while owed (a register
	// merging metadata), then seized by a new holder.
	owed.Status, owed.Holder, owed.LeaseUntil = ledger.ClaimReleased, "", t0.Add(time.Minute)
	owed.Rev = mustApply(t, s, ledger.PutClaim(*owed), ledger.PatchMirror(owed.ID, ledger.EffectMirror{Status: ledger.ClaimReleased, LeaseUntil: owed.LeaseUntil}))[0]
	op := mustGet(t, s, owed.ID)
	op.UserMetadata = map[string]any{"job": "j1", "merged": "yes"}
	mustApply(t, s, ledger.PutOperation(op))
	notExpired("released, then put whole", "rt-owed")
	owed.Status, owed.Holder, owed.LeaseUntil, owed.Attempts = ledger.ClaimHeld, "h2", later.Add(time.Minute), 2
	owed.Rev = mustApply(t, s, ledger.PutClaim(*owed), ledger.PatchMirror(owed.ID, ledger.EffectMirror{Status: ledger.ClaimHeld, LeaseUntil: owed.LeaseUntil}))[0]
	notExpired("seized", "rt-owed")

	// Published: DONE. Then a whole put of the other with its mirror DONE
	// (metadata merged after the completion).
	for _, c := range []*ledger.Claim{owed, merged} {
		done := *c
		done.Status, done.DoneAt = ledger.ClaimDone, t0.Add(time.Minute)
		mustApply(t, s, ledger.PutClaim(done), ledger.PatchMirrorDone(c.ID, t0))
	}
	op = mustGet(t, s, merged.ID)
	op.UserMetadata = map[string]any{"job": "j1", "merged": "after"}
	mustApply(t, s, ledger.PutOperation(op))
	for _, id := range []string{"rt-owed", "rt-merged"} {
		if expired(t, s, id, t0.Add(Retention-time.Second)) {
			t.Fatalf("%s expired before Retention after its settlement", id)
		}
	}
	for _, id := range []string{"rt-owed", "rt-merged"} {
		if !expired(t, s, id, t0.Add(Retention)) {
			t.Fatalf("%s, published, not expired Retention after its settlement", id)
		}
	}
	notExpired("beside published ones", "rt-pending")
}

// LongRetention is a retention longer than a claim is kept (30 days in
// Claim): LROSINK_RETENTION's documented example, 400d.
const LongRetention = 400 * 24 * time.Hour

// Expiry runs what store s deletes by now on its own, for a store keeping
// settled operations for LongRetention: a prune at now (SQLite, memory), or
// Firestore's TTL policies on operations and claims, played by the test
// (the emulator runs none) from the stored expire_at.
type Expiry func(t *testing.T, s ledger.Ledger, now time.Time)

// PruneExpiry is Expiry for a Pruner.
func PruneExpiry(t *testing.T, s ledger.Ledger, now time.Time) {
	t.Helper()
	if _, err := s.(Pruner).PruneSettled(t.Context(), now.Add(-LongRetention), now, 100); err != nil {
		t.Fatalf("prune at %v: %v", now, err)
	}
}

// RunRetentionBeyondClaimTTL checks the retention rule when the retention
// outlasts the claims: an operation's own record (its effect mirror DONE)
// says its message is published, so it expires LongRetention after its
// settlement although its DONE claim expired long before. Prunes that
// joined the claim found nothing to delete once it had gone, and never
// deleted such an operation. One still owing its message is kept.
func RunRetentionBeyondClaimTTL(t *testing.T, newStore func(*testing.T) ledger.Ledger, expire Expiry) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	mustCommit(t, s, Op("lr-pending"), nil)
	done := settled(t, s, "lr-done", "h1", t0.Add(time.Minute))
	done.Status, done.DoneAt = ledger.ClaimDone, t0.Add(time.Minute)
	mustApply(t, s, ledger.PutClaim(done), ledger.PatchMirrorDone(done.ID, t0))
	// Released; every retry moves an owed claim's expiry on (the door's
	// ClaimTTL), so it outlives this test.
	owed := settled(t, s, "lr-owed", "h2", t0.Add(time.Minute))
	owed.Status, owed.Holder, owed.LeaseUntil, owed.ExpireAt = ledger.ClaimReleased, "", t0.Add(time.Minute), t0.Add(2*LongRetention)
	mustApply(t, s, ledger.PutClaim(owed), ledger.PatchMirror(owed.ID, ledger.EffectMirror{Status: ledger.ClaimReleased, LeaseUntil: owed.LeaseUntil}))

	present := func(step string, want map[string]bool) {
		t.Helper()
		for id, kept := range want {
			_, err := s.GetOperation(ctx, id)
			if err != nil && !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("%s: get %s: %v", step, id, err)
			}
			if (err == nil) != kept {
				t.Errorf("%s: operation %s present %v, want %v", step, id, err == nil, kept)
			}
		}
	}
	// Past the claim's expiry, within the retention: the DONE claim goes.
	expire(t, s, t0.Add(31*24*time.Hour))
	if c, err := s.GetClaim(ctx, done.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("published claim 31 days after its creation: %+v, %v; want it expired", c, err)
	}
	present("claim expired", map[string]bool{"lr-pending": true, "lr-done": true, "lr-owed": true})
	expire(t, s, t0.Add(LongRetention-time.Second))
	present("just before the retention", map[string]bool{"lr-pending": true, "lr-done": true, "lr-owed": true})
	expire(t, s, t0.Add(LongRetention))
	present("at the retention", map[string]bool{"lr-pending": true, "lr-done": false, "lr-owed": true})
	if _, err := s.GetClaim(ctx, owed.ID); err != nil {
		t.Errorf("the owed claim: %v", err)
	}
}
