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
// published (claim DONE) and that settled by the cutoff go, oldest first,
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
