// Package ledgertest is the conformance suite every ledger adapter must pass:
// the fencing and atomicity the ingest door relies on, including under
// concurrency.
package ledgertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/shard"
)

// NewStore returns a fresh, empty ledger for one test.
type NewStore func(t *testing.T) ledger.Ledger

// Run runs the suite.
func Run(t *testing.T, newStore NewStore) {
	tests := map[string]func(*testing.T, ledger.Ledger){
		"GetMissing":                    testGetMissing,
		"CreateAndRead":                 testCreateAndRead,
		"CreateTwiceConflicts":          testCreateTwice,
		"StaleRevisionConflicts":        testStaleRevision,
		"ClaimCreatedAtomically":        testClaimAtomic,
		"ExistingClaimBlocksCommit":     testExistingClaim,
		"CompleteFencedOnLease":         testCompleteFenced,
		"SeizeFencesOldHolder":          testSeize,
		"ReleaseThenSeize":              testRelease,
		"ConcurrentCommitsOneWins":      testConcurrentCommits,
		"ConcurrentSeizesOneWins":       testConcurrentSeizes,
		"TimesKeepMicroseconds":         testTimePrecision,
		"MessageRoundTripsVerbatim":     testMessage,
		"MissingClaimCannotComplete":    testMissingClaim,
		"DueOperations":                 testDueOperations,
		"CountDue":                      testCountDue,
		"StuckOperations":               testStuckOperations,
		"DueClaims":                     testDueClaims,
		"ScheduleCheck":                 testScheduleCheck,
		"RecordStuckAlert":              testRecordStuckAlert,
		"ListOperations":                testListOperations,
		"PageOperations":                testPageOperations,
		"SearchOperations":              testSearchOperations,
		"FreeFormValuesRoundTrip":       testFreeForm,
		"MaximalOperationCommits":       testMaximal,
		"SeizeAndReleaseExtendExpiry":   testExpiry,
		"GeminiStatusRoundTrips":        testGeminiStatus,
		"RevisionCountsOperationWrites": testOperationRevision,
		"RevisionCountsClaimWrites":     testClaimRevision,
		"MirrorWriteFencesStaleWrites":  testMirrorFences,
		"ScheduleCheckWithoutNext":      testScheduleNoNext,
		"EmptyListsReadAsNil":           testEmptyLists,
		"NumbersRoundTripExactly":       testNumbersExact,
		"DeliveryLogBoundedApart":       testDeliveryLog,
		"CountPendingAndDue":            testCounts,
		"RangedQueries":                 testRangedQueries,
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, newStore(t))
		})
	}
}

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 123456000, time.UTC)

// far is the expiry the tests that are not about it give seized and
// released claims.
var far = t0.Add(30 * 24 * time.Hour)

// Op returns a valid new operation document for tests.
func Op(id string) ledger.Operation {
	return ledger.Operation{
		ID: id, Name: "batches/" + id, APIName: "batches/" + id, Kind: "batch",
		State: lifecycle.Pending, UpdateTime: time.Unix(0, 0).UTC(), SubmittedAt: t0, NextCheckAt: t0.Add(90 * time.Second),
		UserMetadata: map[string]any{"job": "j1"},
	}
}

// Claim returns a claim for op id held by holder.
func Claim(id, holder string, leaseUntil time.Time) *ledger.Claim {
	return &ledger.Claim{
		ID: id, Key: "gemini:batches/" + id, Operation: "batches/" + id, Status: ledger.ClaimHeld, Holder: holder,
		LeaseUntil: leaseUntil, Attempts: 1, CreatedAt: t0, UpdatedAt: t0, ExpireAt: t0.Add(30 * 24 * time.Hour),
		Message: results.Message{Operation: "batches/" + id, Kind: "batch", State: "SUCCEEDED", GeminiStatus: "batch.succeeded", UpdateTime: t0,
			SettledBy: "webhook", SettledAt: t0, IdempotencyKey: "gemini:batches/" + id,
			Output: map[string]any{"output_file_uri": "gs://b/r.jsonl"}},
	}
}

func mustCommit(t *testing.T, s ledger.Store, op ledger.Operation, c *ledger.Claim) (ledger.Revision, *ledger.Lease) {
	t.Helper()
	rev, lease, err := s.CommitOperation(t.Context(), op, c)
	if err != nil {
		t.Fatalf("commit %s: %v", op.ID, err)
	}
	return rev, lease
}

