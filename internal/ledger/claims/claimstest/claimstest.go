// Package claimstest is the claim protocol's suite (package claims): seize,
// release and complete with their fencing, expiry and effect mirror, the
// reconciler's ScheduleCheck and RecordStuckAlert, and what each write does
// to the revisions. The protocol is written once, so the suite runs once
// against the memory ledger (package claims); the SQLite and Firestore
// adapters run it too, cheaply, as an integration test of the protocol on a
// real store. What each store must do by itself is ledgertest's.
package claimstest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/shard"
)

// Run runs the suite, each test on a fresh store from newStore with the
// protocol over it.
func Run(t *testing.T, newStore ledgertest.NewStore) {
	tests := map[string]func(*testing.T, *claims.Ledger){
		"CompleteFencedOnLease":         testCompleteFenced,
		"SeizeFencesOldHolder":          testSeize,
		"ReleaseThenSeize":              testRelease,
		"ConcurrentSeizesOneWins":       testConcurrentSeizes,
		"MessageRoundTripsVerbatim":     testMessage,
		"MissingClaimCannotComplete":    testMissingClaim,
		"ScheduleCheck":                 testScheduleCheck,
		"RecordStuckAlert":              testRecordStuckAlert,
		"MaximalOperationCommits":       testMaximal,
		"SeizeAndReleaseExtendExpiry":   testExpiry,
		"GeminiStatusRoundTrips":        testGeminiStatus,
		"RevisionCountsOperationWrites": testOperationRevision,
		"RevisionCountsClaimWrites":     testClaimRevision,
		"MirrorWriteFencesStaleWrites":  testMirrorFences,
		"ScheduleCheckWithoutNext":      testScheduleNoNext,
		"CloseOrphanFencedOnRead":       testCloseOrphan,
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, claims.New(newStore(t)))
		})
	}
}

// The fixtures are the storage suite's, so both suites speak of the same
// documents.
var (
	t0, far        = ledgertest.T0, ledgertest.Far
	Op, Claim      = ledgertest.Op, ledgertest.Claim
	terminal       = ledgertest.Terminal
	exactlyOneWins = ledgertest.ExactlyOneWins
)

func mustCommit(t *testing.T, s *claims.Ledger, op ledger.Operation, c *ledger.Claim) (ledger.Revision, *ledger.Lease) {
	t.Helper()
	rev, lease, err := s.CommitOperation(t.Context(), op, c)
	if err != nil {
		t.Fatalf("commit %s: %v", op.ID, err)
	}
	return rev, lease
}

func mustGet(t *testing.T, s ledger.Reads, id string) ledger.Operation {
	t.Helper()
	return ledgertest.MustGet(t, s, id)
}

func settled(t *testing.T, s *claims.Ledger, id, holder string, leaseUntil time.Time) *ledger.Lease {
	t.Helper()
	mustCommit(t, s, Op(id), nil)
	_, lease := mustCommit(t, s, terminal(mustGet(t, s, id), leaseUntil), Claim(id, holder, leaseUntil))
	return lease
}

func testCompleteFenced(t *testing.T, s *claims.Ledger) {
	lease := settled(t, s, "a6", "h1", t0.Add(time.Minute))
	forged := *lease
	forged.Holder, forged.Rev = "someone-else", ledger.Revision{Version: 7, Stamp: t0}
	if err := s.CompleteClaim(t.Context(), forged, t0); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("complete with a foreign lease = %v, want ErrFenced", err)
	}
	if err := s.CompleteClaim(t.Context(), *lease, t0.Add(time.Second)); err != nil {
		t.Fatalf("complete: %v", err)
	}
	c, _ := s.GetClaim(t.Context(), "a6")
	if c.Status != ledger.ClaimDone || !c.DoneAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("claim after complete %+v", c)
	}
	if err := s.CompleteClaim(t.Context(), *lease, t0.Add(2*time.Second)); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("second complete = %v, want ErrFenced", err)
	}
}

