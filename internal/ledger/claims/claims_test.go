package claims_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/claims/claimstest"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
)

// TestProtocol runs the protocol's suite once, on the memory ledger; the
// SQLite and Firestore adapters' tests run it on theirs.
func TestProtocol(t *testing.T) {
	claimstest.Run(t, func(*testing.T) ledger.Ledger { return memledger.New() })
}

// TestCreationRulesAreTheProtocols: a claim committed with its operation is
// created held by the holder given, at its first attempt, and mirrored on
// the operation, whatever status, attempts or mirror the caller passed.
func TestCreationRulesAreTheProtocols(t *testing.T) {
	p := claims.New(memledger.New())
	t0 := ledgertest.T0
	if _, _, err := p.CommitOperation(t.Context(), ledgertest.Op("c1"), nil); err != nil {
		t.Fatal(err)
	}
	op, err := p.GetOperation(t.Context(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	op.State, op.NextCheckAt = lifecycle.Succeeded, time.Time{}
	op.Effect = ledger.EffectMirror{Status: ledger.ClaimDone}
	c := ledger.Claim{ID: "c1", Key: "gemini:batches/c1", Operation: "batches/c1", Status: ledger.ClaimReleased, Attempts: 7,
		Holder: "h1", LeaseUntil: t0.Add(time.Minute), CreatedAt: t0, ExpireAt: ledgertest.Far}
	_, lease, err := p.CommitOperation(t.Context(), op, &c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.GetClaim(t.Context(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ledger.ClaimHeld || got.Attempts != 1 || got.Holder != "h1" || !got.UpdatedAt.Equal(t0) || lease.Claim.Status != ledger.ClaimHeld {
		t.Fatalf("created claim %+v, lease %+v; want held by h1 at attempt 1", got, lease)
	}
	if read, _ := p.GetOperation(t.Context(), "c1"); read.Effect.Status != ledger.ClaimHeld || !read.Effect.LeaseUntil.Equal(t0.Add(time.Minute)) {
		t.Fatalf("mirror %+v, want held until %v", read.Effect, t0.Add(time.Minute))
	}
}

// TestFencedIsNotAConflict: a claim step whose precondition fails is
// ErrFenced and not ErrConflict, which would make the door re-read and
// decide again instead of giving the claim up.
func TestFencedIsNotAConflict(t *testing.T) {
	p := claims.New(memledger.New())
	t0 := ledgertest.T0
	if _, _, err := p.CommitOperation(t.Context(), ledgertest.Op("f1"), nil); err != nil {
		t.Fatal(err)
	}
	op, err := p.GetOperation(t.Context(), "f1")
	if err != nil {
		t.Fatal(err)
	}
	op.State, op.NextCheckAt = lifecycle.Succeeded, time.Time{}
	if _, _, err := p.CommitOperation(t.Context(), op, ledgertest.Claim("f1", "h1", t0)); err != nil {
		t.Fatal(err)
	}
	c, err := p.GetClaim(t.Context(), "f1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.SeizeClaim(t.Context(), c, "h2", t0.Add(time.Hour), ledgertest.Far, t0); err != nil {
		t.Fatal(err)
	}
	_, err = p.SeizeClaim(t.Context(), c, "h3", t0.Add(time.Hour), ledgertest.Far, t0) // from the same, now stale, read
	if !errors.Is(err, ledger.ErrFenced) || errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("seize from a stale read = %v, want ErrFenced and not ErrConflict", err)
	}
}