func mustGet(t *testing.T, s ledger.Store, id string) ledger.Operation {
	t.Helper()
	op, err := s.GetOperation(t.Context(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return op
}

// terminal returns op moved to SUCCEEDED with its effect mirror held.
func terminal(op ledger.Operation, leaseUntil time.Time) ledger.Operation {
	op.State, op.UpdateTime, op.SettledAt, op.SettledBy, op.NextCheckAt = lifecycle.Succeeded, t0, t0, "webhook", time.Time{}
	op.Effect = ledger.EffectMirror{Status: ledger.ClaimHeld, LeaseUntil: leaseUntil}
	return op
}

func testGetMissing(t *testing.T, s ledger.Ledger) {
	if _, err := s.GetOperation(t.Context(), "nope"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("GetOperation(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.GetClaim(t.Context(), "nope"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("GetClaim(missing) = %v, want ErrNotFound", err)
	}
}

func testCreateAndRead(t *testing.T, s ledger.Ledger) {
	op := Op("a1")
	op.History = []ledger.HistoryEntry{{At: t0, Source: "register", State: lifecycle.Pending, UpdateTime: time.Unix(0, 0).UTC(), Reason: "first-sighting"}}
	rev, lease := mustCommit(t, s, op, nil)
	if lease != nil || rev.Version != 1 {
		t.Fatalf("rev %+v lease %v, want version 1 and no lease", rev, lease)
	}
	got := mustGet(t, s, "a1")
	if got.Rev.Version != 1 || got.Name != op.Name || got.State != lifecycle.Pending || got.Kind != "batch" ||
		!got.NextCheckAt.Equal(op.NextCheckAt) || !got.SubmittedAt.Equal(t0) || got.UserMetadata["job"] != "j1" ||
		len(got.History) != 1 || got.History[0].Reason != "first-sighting" || !got.SettledAt.IsZero() {
		t.Fatalf("read back %+v", got)
	}
	// A settled operation has no next check (the pending query must not see it).
	next := terminal(got, t0.Add(time.Minute))
	mustCommit(t, s, next, nil)
	got = mustGet(t, s, "a1")
	if got.Rev.Version != 2 || got.State != lifecycle.Succeeded || !got.NextCheckAt.IsZero() || got.SettledBy != "webhook" ||
		got.Effect.Status != ledger.ClaimHeld || !got.Effect.LeaseUntil.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after settle %+v", got)
	}
}

func testCreateTwice(t *testing.T, s ledger.Ledger) {
	mustCommit(t, s, Op("a2"), nil)
	if _, _, err := s.CommitOperation(t.Context(), Op("a2"), nil); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("second create = %v, want ErrConflict", err)
	}
}

func testStaleRevision(t *testing.T, s ledger.Ledger) {
	mustCommit(t, s, Op("a3"), nil)
	read := mustGet(t, s, "a3")
	first := read
	first.State = lifecycle.Running
	mustCommit(t, s, first, nil)
	second := read // still at the old revision
	second.State = lifecycle.RequiresAction
	if _, _, err := s.CommitOperation(t.Context(), second, nil); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("commit at stale revision = %v, want ErrConflict", err)
	}
	if got := mustGet(t, s, "a3"); got.State != lifecycle.Running || got.Rev.Version != 2 {
		t.Fatalf("stale commit changed the store: %+v", got)
	}
}

func testClaimAtomic(t *testing.T, s ledger.Ledger) {
	mustCommit(t, s, Op("a4"), nil)
	op := terminal(mustGet(t, s, "a4"), t0.Add(time.Minute))
	_, lease := mustCommit(t, s, op, Claim("a4", "h1", t0.Add(time.Minute)))
	if lease == nil || lease.Holder != "h1" || lease.ID != "a4" {
		t.Fatalf("lease %+v", lease)
	}
	c, err := s.GetClaim(t.Context(), "a4")
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != ledger.ClaimHeld || c.Holder != "h1" || c.Attempts != 1 || c.Key != "gemini:batches/a4" || !c.LeaseUntil.Equal(t0.Add(time.Minute)) {
		t.Fatalf("claim %+v", c)
	}
}

func testExistingClaim(t *testing.T, s ledger.Ledger) {
	mustCommit(t, s, Op("a5"), nil)
	op := mustGet(t, s, "a5")
	mustCommit(t, s, terminal(op, t0), Claim("a5", "h1", t0))
	// Another writer that read the operation before and tries to settle it
	// with its own claim must fail whole: neither the operation nor the claim
	// may change.
	other := terminal(mustGet(t, s, "a5"), t0)
	other.SettledBy = "reconcile"
	if _, _, err := s.CommitOperation(t.Context(), other, Claim("a5", "h2", t0)); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("commit with an existing claim = %v, want ErrConflict", err)
	}
	if got := mustGet(t, s, "a5"); got.SettledBy != "webhook" || got.Rev.Version != 2 {
		t.Fatalf("operation changed by a failed commit: %+v", got)
	}
	if c, _ := s.GetClaim(t.Context(), "a5"); c.Holder != "h1" {
		t.Fatalf("claim changed by a failed commit: %+v", c)
	}
}