// testCloseOrphan: a released claim, read once, is closed DONE by replay
// without its operation (CloseOrphanClaim); a second close from the same,
// now stale, read is fenced; the message is kept.
func testCloseOrphan(t *testing.T, s *claims.Ledger) {
	lease := settled(t, s, "a14", "h1", t0.Add(time.Hour))
	if err := s.ReleaseClaim(t.Context(), *lease, far, t0); err != nil {
		t.Fatalf("release: %v", err)
	}
	c, err := s.GetClaim(t.Context(), "a14")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CloseOrphanClaim(t.Context(), c, t0.Add(time.Second)); err != nil {
		t.Fatalf("close: %v", err)
	}
	got, _ := s.GetClaim(t.Context(), "a14")
	if got.Status != ledger.ClaimDone || !got.DoneAt.Equal(t0.Add(time.Second)) || got.Live(t0) || got.Message.Operation != c.Message.Operation {
		t.Fatalf("claim after close %+v", got)
	}
	if err := s.CloseOrphanClaim(t.Context(), c, t0.Add(2*time.Second)); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("close from a stale read = %v, want ErrFenced", err)
	}
	if due, err := s.DueClaims(t.Context(), t0.Add(time.Hour), ledger.ClaimCursor{}, 10); err != nil || len(due) != 0 {
		t.Fatalf("due claims after close: %+v %v, want none", due, err)
	}
}

func testSeize(t *testing.T, s *claims.Ledger) {
	old := settled(t, s, "a7", "h1", t0.Add(time.Minute))
	c, _ := s.GetClaim(t.Context(), "a7")
	now := t0.Add(2 * time.Minute) // the lease ran out
	lease, err := s.SeizeClaim(t.Context(), c, "h2", now.Add(time.Minute), far, now)
	if err != nil {
		t.Fatalf("seize: %v", err)
	}
	if lease.Holder != "h2" {
		t.Fatalf("lease %+v", lease)
	}
	if err := s.CompleteClaim(t.Context(), *old, now); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("late DONE by the old holder = %v, want ErrFenced", err)
	}
	if _, err := s.SeizeClaim(t.Context(), c, "h3", now.Add(time.Minute), far, now); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("seize from a stale read = %v, want ErrFenced", err)
	}
	got, _ := s.GetClaim(t.Context(), "a7")
	if got.Holder != "h2" || got.Attempts != 2 || got.Status != ledger.ClaimHeld {
		t.Fatalf("claim after seize %+v", got)
	}
	if op := mustGet(t, s, "a7"); op.Effect.Status != ledger.ClaimHeld || !op.Effect.LeaseUntil.Equal(now.Add(time.Minute)) {
		t.Fatalf("mirror after seize %+v", op.Effect)
	}
	if err := s.CompleteClaim(t.Context(), *lease, now); err != nil {
		t.Fatalf("new holder completes: %v", err)
	}
}

func testRelease(t *testing.T, s *claims.Ledger) {
	lease := settled(t, s, "a8", "h1", t0.Add(time.Hour))
	if err := s.ReleaseClaim(t.Context(), *lease, far, t0); err != nil {
		t.Fatalf("release: %v", err)
	}
	if op := mustGet(t, s, "a8"); op.Effect.Status != ledger.ClaimReleased || !op.Effect.Owed(t0) {
		t.Fatalf("mirror after release %+v", op.Effect)
	}
	if err := s.CompleteClaim(t.Context(), *lease, t0); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("complete after release = %v, want ErrFenced", err)
	}
	c, _ := s.GetClaim(t.Context(), "a8")
	if c.Status != ledger.ClaimReleased || c.Live(t0) {
		t.Fatalf("claim after release %+v", c)
	}
	l2, err := s.SeizeClaim(t.Context(), c, "h2", t0.Add(time.Minute), far, t0)
	if err != nil {
		t.Fatalf("seize released claim: %v", err)
	}
	if err := s.CompleteClaim(t.Context(), *l2, t0); err != nil {
		t.Fatalf("complete: %v", err)
	}
}

