package memledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/shard"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 123456000, time.UTC)

var far = t0.Add(30 * 24 * time.Hour)

func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Ledger { return New() })
}

// settle commits op id as PENDING, then SUCCEEDED with a claim held by holder.
func settle(t *testing.T, s *Store, id, holder string, leaseUntil time.Time) (ledger.Operation, *ledger.Lease) {
	t.Helper()
	if _, _, err := claims.New(s).CommitOperation(t.Context(), ledgertest.Op(id), nil); err != nil {
		t.Fatal(err)
	}
	op, err := s.GetOperation(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	op.State, op.UpdateTime, op.SettledAt, op.SettledBy, op.NextCheckAt = lifecycle.Succeeded, t0, t0, "webhook", time.Time{}
	op.Effect = ledger.EffectMirror{Status: ledger.ClaimHeld, LeaseUntil: leaseUntil}
	_, lease, err := claims.New(s).CommitOperation(t.Context(), op, ledgertest.Claim(id, holder, leaseUntil))
	if err != nil {
		t.Fatal(err)
	}
	if op, err = s.GetOperation(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	return op, lease
}

// TestValuesCopiedIn: what the caller still holds after a commit is not the
// store's: changing it changes nothing stored.
func TestValuesCopiedIn(t *testing.T) {
	s := New()
	op := ledgertest.Op("in1")
	op.UserMetadata = map[string]any{"job": "j1", "nested": map[string]any{"k": "v"}, "list": []any{"a"}}
	op.Output = map[string]any{"uris": []any{"gs://x"}}
	op.History = []ledger.HistoryEntry{{At: t0, Source: "register", State: lifecycle.Pending, Reason: "first-sighting"}}
	op.Error = &results.ErrorInfo{Code: 3, Message: "bad"}
	if _, _, err := claims.New(s).CommitOperation(t.Context(), op, nil); err != nil {
		t.Fatal(err)
	}
	op.UserMetadata["job"] = "changed"
	op.UserMetadata["nested"].(map[string]any)["k"] = "changed"
	op.UserMetadata["list"].([]any)[0] = "changed"
	op.Output["uris"].([]any)[0] = "changed"
	op.History[0].Reason = "changed"
	op.Error.Message = "changed"

	got, err := s.GetOperation(t.Context(), "in1")
	if err != nil {
		t.Fatal(err)
	}
	if got.UserMetadata["job"] != "j1" || got.UserMetadata["nested"].(map[string]any)["k"] != "v" ||
		got.UserMetadata["list"].([]any)[0] != "a" || got.Output["uris"].([]any)[0] != "gs://x" ||
		got.History[0].Reason != "first-sighting" || got.Error.Message != "bad" {
		t.Fatalf("a caller's change after the commit reached the store: %+v", got)
	}

	c := ledgertest.Claim("in2", "h1", t0.Add(time.Minute))
	c.Message.Output = map[string]any{"uris": []any{"gs://y"}}
	c.Message.Error = &results.ErrorInfo{Code: 5, Message: "gone"}
	op2 := ledgertest.Op("in2")
	op2.State, op2.NextCheckAt = lifecycle.Succeeded, time.Time{}
	if _, _, err := claims.New(s).CommitOperation(t.Context(), op2, c); err != nil {
		t.Fatal(err)
	}
	c.Message.Output["uris"].([]any)[0] = "changed"
	c.Message.Error.Message = "changed"
	c.Holder = "changed"
	claim, err := s.GetClaim(t.Context(), "in2")
	if err != nil {
		t.Fatal(err)
	}
	if claim.Holder != "h1" || claim.Message.Output["uris"].([]any)[0] != "gs://y" || claim.Message.Error.Message != "gone" {
		t.Fatalf("a caller's change after the commit reached the stored claim: %+v", claim)
	}
}

// TestValuesCopiedOut: what a read returns is the caller's: changing it
// changes nothing stored, whichever read returned it.
func TestValuesCopiedOut(t *testing.T) {
	s := New()
	op := ledgertest.Op("out1")
	op.UserMetadata = map[string]any{"job": "j1", "nested": map[string]any{"k": "v"}}
	op.History = []ledger.HistoryEntry{{At: t0, Source: "register", State: lifecycle.Pending, Reason: "first-sighting"}}
	op.Conflicts = []ledger.HistoryEntry{{At: t0, Source: "webhook", State: lifecycle.Failed, Reason: "terminal-conflict"}}
	op.Replays = []ledger.Replay{{ID: "r1", At: t0}}
	op.Error = &results.ErrorInfo{Code: 3, Message: "bad"}
	if _, _, err := claims.New(s).CommitOperation(t.Context(), op, nil); err != nil {
		t.Fatal(err)
	}
	mutate := func(o ledger.Operation) {
		o.UserMetadata["job"] = "changed"
		o.UserMetadata["nested"].(map[string]any)["k"] = "changed"
		o.History[0].Reason = "changed"
		o.Conflicts[0].Reason = "changed"
		o.Replays[0].ID = "changed"
		o.Error.Message = "changed"
	}
	reads := map[string]func() ([]ledger.Operation, error){
		"GetOperation": func() ([]ledger.Operation, error) {
			o, err := s.GetOperation(t.Context(), "out1")
			return []ledger.Operation{o}, err
		},
		"DueOperations": func() ([]ledger.Operation, error) {
			return s.DueOperations(t.Context(), shard.All(), t0.Add(time.Hour), ledger.DueCursor{}, 10)
		},
		"StuckOperations": func() ([]ledger.Operation, error) { return s.StuckOperations(t.Context(), shard.All(), t0, 10) },
		"ListOperations":  func() ([]ledger.Operation, error) { return s.ListOperations(t.Context(), "", 10) },
	}
	for name, read := range reads {
		ops, err := read()
		if err != nil || len(ops) != 1 {
			t.Fatalf("%s = %v, %v", name, ops, err)
		}
		mutate(ops[0])
		got, err := s.GetOperation(t.Context(), "out1")
		if err != nil {
			t.Fatal(err)
		}
		if got.UserMetadata["job"] != "j1" || got.UserMetadata["nested"].(map[string]any)["k"] != "v" ||
			got.History[0].Reason != "first-sighting" || got.Conflicts[0].Reason != "terminal-conflict" ||
			got.Replays[0].ID != "r1" || got.Error.Message != "bad" {
			t.Fatalf("changing what %s returned changed the store: %+v", name, got)
		}
	}

	settle(t, s, "out2", "h1", t0)
	claimReads := map[string]func() (ledger.Claim, error){
		"GetClaim": func() (ledger.Claim, error) { return s.GetClaim(t.Context(), "out2") },
		"DueClaims": func() (ledger.Claim, error) {
			cs, err := s.DueClaims(t.Context(), t0.Add(time.Hour), ledger.ClaimCursor{}, 10)
			if err != nil || len(cs) != 1 {
				return ledger.Claim{}, errors.New("want one due claim")
			}
			return cs[0], nil
		},
	}
	for name, read := range claimReads {
		c, err := read()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c.Message.Output["output_file_uri"] = "changed"
		c.Message.Error = &results.ErrorInfo{Message: "changed"}
		got, err := s.GetClaim(t.Context(), "out2")
		if err != nil {
			t.Fatal(err)
		}
		if got.Message.Output["output_file_uri"] != "gs://b/r.jsonl" || got.Message.Error != nil {
			t.Fatalf("changing what %s returned changed the stored claim: %+v", name, got.Message)
		}
	}
}

// TestClaimWritesNeedTheirOperation: a claim whose operation is gone cannot
// be seized or released (both adapters fail the mirror write), and a missing
// claim cannot be written at all.
func TestClaimWritesNeedTheirOperation(t *testing.T) {
	s := New()
	c := ledgertest.Claim("orphan", "h1", t0)
	op := ledgertest.Op("orphan")
	op.State, op.NextCheckAt = lifecycle.Succeeded, time.Time{}
	if _, _, err := claims.New(s).CommitOperation(t.Context(), op, c); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	delete(s.ops, "orphan")
	s.mu.Unlock()
	read, err := s.GetClaim(t.Context(), "orphan")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := claims.New(s).SeizeClaim(t.Context(), read, "h2", t0.Add(time.Hour), far, t0); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("seize without the operation = %v, want ErrFenced", err)
	}
	if got, _ := s.GetClaim(t.Context(), "orphan"); got.Holder != "h1" {
		t.Fatalf("a failed seize changed the claim: %+v", got)
	}
	missing := ledger.Lease{ID: "none", Rev: ledger.Revision{Version: 1}}
	_, seizeErr := claims.New(s).SeizeClaim(t.Context(), ledger.Claim{ID: missing.ID, Rev: missing.Rev}, "h", t0, far, t0)
	for name, err := range map[string]error{
		"seize":    seizeErr,
		"release":  claims.New(s).ReleaseClaim(t.Context(), missing, far, t0),
		"complete": claims.New(s).CompleteClaim(t.Context(), missing, t0),
	} {
		if !errors.Is(err, ledger.ErrFenced) {
			t.Errorf("%s a missing claim = %v, want ErrFenced", name, err)
		}
	}
}

// TestUnstorableValueRefused: a value JSON cannot encode fails the commit
// (not as a conflict, which would make the door retry) and stores nothing.
func TestUnstorableValueRefused(t *testing.T) {
	s := New()
	op := ledgertest.Op("u1")
	op.UserMetadata = map[string]any{"f": func() {}}
	if _, _, err := claims.New(s).CommitOperation(t.Context(), op, nil); err == nil || errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("commit of unencodable metadata = %v, want an encoding error", err)
	}
	if _, err := s.GetOperation(t.Context(), "u1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the refused commit wrote: %v", err)
	}
}