func settled(t *testing.T, s ledger.Store, id, holder string, leaseUntil time.Time) *ledger.Lease {
	t.Helper()
	mustCommit(t, s, Op(id), nil)
	_, lease := mustCommit(t, s, terminal(mustGet(t, s, id), leaseUntil), Claim(id, holder, leaseUntil))
	return lease
}

func testCompleteFenced(t *testing.T, s ledger.Ledger) {
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

func testSeize(t *testing.T, s ledger.Ledger) {
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

func testRelease(t *testing.T, s ledger.Ledger) {
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

// exactlyOneWins runs write n times at once and requires exactly one
// success; every other attempt must fail with the fencing error lost.
func exactlyOneWins(t *testing.T, what string, lost error, write func(i int) error) {
	t.Helper()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = write(i)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, lost):
			t.Errorf("unexpected error: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent %s succeeded, want exactly 1", won, n, what)
	}
}

func testConcurrentCommits(t *testing.T, s ledger.Ledger) {
	mustCommit(t, s, Op("a9"), nil)
	read := mustGet(t, s, "a9")
	exactlyOneWins(t, "commits from one read", ledger.ErrConflict, func(i int) error {
		op := terminal(read, t0.Add(time.Minute))
		_, _, err := s.CommitOperation(t.Context(), op, Claim("a9", fmt.Sprint("h", i), t0.Add(time.Minute)))
		return err
	})
	if got := mustGet(t, s, "a9"); got.Rev.Version != 2 {
		t.Fatalf("version %d, want 2", got.Rev.Version)
	}
}

func testConcurrentSeizes(t *testing.T, s ledger.Ledger) {
	settled(t, s, "a10", "h0", t0)
	c, _ := s.GetClaim(t.Context(), "a10")
	exactlyOneWins(t, "seizes", ledger.ErrFenced, func(i int) error {
		_, err := s.SeizeClaim(t.Context(), c, fmt.Sprint("h", i+1), t0.Add(time.Hour), far, t0.Add(time.Minute))
		return err
	})
}

func testTimePrecision(t *testing.T, s ledger.Ledger) {
	op := Op("a11")
	op.UpdateTime = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	mustCommit(t, s, op, nil)
	got := mustGet(t, s, "a11")
	if want := lifecycle.ServerTime(op.UpdateTime); !got.UpdateTime.Equal(want) {
		t.Fatalf("update time %v, want %v (microsecond precision)", got.UpdateTime, want)
	}
	if d := lifecycle.Apply(got.Current(), lifecycle.Event{State: lifecycle.Pending, UpdateTime: op.UpdateTime}); d.Applied {
		t.Fatalf("the same event re-read from the store must not apply again: %+v", d)
	}
}

func testMessage(t *testing.T, s ledger.Ledger) {
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

func testMissingClaim(t *testing.T, s ledger.Ledger) {
	mustCommit(t, s, Op("a13"), nil)
	l := ledger.Lease{ID: "a13", OpID: "a13", Holder: "h", Rev: ledger.Revision{Version: 1, Stamp: t0}}
	if err := s.CompleteClaim(t.Context(), l, t0); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("complete missing claim = %v, want ErrFenced", err)
	}
}

func ids(ops []ledger.Operation) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = o.ID
	}
	return out
}