func testConcurrentSeizes(t *testing.T, s *claims.Ledger) {
	settled(t, s, "a10", "h0", t0)
	c, _ := s.GetClaim(t.Context(), "a10")
	exactlyOneWins(t, "seizes", ledger.ErrFenced, func(i int) error {
		_, err := s.SeizeClaim(t.Context(), c, fmt.Sprint("h", i+1), t0.Add(time.Hour), far, t0.Add(time.Minute))
		return err
	})
}

func testMessage(t *testing.T, s *claims.Ledger) {
	settled(t, s, "a12", "h1", t0)
	c, err := s.GetClaim(t.Context(), "a12")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Claim("a12", "h1", t0).Message.Data()
	got, _ := c.Message.Data()
	if string(got) != string(want) {
		t.Fatalf("message changed in the store:\n got %s\nwant %s", got, want)
	}
}

func testMissingClaim(t *testing.T, s *claims.Ledger) {
	mustCommit(t, s, Op("a13"), nil)
	l := ledger.Lease{ID: "a13", OpID: "a13", Holder: "h", Rev: ledger.Revision{Version: 1, Stamp: t0}}
	if err := s.CompleteClaim(t.Context(), l, t0); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("complete missing claim = %v, want ErrFenced", err)
	}
}

func testScheduleCheck(t *testing.T, s *claims.Ledger) {
	mustCommit(t, s, Op("k1"), nil)
	op := mustGet(t, s, "k1")
	rev, err := s.ScheduleCheck(t.Context(), op, t0.Add(4*time.Minute), "not-found", t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, s, "k1")
	if got.Rev.Version != 2 || rev.Version != 2 || got.Checks != 1 || got.LastCheck != "not-found" ||
		!got.NextCheckAt.Equal(t0.Add(4*time.Minute)) || !got.LastCheckAt.Equal(t0.Add(time.Minute)) || got.State != lifecycle.Pending {
		t.Fatalf("after schedule %+v", got)
	}
	if _, err := s.ScheduleCheck(t.Context(), op, t0, "x", t0); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("schedule at a stale revision = %v, want ErrConflict", err)
	}
	// A commit from before the schedule must not overwrite it either.
	stale := op
	stale.State = lifecycle.Running
	if _, _, err := s.CommitOperation(t.Context(), stale, nil); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("commit at a revision older than the schedule = %v, want ErrConflict", err)
	}
}

func testRecordStuckAlert(t *testing.T, s *claims.Ledger) {
	mustCommit(t, s, Op("sa1"), nil)
	op := mustGet(t, s, "sa1")
	if !op.StuckAlertedAt.IsZero() {
		t.Fatalf("a new operation has StuckAlertedAt %v", op.StuckAlertedAt)
	}
	at := t0.Add(6 * time.Hour)
	rev, err := s.RecordStuckAlert(t.Context(), op, at, at)
	if err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, s, "sa1")
	if got.Rev.Version != 2 || rev.Version != 2 || !got.StuckAlertedAt.Equal(at) || got.State != lifecycle.Pending ||
		got.Checks != op.Checks || !got.NextCheckAt.Equal(op.NextCheckAt) || got.UserMetadata["job"] != "j1" {
		t.Fatalf("after recording the alert %+v", got)
	}
	if _, err := s.RecordStuckAlert(t.Context(), op, at.Add(time.Hour), at); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("record at a stale revision = %v, want ErrConflict", err)
	}
	// Every later write keeps it: a check, and a commit of what was read.
	got.Rev = rev
	if rev, err = s.ScheduleCheck(t.Context(), got, t0.Add(7*time.Hour), "ok", at); err != nil {
		t.Fatal(err)
	}
	got = mustGet(t, s, "sa1")
	got.State = lifecycle.Running
	mustCommit(t, s, got, nil)
	if got = mustGet(t, s, "sa1"); !got.StuckAlertedAt.Equal(at) || got.Rev.Version != 4 {
		t.Fatalf("after a check and a commit %+v, want StuckAlertedAt %v kept", got, at)
	}
}