// TestCancelledContext: a done context is reported as such, never as a
// fencing error (the door must answer "unavailable", not re-read).
func TestCancelledContext(t *testing.T) {
	s := New()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := claims.New(s).CommitOperation(ctx, ledgertest.Op("c1"), nil); !errors.Is(err, context.Canceled) || errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("commit with a cancelled context = %v", err)
	}
	if _, err := s.GetOperation(ctx, "c1"); !errors.Is(err, context.Canceled) || errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("get with a cancelled context = %v", err)
	}
	if _, err := s.GetOperation(t.Context(), "c1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the cancelled commit wrote: %v", err)
	}
}

// TestCountsFollowFirestoreBilling: the tallies count as the Firestore
// adapter's do (a read per document read, a query at least one; a write per
// document written; a commit per commit attempt), so a test that asserts
// "nothing was written" means the same on either store.
func TestCountsFollowFirestoreBilling(t *testing.T) {
	s := New()
	step := func(what string, want [3]int64, f func()) {
		t.Helper()
		r0, w0, c0 := s.Counts().Snapshot()
		f()
		r1, w1, c1 := s.Counts().Snapshot()
		if got := [3]int64{r1 - r0, w1 - w0, c1 - c0}; got != want {
			t.Errorf("%s: reads/writes/commits %v, want %v", what, got, want)
		}
	}
	step("get a missing operation", [3]int64{1, 0, 0}, func() { _, _ = s.GetOperation(t.Context(), "n1") })
	step("empty query", [3]int64{1, 0, 0}, func() { _, _ = s.DueOperations(t.Context(), shard.All(), t0, ledger.DueCursor{}, 10) })
	var lease *ledger.Lease
	step("settle (create, read, commit with claim, read)", [3]int64{2, 3, 2}, func() { _, lease = settle(t, s, "n1", "h1", t0) })
	step("stale commit", [3]int64{0, 0, 1}, func() { _, _, _ = claims.New(s).CommitOperation(t.Context(), ledgertest.Op("n1"), nil) })
	step("release", [3]int64{0, 2, 1}, func() { _ = claims.New(s).ReleaseClaim(t.Context(), *lease, far, t0) })
	step("complete fenced out", [3]int64{0, 0, 1}, func() { _ = claims.New(s).CompleteClaim(t.Context(), *lease, t0) })
	step("one due claim read", [3]int64{1, 0, 0}, func() { _, _ = s.DueClaims(t.Context(), t0.Add(time.Hour), ledger.ClaimCursor{}, 10) })
	step("create", [3]int64{0, 1, 1}, func() { _, _, _ = claims.New(s).CommitOperation(t.Context(), ledgertest.Op("n2"), nil) })
	step("list two", [3]int64{2, 0, 0}, func() { _, _ = s.ListOperations(t.Context(), "", 10) })
	n2, err := s.GetOperation(t.Context(), "n2")
	if err != nil {
		t.Fatal(err)
	}
	step("schedule a check", [3]int64{0, 1, 1}, func() {
		if _, err := claims.New(s).ScheduleCheck(t.Context(), n2, t0, "x", t0); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDeliveryExpiryKeepsUp: under sustained appends nothing older than the
// delivery log's TTL survives (CONTRACT.md §2).
func TestDeliveryExpiryKeepsUp(t *testing.T) {
	ledgertest.RunDeliveryExpiry(t, func(*testing.T) ledger.Ledger { return New() }, ledgertest.Listed)
}