func same(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func testDueOperations(t *testing.T, s ledger.Ledger) {
	// c2, d2 and e2 share a next check time: ties are ordered by id.
	due := map[string]time.Time{"d1": t0.Add(time.Minute), "e2": t0.Add(2 * time.Minute), "c2": t0.Add(2 * time.Minute),
		"d2": t0.Add(2 * time.Minute), "d3": t0.Add(3 * time.Minute)}
	for _, id := range []string{"d3", "e2", "d1", "c2", "d2"} {
		op := Op(id)
		op.NextCheckAt = due[id]
		mustCommit(t, s, op, nil)
	}
	settledOp := Op("d0")
	mustCommit(t, s, settledOp, nil)
	mustCommit(t, s, terminal(mustGet(t, s, "d0"), t0), nil)
	got, err := s.DueOperations(t.Context(), shard.All(), t0.Add(2*time.Minute), ledger.DueCursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !same(ids(got), []string{"d1", "c2", "d2", "e2"}) {
		t.Fatalf("due = %v, want [d1 c2 d2 e2] (earliest first, ties by id, settled excluded)", ids(got))
	}
	if got, _ := s.DueOperations(t.Context(), shard.All(), t0.Add(time.Hour), ledger.DueCursor{}, 1); !same(ids(got), []string{"d1"}) {
		t.Fatalf("due with limit 1 = %v", ids(got))
	}
	// The cursor starts strictly after (next check time, id), inside a tie too.
	for after, want := range map[string][]string{"d1": {"c2", "d2", "e2", "d3"}, "c2": {"d2", "e2", "d3"}, "e2": {"d3"}, "d3": {}} {
		got, err := s.DueOperations(t.Context(), shard.All(), t0.Add(time.Hour), ledger.After(mustGet(t, s, after)), 10)
		if err != nil {
			t.Fatal(err)
		}
		if !same(ids(got), want) {
			t.Fatalf("due after %s = %v, want %v", after, ids(got), want)
		}
	}
	// Paging by two visits each due operation once, in order.
	var paged []string
	var cur ledger.DueCursor
	for range 10 {
		page, err := s.DueOperations(t.Context(), shard.All(), t0.Add(time.Hour), cur, 2)
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, ids(page)...)
		if len(page) < 2 {
			break
		}
		cur = ledger.After(page[len(page)-1])
	}
	if !same(paged, []string{"d1", "c2", "d2", "e2", "d3"}) {
		t.Fatalf("paged = %v", paged)
	}
}

// testCountDue: CountDue counts what DueOperations would list, settled and
// not-yet-due operations excluded.
func testCountDue(t *testing.T, s ledger.Ledger) {
	for i, id := range []string{"n1", "n2", "n3"} {
		op := Op(id)
		op.NextCheckAt = t0.Add(time.Duration(i) * time.Minute)
		mustCommit(t, s, op, nil)
	}
	mustCommit(t, s, Op("n0"), nil)
	mustCommit(t, s, terminal(mustGet(t, s, "n0"), t0), nil)
	for at, want := range map[time.Duration]int64{-time.Minute: 0, 0: 1, time.Minute: 2, time.Hour: 3} {
		n, err := s.CountDue(t.Context(), shard.All(), t0.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("CountDue(t0%+v) = %d, want %d", at, n, want)
		}
	}
}

func testStuckOperations(t *testing.T, s ledger.Ledger) {
	for id, sub := range map[string]time.Time{"s1": t0.Add(-8 * time.Hour), "s2": t0.Add(-7 * time.Hour), "s3": t0.Add(-time.Hour), "s4": t0.Add(-9 * time.Hour)} {
		op := Op(id)
		op.SubmittedAt = sub
		mustCommit(t, s, op, nil)
	}
	mustCommit(t, s, terminal(mustGet(t, s, "s4"), t0), nil) // settled: never stuck
	got, err := s.StuckOperations(t.Context(), shard.All(), t0.Add(-6*time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if !same(ids(got), []string{"s1", "s2"}) {
		t.Fatalf("stuck = %v, want [s1 s2] (oldest first)", ids(got))
	}
	// An alert moves an operation's key: s1, alerted with its next alert
	// due later, leaves the scan for now and, once due, comes after s2;
	// a commit of what was read keeps the key.
	s1 := got[0]
	if !s1.StuckFrom.Equal(s1.SubmittedAt) {
		t.Fatalf("before any alert StuckFrom = %v, want the submission time %v", s1.StuckFrom, s1.SubmittedAt)
	}
	if _, err := s.RecordStuckAlert(t.Context(), s1, t0, t0.Add(-5*time.Hour)); err != nil {
		t.Fatal(err)
	}
	s1 = mustGet(t, s, "s1")
	s1.State = lifecycle.Running
	mustCommit(t, s, s1, nil)
	if s1 = mustGet(t, s, "s1"); !s1.StuckFrom.Equal(t0.Add(-5*time.Hour)) || !s1.StuckAlertedAt.Equal(t0) {
		t.Fatalf("after an alert and a commit StuckFrom %v, StuckAlertedAt %v; want %v, %v", s1.StuckFrom, s1.StuckAlertedAt, t0.Add(-5*time.Hour), t0)
	}
	if got, err = s.StuckOperations(t.Context(), shard.All(), t0.Add(-6*time.Hour), 10); err != nil || !same(ids(got), []string{"s2"}) {
		t.Fatalf("stuck after s1's alert = %v, %v; want [s2]", ids(got), err)
	}
	if got, err = s.StuckOperations(t.Context(), shard.All(), t0.Add(-5*time.Hour), 10); err != nil || !same(ids(got), []string{"s2", "s1"}) {
		t.Fatalf("stuck once s1's next alert is due = %v, %v; want [s2 s1]", ids(got), err)
	}
	// Settled: out of the scan, whatever its key was.
	mustCommit(t, s, terminal(s1, t0), nil)
	if got, err = s.StuckOperations(t.Context(), shard.All(), t0, 10); err != nil || !same(ids(got), []string{"s2", "s3"}) {
		t.Fatalf("stuck after s1 settled = %v, %v; want [s2 s3]", ids(got), err)
	}
}

func testDueClaims(t *testing.T, s ledger.Ledger) {
	settled(t, s, "c1", "h1", t0.Add(time.Minute))     // lease ends at +1m
	l2 := settled(t, s, "c2", "h2", t0.Add(time.Hour)) // released at +30s
	if err := s.ReleaseClaim(t.Context(), *l2, far, t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	l3 := settled(t, s, "c3", "h3", t0) // DONE: never due
	if err := s.CompleteClaim(t.Context(), *l3, t0); err != nil {
		t.Fatal(err)
	}
	settled(t, s, "c4", "h4", t0.Add(time.Hour)) // live
	got, err := s.DueClaims(t.Context(), t0.Add(2*time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []string
	for _, c := range got {
		gotIDs = append(gotIDs, c.ID)
	}
	if !same(gotIDs, []string{"c2", "c1"}) {
		t.Fatalf("due claims = %v, want [c2 c1]", gotIDs)
	}
}

func testScheduleCheck(t *testing.T, s ledger.Ledger) {
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

func testRecordStuckAlert(t *testing.T, s ledger.Ledger) {
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

func testListOperations(t *testing.T, s ledger.Ledger) {
	for i, id := range []string{"l1", "l2", "l3"} {
		op := Op(id)
		op.SubmittedAt = t0.Add(time.Duration(i) * time.Minute)
		mustCommit(t, s, op, nil)
	}
	mustCommit(t, s, terminal(mustGet(t, s, "l2"), t0), nil)
	all, err := s.ListOperations(t.Context(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if !same(ids(all), []string{"l3", "l2", "l1"}) {
		t.Fatalf("list = %v, want newest first", ids(all))
	}
	pending, _ := s.ListOperations(t.Context(), lifecycle.Pending, 10)
	if !same(ids(pending), []string{"l3", "l1"}) {
		t.Fatalf("list PENDING = %v", ids(pending))
	}
	if two, _ := s.ListOperations(t.Context(), "", 2); len(two) != 2 {
		t.Fatalf("limit ignored: %v", ids(two))
	}
}

// HardMetadata is metadata a Firestore map cannot hold (arrays inside
// arrays, reserved "__name__"/"__x__" keys, an empty key) with the other
// shapes JSON allows: every store must keep it exactly.
func HardMetadata() map[string]any {
	const doc = `{"nested":[[1,2],[3,[4,[5]]],[]],"__name__":"reserved","__x__":{"__y__":[[null]]},"":"empty key",
		"a.b":"dotted","` + "`q`" + `":"backticks","ключ":"値 🎉 \u2028","html":"<a href='x'>&amp;</a>","ctl":"\u0001\t\n",
		"nums":[0,-0.5,1e21,1.7976931348623157e308,5e-324,9007199254740993,-42],"yes":true,"no":false,"nothing":null,
		"deep":{"a":{"b":{"c":[{"d":[[]]}]}}},"empty":{},"none":[]}`
	m, err := ledger.DecodeMap([]byte(doc))
	if err != nil {
		panic(err)
	}
	return m
}

// Normalized is m as every store reads it back: through ledger.EncodeJSON
// and ledger.DecodeMap (numbers json.Number, arrays []any, maps
// map[string]any).
func Normalized(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, err := ledger.EncodeJSON(m)
	if err != nil {
		panic(err)
	}
	out, err := ledger.DecodeMap(b)
	if err != nil {
		panic(err)
	}
	return out
}

func checkFree(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	if !reflect.DeepEqual(got, Normalized(want)) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(Normalized(want))
		t.Errorf("%s changed in the store:\n got %s\nwant %s", what, gb, wb)
	}
}

// testFreeForm: user metadata and output are kept exactly, whatever their
// shape, on the create and the update path and in the claim's message; an
// empty map stays empty and an absent one absent.
func testFreeForm(t *testing.T, s ledger.Ledger) {
	op := Op("f1")
	op.UserMetadata = HardMetadata()
	// Output as the Gemini fetcher builds it: Go slices and ints.
	op.Output = map[string]any{"video_uris": []string{"gs://v/1", "gs://v/2"}, "rai_media_filtered_count": 1, "output_text": "<b>ok</b>"}
	mustCommit(t, s, op, nil)
	got := mustGet(t, s, "f1")
	checkFree(t, "metadata (create)", got.UserMetadata, op.UserMetadata)
	checkFree(t, "output (create)", got.Output, op.Output)

	c := Claim("f1", "h1", t0.Add(time.Minute))
	c.Message.UserMetadata, c.Message.Output = op.UserMetadata, op.Output
	mustCommit(t, s, terminal(got, t0.Add(time.Minute)), c)
	got = mustGet(t, s, "f1")
	checkFree(t, "metadata (update)", got.UserMetadata, op.UserMetadata)
	checkFree(t, "output (update)", got.Output, op.Output)
	claim, err := s.GetClaim(t.Context(), "f1")
	if err != nil {
		t.Fatal(err)
	}
	checkFree(t, "message metadata", claim.Message.UserMetadata, op.UserMetadata)
	checkFree(t, "message output", claim.Message.Output, op.Output)

	empty := Op("f2")
	empty.UserMetadata, empty.Output = map[string]any{}, nil
	mustCommit(t, s, empty, nil)
	if got := mustGet(t, s, "f2"); got.UserMetadata == nil || len(got.UserMetadata) != 0 || got.Output != nil {
		t.Errorf("empty metadata read back as %#v, absent output as %#v", got.UserMetadata, got.Output)
	}
}

// sized returns m with key pad set to a string of '<' that makes
// ledger.EncodeJSON(m) exactly n bytes long ('<' is the character an HTML
// escaping encoder would blow up six times).
func sized(m map[string]any, pad string, n int) map[string]any {
	m[pad] = ""
	b, err := ledger.EncodeJSON(m)
	if err != nil {
		panic(err)
	}
	m[pad] = strings.Repeat("<", n-len(b))
	return m
}

// MaximalOperation returns a settled operation at every bound the ingest
// door keeps (ledger.Max*): user metadata and output of exactly their
// encoded bounds, the longest error message (of control characters, which
// JSON escapes to six bytes each in the claim's message), full history,
// conflicts and replays with the longest delivery ids, and a document id of
// Firestore's maximum length; and its claim (held by holder until
// leaseUntil), whose message carries all of it again.
func MaximalOperation(holder string, leaseUntil time.Time) (ledger.Operation, *ledger.Claim) {
	id := strings.Repeat("m", 1500)
	long := func(prefix string, n int) string { return prefix + strings.Repeat("x", n-len(prefix)) }
	op := ledger.Operation{
		ID: id, Name: long("operations/", 1024), APIName: long("models/", 1024), Kind: "video",
		State: lifecycle.Succeeded, UpdateTime: t0, SubmittedAt: t0.Add(-time.Hour), SettledAt: t0, SettledBy: "reconcile",
		GeminiStatus: strings.Repeat("s", ledger.MaxGeminiStatusBytes),
		Checks:       99, LastCheck: "gemini-unavailable", LastCheckAt: t0,
		UserMetadata: sized(HardMetadata(), "pad", ledger.MaxMetadataBytes),
		Output:       sized(map[string]any{"video_uris": []any{"gs://v/1"}}, "output_text", ledger.MaxOutputBytes),
		Error:        &results.ErrorInfo{Code: 13, Message: strings.Repeat("\x01", ledger.MaxErrorMessageBytes)},
		Effect:       ledger.EffectMirror{Status: ledger.ClaimHeld, LeaseUntil: leaseUntil},
	}
	entry := func(i int) ledger.HistoryEntry {
		return ledger.HistoryEntry{At: t0.Add(time.Duration(i) * time.Second), Source: "reconcile", State: lifecycle.RequiresAction,
			UpdateTime: t0, Reason: "stale-or-equal-update-time", DeliveryID: strings.Repeat("d", ledger.MaxDeliveryIDBytes)}
	}
	for i := range ledger.MaxHistory {
		op.History = append(op.History, entry(i))
		op.Replays = append(op.Replays, ledger.Replay{ID: "replay-" + strings.Repeat("r", 32), At: t0})
	}
	for i := range ledger.MaxConflicts {
		op.Conflicts = append(op.Conflicts, entry(i))
	}
	key := "gemini:" + op.Name
	return op, &ledger.Claim{
		ID: id, Key: key, Operation: op.Name, Status: ledger.ClaimHeld, Holder: holder,
		LeaseUntil: leaseUntil, Attempts: 1, CreatedAt: t0, UpdatedAt: t0, ExpireAt: t0.Add(30 * 24 * time.Hour),
		Message: results.Message{Operation: op.Name, Kind: "video", State: string(op.State), GeminiStatus: results.RawStatus(op.GeminiStatus), UpdateTime: t0,
			SettledBy: op.SettledBy, SettledAt: t0, IdempotencyKey: key, Output: op.Output, Error: op.Error, UserMetadata: op.UserMetadata},
	}
}

// testMaximal: an operation at every bound commits with its claim, takes a
// seizure and a release, is rewritten, and reads back whole (Firestore: the
// operation and the claim stay under 1 MiB).
func testMaximal(t *testing.T, s ledger.Ledger) {
	op, c := MaximalOperation("h1", t0.Add(time.Minute))
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
	checkFree(t, "maximal metadata", read.UserMetadata, op.UserMetadata)
	checkFree(t, "maximal output", read.Output, op.Output)
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
func testExpiry(t *testing.T, s ledger.Ledger) {
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
func testGeminiStatus(t *testing.T, s ledger.Ledger) {
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

// pageFixture is the ledger testPageOperations pages through: every kind,
// terminal and not, with submission-time ties (ordered by id, descending)
// and one operation in a state the reducer does not know (not terminal, so
// it can be stuck).
func pageFixture() []ledger.Operation {
	type row struct {
		id    string
		kind  opname.Kind
		state lifecycle.State
		min   int // submitted t0 + min minutes
	}
	rows := []row{
		{"p01", opname.KindBatch, lifecycle.Pending, 0},
		{"p02", opname.KindVideo, lifecycle.Running, 1},
		{"p03", opname.KindBatch, lifecycle.Succeeded, 2},
		{"p04", opname.KindInteraction, lifecycle.Pending, 3},
		{"p05", opname.KindBatch, lifecycle.Running, 3},
		{"p06", opname.KindBatch, lifecycle.Pending, 3},
		{"p07", opname.KindVideo, lifecycle.Failed, 4},
		{"p08", opname.KindBatch, "PAUSED", 5},
		{"p09", opname.KindInteraction, lifecycle.Succeeded, 6},
		{"p10", opname.KindBatch, lifecycle.Pending, 7},
		{"p11", opname.KindVideo, lifecycle.Pending, 8},
	}
	out := make([]ledger.Operation, 0, len(rows))
	for _, r := range rows {
		op := Op(r.id)
		op.Kind, op.State, op.SubmittedAt = r.kind, r.state, t0.Add(time.Duration(r.min)*time.Minute)
		if r.state.Terminal() {
			op.SettledAt, op.SettledBy, op.NextCheckAt = op.SubmittedAt, "webhook", time.Time{}
		}
		out = append(out, op)
	}
	return out
}

// matches is the reference model of ledger.Filter.
func matches(op ledger.Operation, f ledger.Filter) bool {
	return (f.State == "" || op.State == f.State) && (f.Kind == "" || op.Kind == f.Kind) &&
		(f.StuckAt.IsZero() || (!op.State.Terminal() && !op.SubmittedAt.After(f.StuckAt)))
}

// testPageOperations checks every combination of filter fields against the
// reference model: the order (newest first, ties by id descending), paging
// by cursor in every page size, and the count.
func testPageOperations(t *testing.T, s ledger.Ledger) {
	ops := pageFixture()
	for _, op := range ops {
		mustCommit(t, s, op, nil)
	}
	// Newest first; ties (p04..p06 at +3 min) by id, descending.
	want := []string{"p11", "p10", "p09", "p08", "p07", "p06", "p05", "p04", "p03", "p02", "p01"}
	all, err := s.PageOperations(t.Context(), ledger.Filter{}, ledger.ListCursor{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !same(ids(all), want) {
		t.Fatalf("PageOperations(all) = %v, want %v", ids(all), want)
	}
	cutoff := t0.Add(5 * time.Minute) // p11 and p10 are too young to be stuck
	var filters []ledger.Filter
	for _, st := range []lifecycle.State{"", lifecycle.Pending, lifecycle.Running, lifecycle.Succeeded, "PAUSED"} {
		for _, k := range []opname.Kind{"", opname.KindBatch, opname.KindVideo} {
			for _, stuck := range []time.Time{{}, cutoff} {
				filters = append(filters, ledger.Filter{State: st, Kind: k, StuckAt: stuck})
			}
		}
	}
	for _, f := range filters {
		var expect []string
		for _, id := range want {
			for _, op := range ops {
				if op.ID == id && matches(op, f) {
					expect = append(expect, id)
				}
			}
		}
		n, err := s.CountOperations(t.Context(), f)
		if err != nil {
			t.Fatalf("CountOperations(%+v): %v", f, err)
		}
		if n != int64(len(expect)) {
			t.Errorf("CountOperations(%+v) = %d, want %d", f, n, len(expect))
		}
		for _, size := range []int{1, 2, 3, 100} {
			var got []string
			var after ledger.ListCursor
			for range len(ops) + 1 {
				page, err := s.PageOperations(t.Context(), f, after, size)
				if err != nil {
					t.Fatalf("PageOperations(%+v, %+v, %d): %v", f, after, size, err)
				}
				if len(page) > size {
					t.Fatalf("PageOperations(%+v, size %d) returned %d", f, size, len(page))
				}
				got = append(got, ids(page)...)
				if len(page) < size {
					break
				}
				after = ledger.ListAfter(page[len(page)-1])
			}
			if !same(got, expect) {
				t.Errorf("PageOperations(%+v) in pages of %d = %v, want %v", f, size, got, expect)
			}
		}
	}
	if none, err := s.PageOperations(t.Context(), ledger.Filter{}, ledger.ListCursor{}, 0); err != nil || len(none) != 0 {
		t.Errorf("PageOperations(limit 0) = %v, %v; want nothing", ids(none), err)
	}
	// A settled operation leaves the stuck set.
	p01 := mustGet(t, s, "p01")
	mustCommit(t, s, terminal(p01, t0), nil)
	if n, _ := s.CountOperations(t.Context(), ledger.Filter{Kind: opname.KindBatch, StuckAt: cutoff}); n != 3 {
		t.Errorf("stuck batches after p01 settled = %d, want 3 (p05, p06, p08)", n)
	}
}

// sameRev reports whether two revisions are the same stored version.
func sameRev(a, b ledger.Revision) bool { return a.Version == b.Version && a.Stamp.Equal(b.Stamp) }

// testOperationRevision pins ledger.Revision for an operation: every write
// to it, whichever method makes it (the effect mirror of a seize or release
// too), sets Version to one more, so Version counts its writes; a write
// that returns a revision returns the one a read then gives; completing the
// claim does not write the operation.
func testOperationRevision(t *testing.T, s ledger.Ledger) {
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
func testClaimRevision(t *testing.T, s ledger.Ledger) {
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
func testMirrorFences(t *testing.T, s ledger.Ledger) {
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
func testScheduleNoNext(t *testing.T, s ledger.Ledger) {
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
		t.Fatalf("due with no check scheduled = %v, want none", ids(due))
	}
	if _, err := s.ScheduleCheck(t.Context(), got, t0.Add(time.Minute), "ok", t0); err != nil {
		t.Fatal(err)
	}
	if due, err = s.DueOperations(t.Context(), shard.All(), t0.Add(24*time.Hour), ledger.DueCursor{}, 10); err != nil || !same(ids(due), []string{id}) {
		t.Fatalf("due after scheduling again = %v, %v; want [%s]", ids(due), err, id)
	}
}

// testEmptyLists: an operation's lists (history, conflicts, replays) carry
// no difference between absent and empty: an empty or nil one reads back
// as nil, on the create and the update path, on every store.
func testEmptyLists(t *testing.T, s ledger.Ledger) {
	const id = "n1"
	check := func(step string) ledger.Operation {
		t.Helper()
		got := mustGet(t, s, id)
		if got.History != nil || got.Conflicts != nil || got.Replays != nil {
			t.Fatalf("after %s: history %#v, conflicts %#v, replays %#v; want all nil", step, got.History, got.Conflicts, got.Replays)
		}
		return got
	}
	op := Op(id)
	op.History, op.Conflicts, op.Replays = nil, []ledger.HistoryEntry{}, []ledger.Replay{}
	mustCommit(t, s, op, nil)
	got := check("create")
	got.History, got.Conflicts, got.Replays = []ledger.HistoryEntry{}, nil, []ledger.Replay{}
	mustCommit(t, s, got, nil)
	check("update")
}

// testSearchOperations pins the console's name search: exact and prefix
// matches by canonical name, in name order, bounded by limit, with ids as
// opname.DocID makes them ("/" escaped), so a name with "%" or a prefix
// that ends mid-escape finds exactly what it should.
func testSearchOperations(t *testing.T, s ledger.Ledger) {
	names := []string{"batches/batch_12", "batches/batch_123", "batches/batch_2", "batches/b%25x", "operations/batch_1", "interactions/v1_a"}
	for _, n := range names {
		op := Op("x")
		id, err := opname.DocID(opname.KeyPrefix + n)
		if err != nil {
			t.Fatal(err)
		}
		op.ID, op.Name, op.APIName = id, n, n
		mustCommit(t, s, op, nil)
	}
	for _, c := range []struct {
		prefix string
		limit  int
		want   []string
	}{
		{"batches/batch_1", 10, []string{"batches/batch_12", "batches/batch_123"}},
		{"batches/batch_123", 10, []string{"batches/batch_123"}},
		{"batches/", 2, []string{"batches/b%25x", "batches/batch_12"}},
		{"batches/b%", 10, []string{"batches/b%25x"}},
		{"batches/batch_1234", 10, nil},
		{"operations/", 10, []string{"operations/batch_1"}},
		{"", 0, nil},
	} {
		ops, err := s.SearchOperations(t.Context(), c.prefix, c.limit)
		if err != nil {
			t.Fatalf("search %q: %v", c.prefix, err)
		}
		var got []string
		for _, o := range ops {
			got = append(got, o.Name)
		}
		if !slices.Equal(got, c.want) {
			t.Fatalf("search %q limit %d: %v, want %v", c.prefix, c.limit, got, c.want)
		}
	}
}