// testMaximal: an operation at every bound commits with its claim, takes a
// seizure and a release, is rewritten, and reads back whole (Firestore: the
// operation and the claim stay under 1 MiB).
func testMaximal(t *testing.T, s *claims.Ledger) {
	op, c := ledgertest.MaximalOperation("h1", t0.Add(time.Minute))
	_, lease := mustCommit(t, s, op, c)
	got, err := s.GetClaim(t.Context(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(2 * time.Minute)
	l2, err := s.SeizeClaim(t.Context(), got, "h2", now.Add(time.Minute), far, now)
	if err != nil {
		t.Fatalf("seize: %v", err)
	}
	if err := s.CompleteClaim(t.Context(), *lease, now); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("complete by the seized holder = %v, want ErrFenced", err)
	}
	if err := s.ReleaseClaim(t.Context(), *l2, far, now); err != nil {
		t.Fatalf("release: %v", err)
	}
	read := mustGet(t, s, op.ID)
	read.Checks++
	mustCommit(t, s, read, nil)
	read = mustGet(t, s, op.ID)
	if read.Name != op.Name || read.APIName != op.APIName || read.GeminiStatus != op.GeminiStatus || read.Checks != op.Checks+1 || read.Error == nil || *read.Error != *op.Error ||
		!reflect.DeepEqual(read.History, op.History) || !reflect.DeepEqual(read.Conflicts, op.Conflicts) ||
		!reflect.DeepEqual(read.Replays, op.Replays) || read.Effect.Status != ledger.ClaimReleased {
		t.Errorf("maximal operation changed in the store")
	}
	ledgertest.CheckFree(t, "maximal metadata", read.UserMetadata, op.UserMetadata)
	ledgertest.CheckFree(t, "maximal output", read.Output, op.Output)
	claim, err := s.GetClaim(t.Context(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := c.Message.Data()
	if data, _ := claim.Message.Data(); string(data) != string(want) || claim.Status != ledger.ClaimReleased {
		t.Errorf("maximal claim changed in the store (status %s)", claim.Status)
	}
}

// testExpiry: a claim's ExpireAt (which drives the TTL policy) is moved to
// the given time by every seize and every release, so a claim whose side
// effect keeps failing is never deleted while it is still being retried.
// Completing it leaves ExpireAt as the last seize set it.
func testExpiry(t *testing.T, s *claims.Ledger) {
	settled(t, s, "e1", "h1", t0.Add(time.Minute))
	c, _ := s.GetClaim(t.Context(), "e1")
	if !c.ExpireAt.Equal(t0.Add(30 * 24 * time.Hour)) {
		t.Fatalf("new claim expires %v", c.ExpireAt)
	}
	now := t0.Add(20 * 24 * time.Hour)
	lease, err := s.SeizeClaim(t.Context(), c, "h2", now.Add(time.Minute), now.Add(30*24*time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ = s.GetClaim(t.Context(), "e1"); !c.ExpireAt.Equal(now.Add(30 * 24 * time.Hour)) {
		t.Fatalf("after a seize the claim expires %v, want %v", c.ExpireAt, now.Add(30*24*time.Hour))
	}
	later := now.Add(45 * 24 * time.Hour)
	if err := s.ReleaseClaim(t.Context(), *lease, later.Add(30*24*time.Hour), later); err != nil {
		t.Fatal(err)
	}
	if c, _ = s.GetClaim(t.Context(), "e1"); !c.ExpireAt.Equal(later.Add(30 * 24 * time.Hour)) {
		t.Fatalf("after a release the claim expires %v, want %v", c.ExpireAt, later.Add(30*24*time.Hour))
	}
	lease, err = s.SeizeClaim(t.Context(), c, "h3", later.Add(time.Minute), later.Add(31*24*time.Hour), later)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteClaim(t.Context(), *lease, later); err != nil {
		t.Fatal(err)
	}
	if c, _ = s.GetClaim(t.Context(), "e1"); c.Status != ledger.ClaimDone || !c.ExpireAt.Equal(later.Add(31*24*time.Hour)) {
		t.Fatalf("after DONE: %s, expires %v", c.Status, c.ExpireAt)
	}
}

// testGeminiStatus: the raw Gemini status is kept on the operation through
// every write (a commit, a schedule check, a mirror change), and a claim's
// message keeps it verbatim, as it keeps a null one (a message settled
// before the status was recorded).
func testGeminiStatus(t *testing.T, s *claims.Ledger) {
	op := Op("g1")
	op.State, op.GeminiStatus = lifecycle.Running, "requires_continuation"
	mustCommit(t, s, op, nil)
	got := mustGet(t, s, "g1")
	if got.GeminiStatus != "requires_continuation" {
		t.Fatalf("after create: gemini status %q", got.GeminiStatus)
	}
	if _, err := s.ScheduleCheck(t.Context(), got, t0.Add(time.Hour), "not-found", t0); err != nil {
		t.Fatal(err)
	}
	got = mustGet(t, s, "g1")
	if got.GeminiStatus != "requires_continuation" {
		t.Fatalf("after schedule check: gemini status %q", got.GeminiStatus)
	}
	next := terminal(got, t0.Add(time.Minute))
	next.State, next.GeminiStatus = lifecycle.Incomplete, "budget_exceeded"
	c := Claim("g1", "h1", t0.Add(time.Minute))
	c.Message.State, c.Message.GeminiStatus = string(lifecycle.Incomplete), "budget_exceeded"
	_, lease := mustCommit(t, s, next, c)
	if err := s.ReleaseClaim(t.Context(), *lease, far, t0); err != nil {
		t.Fatal(err)
	}
	got = mustGet(t, s, "g1")
	if got.GeminiStatus != "budget_exceeded" || got.State != lifecycle.Incomplete || got.Effect.Status != ledger.ClaimReleased {
		t.Fatalf("after settle and release: state %s gemini status %q effect %s", got.State, got.GeminiStatus, got.Effect.Status)
	}
	claim, err := s.GetClaim(t.Context(), "g1")
	if err != nil {
		t.Fatal(err)
	}
	if claim.Message.GeminiStatus != "budget_exceeded" || claim.Message.State != "INCOMPLETE" {
		t.Fatalf("claim message gemini status %q state %s", claim.Message.GeminiStatus, claim.Message.State)
	}

	// A claim written without a status reads back without one: data null.
	mustCommit(t, s, Op("g2"), nil)
	legacy := Claim("g2", "h1", t0.Add(time.Minute))
	legacy.Message.GeminiStatus = ""
	mustCommit(t, s, terminal(mustGet(t, s, "g2"), t0.Add(time.Minute)), legacy)
	claim, err = s.GetClaim(t.Context(), "g2")
	if err != nil {
		t.Fatal(err)
	}
	data, err := claim.Message.Data()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"gemini_status":null`) {
		t.Fatalf("legacy claim message data %s, want gemini_status null", data)
	}
}

// sameRev reports whether two revisions are the same stored version.
func sameRev(a, b ledger.Revision) bool { return a.Version == b.Version && a.Stamp.Equal(b.Stamp) }

// testOperationRevision pins ledger.Revision for an operation: every write
// to it, whichever method makes it (the effect mirror of a seize or release
// too), sets Version to one more, so Version counts its writes; a write
// that returns a revision returns the one a read then gives; completing the
// claim does not write the operation.
func testOperationRevision(t *testing.T, s *claims.Ledger) {
	const id = "r1"
	expect := func(step string, version int64, returned *ledger.Revision) ledger.Operation {
		t.Helper()
		got := mustGet(t, s, id)
		if got.Rev.Version != version {
			t.Fatalf("after %s: operation version %d, want %d", step, got.Rev.Version, version)
		}
		if returned != nil && !sameRev(*returned, got.Rev) {
			t.Fatalf("after %s: the write returned %+v, a read gives %+v", step, *returned, got.Rev)
		}
		return got
	}
	rev, _ := mustCommit(t, s, Op(id), nil)
	op := expect("create", 1, &rev)
	rev, err := s.ScheduleCheck(t.Context(), op, t0.Add(time.Hour), "ok", t0)
	if err != nil {
		t.Fatal(err)
	}
	op = expect("schedule check", 2, &rev)
	if rev, err = s.RecordStuckAlert(t.Context(), op, t0, t0); err != nil {
		t.Fatal(err)
	}
	op = expect("stuck alert", 3, &rev)
	rev, _ = mustCommit(t, s, terminal(op, t0.Add(time.Minute)), Claim(id, "h1", t0.Add(time.Minute)))
	expect("settle", 4, &rev)
	now := t0.Add(2 * time.Minute)
	c, err := s.GetClaim(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := s.SeizeClaim(t.Context(), c, "h2", now.Add(time.Minute), far, now)
	if err != nil {
		t.Fatal(err)
	}
	expect("seize (effect mirror)", 5, nil)
	if err := s.ReleaseClaim(t.Context(), *l2, far, now); err != nil {
		t.Fatal(err)
	}
	expect("release (effect mirror)", 6, nil)
	if c, err = s.GetClaim(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	l3, err := s.SeizeClaim(t.Context(), c, "h3", now.Add(time.Minute), far, now)
	if err != nil {
		t.Fatal(err)
	}
	expect("second seize", 7, nil)
	if err := s.CompleteClaim(t.Context(), *l3, now); err != nil {
		t.Fatal(err)
	}
	// DONE is mirrored on the operation in the same commit, so a list page
	// tells a done claim from a held one without reading the claim.
	op = expect("complete (mirrors DONE)", 8, nil)
	if op.Effect.Status != ledger.ClaimDone || !op.Effect.LeaseUntil.IsZero() {
		t.Fatalf("mirror after complete: %+v, want DONE without a lease", op.Effect)
	}
	op.Checks++
	rev, _ = mustCommit(t, s, op, nil)
	expect("commit after the claim's writes", 9, &rev)
}

// testClaimRevision pins ledger.Revision for a claim: 1 when created with
// its operation, one more with every seize, release and completion; a
// lease carries the claim's revision as a read then gives it.
func testClaimRevision(t *testing.T, s *claims.Ledger) {
	const id = "r2"
	expect := func(step string, version int64, lease *ledger.Lease) ledger.Claim {
		t.Helper()
		c, err := s.GetClaim(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Rev.Version != version {
			t.Fatalf("after %s: claim version %d, want %d", step, c.Rev.Version, version)
		}
		if lease != nil && !sameRev(lease.Rev, c.Rev) {
			t.Fatalf("after %s: the lease holds %+v, a read gives %+v", step, lease.Rev, c.Rev)
		}
		return c
	}
	lease := settled(t, s, id, "h1", t0.Add(time.Minute))
	c := expect("create", 1, lease)
	now := t0.Add(2 * time.Minute)
	l2, err := s.SeizeClaim(t.Context(), c, "h2", now.Add(time.Minute), far, now)
	if err != nil {
		t.Fatal(err)
	}
	expect("seize", 2, l2)
	if err := s.ReleaseClaim(t.Context(), *l2, far, now); err != nil {
		t.Fatal(err)
	}
	c = expect("release", 3, nil)
	l3, err := s.SeizeClaim(t.Context(), c, "h3", now.Add(time.Minute), far, now)
	if err != nil {
		t.Fatal(err)
	}
	expect("second seize", 4, l3)
	if err := s.CompleteClaim(t.Context(), *l3, now); err != nil {
		t.Fatal(err)
	}
	if c = expect("complete", 5, nil); c.Attempts != 3 {
		t.Fatalf("attempts %d after three holders, want 3", c.Attempts)
	}
}

// testMirrorFences: a seize or release rewrites the operation's effect
// mirror, so every fenced write from a read taken before it (a commit, a
// schedule check, a stuck alert) must fail rather than put the old mirror
// back or write next to it.
func testMirrorFences(t *testing.T, s *claims.Ledger) {
	const id = "m1"
	lease := settled(t, s, id, "h1", t0.Add(time.Minute))
	before := mustGet(t, s, id)
	if err := s.ReleaseClaim(t.Context(), *lease, far, t0); err != nil {
		t.Fatal(err)
	}
	after := mustGet(t, s, id)
	if after.Rev.Version != before.Rev.Version+1 || after.Effect.Status != ledger.ClaimReleased || !after.Effect.LeaseUntil.Equal(t0) {
		t.Fatalf("after release: version %d (before %d), mirror %+v", after.Rev.Version, before.Rev.Version, after.Effect)
	}
	staleWrites := func(step string, stale ledger.Operation) {
		t.Helper()
		conflicted := stale
		conflicted.Conflicts = []ledger.HistoryEntry{{At: t0, Source: "webhook", State: lifecycle.Failed, Reason: "terminal-conflict"}}
		if _, _, err := s.CommitOperation(t.Context(), conflicted, nil); !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("commit from a read older than the %s = %v, want ErrConflict", step, err)
		}
		if _, err := s.ScheduleCheck(t.Context(), stale, t0.Add(time.Hour), "ok", t0); !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("schedule check from a read older than the %s = %v, want ErrConflict", step, err)
		}
		if _, err := s.RecordStuckAlert(t.Context(), stale, t0, t0); !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("stuck alert from a read older than the %s = %v, want ErrConflict", step, err)
		}
	}
	staleWrites("release", before)
	c, err := s.GetClaim(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SeizeClaim(t.Context(), c, "h2", t0.Add(time.Hour), far, t0); err != nil {
		t.Fatal(err)
	}
	staleWrites("seize", after)
	got := mustGet(t, s, id)
	if got.Effect.Status != ledger.ClaimHeld || !got.Effect.LeaseUntil.Equal(t0.Add(time.Hour)) || len(got.Conflicts) != 0 ||
		got.Checks != 0 || !got.StuckAlertedAt.IsZero() || got.Rev.Version != after.Rev.Version+1 {
		t.Fatalf("after the seize and the refused stale writes %+v", got)
	}
}

// testScheduleNoNext: a zero next time means no scheduled check, on every
// store: it reads back as zero and the operation leaves DueOperations until
// a later schedule gives it a time again.
func testScheduleNoNext(t *testing.T, s *claims.Ledger) {
	const id = "z1"
	mustCommit(t, s, Op(id), nil)
	rev, err := s.ScheduleCheck(t.Context(), mustGet(t, s, id), time.Time{}, "gave-up", t0)
	if err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, s, id)
	if !got.NextCheckAt.IsZero() || got.Checks != 1 || got.LastCheck != "gave-up" || !sameRev(got.Rev, rev) {
		t.Fatalf("after scheduling no check %+v", got)
	}
	due, err := s.DueOperations(t.Context(), shard.All(), t0.Add(24*time.Hour), ledger.DueCursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 0 {
		t.Fatalf("due with no check scheduled = %v, want none", ledgertest.IDs(due))
	}
	if _, err := s.ScheduleCheck(t.Context(), got, t0.Add(time.Minute), "ok", t0); err != nil {
		t.Fatal(err)
	}
	if due, err = s.DueOperations(t.Context(), shard.All(), t0.Add(24*time.Hour), ledger.DueCursor{}, 10); err != nil || !ledgertest.Same(ledgertest.IDs(due), []string{id}) {
		t.Fatalf("due after scheduling again = %v, %v; want [%s]", ledgertest.IDs(due), err, id)
	}
}
