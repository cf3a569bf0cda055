// Package ledgertest is the storage-semantics suite every ledger adapter
// must pass: documents round-trip, every write's precondition
// (create-if-absent, update-if-revision), the mirror patch, atomic Apply
// calls (one failed precondition writes nothing), the indexed queries, and
// fencing under concurrency. It knows no lease: the claim protocol has its
// own suite (package claims/claimstest).
package ledgertest

import (
	"context"
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
		"GetMissing":                 testGetMissing,
		"CreateAndRead":              testCreateAndRead,
		"CreateTwiceConflicts":       testCreateTwice,
		"StaleRevisionConflicts":     testStaleRevision,
		"ClaimCreatedAtomically":     testClaimAtomic,
		"ExistingClaimBlocksCommit":  testExistingClaim,
		"ConcurrentCommitsOneWins":   testConcurrentCommits,
		"TimesKeepMicroseconds":      testTimePrecision,
		"DueOperations":              testDueOperations,
		"CountDue":                   testCountDue,
		"StuckOperations":            testStuckOperations,
		"DueClaims":                  testDueClaims,
		"ListOperations":             testListOperations,
		"PageOperations":             testPageOperations,
		"SearchOperations":           testSearchOperations,
		"FreeFormValuesRoundTrip":    testFreeForm,
		"EmptyListsReadAsNil":        testEmptyLists,
		"NumbersRoundTripExactly":    testNumbersExact,
		"DeliveryLogBoundedApart":    testDeliveryLog,
		"DeliveryBatch":              testDeliveryBatch,
		"DeliveryTraffic":            testDeliveryTraffic,
		"CountPendingAndDue":         testCounts,
		"ClaimPreconditions":         testClaimPreconditions,
		"MirrorPatch":                testMirrorPatch,
		"AtomicApply":                testAtomicApply,
		"RefusedCalls":               testRefusedCalls,
		"ConcurrentClaimPutsOneWins": testConcurrentClaimPuts,
		"ClaimMessageFixedAtCreate":  testClaimMessageFixed,
		"RangedQueries":              testRangedQueries,
		"SchedulePatch":              testSchedulePatch,
		"LimitZeroReadsNothing":      testLimitZero,
		"IntentCreateIfAbsent":       testIntentCreateIfAbsent,
		"IntentFencedUpdate":         testIntentFencedUpdate,
		"IntentAtomicWithOperation":  testIntentAtomicWithOperation,
		"IntentQueries":              testIntentQueries,
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, newStore(t))
		})
	}
}

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 123456000, time.UTC)

// T0 is the suites' clock: every fixture's times are near it.
var T0 = t0

// Far is the expiry the tests that are not about it give seized and
// released claims.
var Far = far

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

// commit puts op and creates c (if not nil) in one Apply: the writes of a
// state change that settles an operation.
func commit(ctx context.Context, s ledger.Writes, op ledger.Operation, c *ledger.Claim) ([]ledger.Revision, error) {
	writes := []ledger.Write{ledger.PutOperation(op)}
	if c != nil {
		writes = append(writes, ledger.PutClaim(*c))
	}
	return s.Apply(ctx, writes...)
}

// mustCommit is commit that must succeed; it returns the operation's new
// revision and, with a claim, the claim's.
func mustCommit(t *testing.T, s ledger.Writes, op ledger.Operation, c *ledger.Claim) (ledger.Revision, *ledger.Revision) {
	t.Helper()
	revs, err := commit(t.Context(), s, op, c)
	if err != nil {
		t.Fatalf("commit %s: %v", op.ID, err)
	}
	if c == nil {
		return revs[0], nil
	}
	return revs[0], &revs[1]
}

// MustGet reads operation id, which must exist.
func MustGet(t *testing.T, s ledger.Reads, id string) ledger.Operation {
	t.Helper()
	return mustGet(t, s, id)
}

func mustGet(t *testing.T, s ledger.Reads, id string) ledger.Operation {
	t.Helper()
	op, err := s.GetOperation(t.Context(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return op
}

// Terminal returns op moved to SUCCEEDED with its effect mirror held.
func Terminal(op ledger.Operation, leaseUntil time.Time) ledger.Operation {
	return terminal(op, leaseUntil)
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
	if _, err := commit(t.Context(), s, Op("a2"), nil); !errors.Is(err, ledger.ErrConflict) {
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
	if _, err := commit(t.Context(), s, second, nil); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("commit at stale revision = %v, want ErrConflict", err)
	}
	if got := mustGet(t, s, "a3"); got.State != lifecycle.Running || got.Rev.Version != 2 {
		t.Fatalf("stale commit changed the store: %+v", got)
	}
}

func testClaimAtomic(t *testing.T, s ledger.Ledger) {
	mustCommit(t, s, Op("a4"), nil)
	op := terminal(mustGet(t, s, "a4"), t0.Add(time.Minute))
	_, crev := mustCommit(t, s, op, Claim("a4", "h1", t0.Add(time.Minute)))
	if crev == nil || crev.Version != ledger.FirstVersion {
		t.Fatalf("claim revision %+v, want version 1", crev)
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
	if _, err := commit(t.Context(), s, other, Claim("a5", "h2", t0)); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("commit with an existing claim = %v, want ErrConflict", err)
	}
	if got := mustGet(t, s, "a5"); got.SettledBy != "webhook" || got.Rev.Version != 2 {
		t.Fatalf("operation changed by a failed commit: %+v", got)
	}
	if c, _ := s.GetClaim(t.Context(), "a5"); c.Holder != "h1" {
		t.Fatalf("claim changed by a failed commit: %+v", c)
	}
}

// exactlyOneWins runs write n times at once and requires exactly one
// success; every other attempt must fail with the fencing error lost.
// ExactlyOneWins runs write(i) for 8 racing writers and fails t unless
// exactly one succeeds and every other fails with lost.
func ExactlyOneWins(t *testing.T, what string, lost error, write func(i int) error) {
	t.Helper()
	exactlyOneWins(t, what, lost, write)
}

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
		_, err := commit(t.Context(), s, op, Claim("a9", fmt.Sprint("h", i), t0.Add(time.Minute)))
		return err
	})
	if got := mustGet(t, s, "a9"); got.Rev.Version != 2 {
		t.Fatalf("version %d, want 2", got.Rev.Version)
	}
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

// IDs returns the operations' ids, in order.
func IDs(ops []ledger.Operation) []string { return ids(ops) }

// Same reports whether two id lists are equal.
func Same(a, b []string) bool { return same(a, b) }

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
	s1.StuckAlertedAt, s1.StuckFrom = t0, t0.Add(-5*time.Hour) // an alert
	mustCommit(t, s, s1, nil)
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
	settled(t, s, "c1", "h1", t0.Add(time.Minute)) // lease ends at +1m
	c2 := settled(t, s, "c2", "h2", t0.Add(time.Hour))
	c2.Status, c2.Holder, c2.LeaseUntil = ledger.ClaimReleased, "", t0.Add(30*time.Second) // released at +30s
	mustApply(t, s, ledger.PutClaim(c2))
	c3 := settled(t, s, "c3", "h3", t0)
	c3.Status, c3.DoneAt = ledger.ClaimDone, t0 // DONE: never due
	mustApply(t, s, ledger.PutClaim(c3))
	settled(t, s, "c4", "h4", t0.Add(time.Hour))   // live
	settled(t, s, "c0", "h0", t0.Add(time.Minute)) // lease ends with c1's: ordered by id
	now := t0.Add(2 * time.Minute)
	page := func(after ledger.ClaimCursor, limit int) []ledger.Claim {
		t.Helper()
		got, err := s.DueClaims(t.Context(), now, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	claimIDs := func(cs []ledger.Claim) []string {
		out := []string{}
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	all := page(ledger.ClaimCursor{}, 10)
	if ids := claimIDs(all); !same(ids, []string{"c2", "c0", "c1"}) {
		t.Fatalf("due claims = %v, want [c2 c0 c1]", ids)
	}
	// Paged: each page starts strictly after the last claim of the one
	// before, a tie in the lease's end broken by id; the count is of what
	// is after the cursor.
	for i, want := range [][]string{{"c2", "c0"}, {"c1"}} {
		after := ledger.ClaimCursor{}
		if i > 0 {
			after = ledger.ClaimAfter(all[1])
		}
		if ids := claimIDs(page(after, 2)); !same(ids, want) {
			t.Errorf("page %d = %v, want %v", i, ids, want)
		}
	}
	for i, want := range []int64{2, 1, 0} {
		n, err := s.CountDueClaims(t.Context(), now, ledger.ClaimAfter(all[i]))
		if err != nil || n != want {
			t.Errorf("CountDueClaims after %s = %d, %v; want %d", all[i].ID, n, err, want)
		}
	}
	if n, err := s.CountDueClaims(t.Context(), now, ledger.ClaimCursor{}); err != nil || n != 3 {
		t.Errorf("CountDueClaims from the start = %d, %v; want 3", n, err)
	}
}

// testLimitZero: a query with a limit of 0 reads nothing on every store
// (Firestore takes Limit(0) for no limit at all: an unbounded read of a
// whole collection).
func testLimitZero(t *testing.T, s ledger.Ledger) {
	for i, id := range []string{"z1", "z2"} {
		op := Op(id)
		op.SubmittedAt = t0.Add(time.Duration(i-10) * time.Hour)
		mustCommit(t, s, op, nil)
	}
	settled(t, s, "z3", "h3", t0.Add(time.Minute))
	ctx := t.Context()
	due, err1 := s.DueOperations(ctx, shard.All(), far, ledger.DueCursor{}, 0)
	stuck, err2 := s.StuckOperations(ctx, shard.All(), far, 0)
	claims, err3 := s.DueClaims(ctx, far, ledger.ClaimCursor{}, 0)
	list, err4 := s.ListOperations(ctx, "", 0)
	page, err5 := s.PageOperations(ctx, ledger.Filter{}, ledger.ListCursor{}, 0)
	found, err6 := s.SearchOperations(ctx, "", "", 0)
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		t.Fatal(err)
	}
	if n := len(due) + len(stuck) + len(claims) + len(list) + len(page) + len(found); n != 0 {
		t.Fatalf("limit 0 read %d due, %d stuck, %d claims, %d listed, %d paged, %d found; want none",
			len(due), len(stuck), len(claims), len(list), len(page), len(found))
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

// CheckFree fails t unless got is want as the store keeps it (Normalized).
func CheckFree(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	checkFree(t, what, got, want)
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
// matches by canonical name, in name order, bounded by limit, read on
// strictly after a cursor, with ids as opname.DocID makes them ("/"
// escaped), so a name with "%" or a prefix that ends mid-escape finds
// exactly what it should.
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
	id := func(name string) string {
		id, err := opname.DocID(opname.KeyPrefix + name)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	for _, c := range []struct {
		prefix, after string
		limit         int
		want          []string
	}{
		{"batches/batch_1", "", 10, []string{"batches/batch_12", "batches/batch_123"}},
		{"batches/batch_123", "", 10, []string{"batches/batch_123"}},
		{"batches/", "", 2, []string{"batches/b%25x", "batches/batch_12"}},
		{"batches/b%", "", 10, []string{"batches/b%25x"}},
		{"batches/batch_1234", "", 10, nil},
		{"operations/", "", 10, []string{"operations/batch_1"}},
		{"", "", 0, nil},
		// Reading on: strictly after the last id read, within the range.
		{"batches/", id("batches/batch_12"), 2, []string{"batches/batch_123", "batches/batch_2"}},
		{"batches/", id("batches/batch_2"), 2, nil},
		{"batches/batch_1", id("batches/b%25x"), 10, []string{"batches/batch_12", "batches/batch_123"}},
		{"batches/", id("operations/batch_1"), 10, nil},
	} {
		ops, err := s.SearchOperations(t.Context(), c.prefix, c.after, c.limit)
		if err != nil {
			t.Fatalf("search %q after %q: %v", c.prefix, c.after, err)
		}
		var got []string
		for _, o := range ops {
			got = append(got, o.Name)
		}
		if !slices.Equal(got, c.want) {
			t.Fatalf("search %q after %q limit %d: %v, want %v", c.prefix, c.after, c.limit, got, c.want)
		}
	}
}

// settled commits operation id settled with a claim held by holder, and
// returns the claim as read.
func settled(t *testing.T, s ledger.Ledger, id, holder string, leaseUntil time.Time) ledger.Claim {
	t.Helper()
	mustCommit(t, s, Op(id), nil)
	mustCommit(t, s, terminal(mustGet(t, s, id), leaseUntil), Claim(id, holder, leaseUntil))
	c, err := s.GetClaim(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustApply(t *testing.T, s ledger.Writes, writes ...ledger.Write) []ledger.Revision {
	t.Helper()
	revs, err := s.Apply(t.Context(), writes...)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return revs
}

// testClaimPreconditions: a claim is created only if absent and updated
// only at the revision read; a failed write changes nothing; each put sets
// Version to one more.
func testClaimPreconditions(t *testing.T, s ledger.Ledger) {
	c := settled(t, s, "p1", "h1", t0.Add(time.Minute))
	if c.Rev.Version != ledger.FirstVersion {
		t.Fatalf("created claim at version %d, want 1", c.Rev.Version)
	}
	again := *Claim("p1", "h2", t0)
	if _, err := s.Apply(t.Context(), ledger.PutClaim(again)); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("second create of a claim = %v, want ErrConflict", err)
	}
	next := c
	next.Holder, next.Attempts = "h2", 2
	revs := mustApply(t, s, ledger.PutClaim(next))
	got, err := s.GetClaim(t.Context(), "p1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Holder != "h2" || got.Attempts != 2 || got.Rev.Version != 2 || revs[0].Version != 2 || !revs[0].Stamp.Equal(got.Rev.Stamp) {
		t.Fatalf("after a put at the revision read: %+v (returned %+v)", got, revs[0])
	}
	stale := c // still at version 1
	stale.Holder = "h3"
	if _, err := s.Apply(t.Context(), ledger.PutClaim(stale)); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("put of a claim at a stale revision = %v, want ErrConflict", err)
	}
	gone := *Claim("p-none", "h", t0)
	gone.Rev = got.Rev
	if _, err := s.Apply(t.Context(), ledger.PutClaim(gone)); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("update of a missing claim = %v, want ErrConflict", err)
	}
	if got, _ := s.GetClaim(t.Context(), "p1"); got.Holder != "h2" || got.Rev.Version != 2 {
		t.Fatalf("a failed put changed the claim: %+v", got)
	}
}

// testClaimMessageFixed: a put of an existing claim writes every field
// but the message, which stays as created (ledger.PutClaim), whether the
// put carries another message, none, or one no store could encode.
func testClaimMessageFixed(t *testing.T, s ledger.Ledger) {
	c := settled(t, s, "mf1", "h1", t0.Add(time.Minute))
	want := c.Message
	for i, m := range []results.Message{
		{Operation: "batches/other", State: "FAILED", IdempotencyKey: "gemini:batches/other"},
		{},
		{Operation: "batches/mf1", Output: map[string]any{"bad": func() {}}},
	} {
		next, err := s.GetClaim(t.Context(), "mf1")
		if err != nil {
			t.Fatal(err)
		}
		next.Holder, next.Attempts, next.Message = fmt.Sprint("h", i+2), i+2, m
		mustApply(t, s, ledger.PutClaim(next))
		got, err := s.GetClaim(t.Context(), "mf1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Holder != next.Holder || got.Attempts != next.Attempts {
			t.Fatalf("put %d did not write the claim's other fields: %+v", i, got)
		}
		if !reflect.DeepEqual(got.Message, want) {
			t.Fatalf("put %d changed the message:\n got %+v\nwant %+v", i, got.Message, want)
		}
	}
}

// testMirrorPatch: the mirror patch sets the operation's effect mirror and
// bumps its version in place, whatever revision the writer read, and
// changes nothing else; on a missing operation it is a failed
// precondition.
func testMirrorPatch(t *testing.T, s ledger.Ledger) {
	mustCommit(t, s, Op("m1"), nil)
	before := mustGet(t, s, "m1")
	revs := mustApply(t, s, ledger.PatchMirror("m1", ledger.EffectMirror{Status: ledger.ClaimReleased, LeaseUntil: t0}))
	if revs[0].Exists() {
		t.Fatalf("a mirror returned revision %+v, want the zero revision", revs[0])
	}
	got := mustGet(t, s, "m1")
	if got.Rev.Version != before.Rev.Version+1 || got.Effect.Status != ledger.ClaimReleased || !got.Effect.LeaseUntil.Equal(t0) {
		t.Fatalf("after the mirror patch: version %d effect %+v; want version %d, RELEASED until %v", got.Rev.Version, got.Effect, before.Rev.Version+1, t0)
	}
	got.Rev, got.Effect = before.Rev, before.Effect
	if !reflect.DeepEqual(got, before) {
		t.Fatalf("the mirror patch changed more than the mirror:\n got %+v\nwant %+v", got, before)
	}
	// The patch moved the fence: a put from the read before it fails.
	if _, err := commit(t.Context(), s, before, nil); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("put from a read before the mirror patch = %v, want ErrConflict", err)
	}
	if _, err := s.Apply(t.Context(), ledger.PatchMirror("m-none", ledger.EffectMirror{Status: ledger.ClaimDone})); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("mirror patch of a missing operation = %v, want ErrConflict", err)
	}
	if _, err := s.GetOperation(t.Context(), "m-none"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("a mirror patch created operation m-none: %v", err)
	}
}

// testAtomicApply: the writes of one call commit all or none. A call whose
// last write is fenced out writes none of the others, whichever kind
// they are.
func testAtomicApply(t *testing.T, s ledger.Ledger) {
	c := settled(t, s, "x1", "h1", t0.Add(time.Minute))
	op := mustGet(t, s, "x1")
	mustCommit(t, s, Op("x2"), nil)
	x2 := mustGet(t, s, "x2")
	x2.State = lifecycle.Running
	stale := c
	stale.Rev = ledger.Revision{Version: 9, Stamp: t0}
	moved := c
	moved.Holder = "h2"
	for name, writes := range map[string][]ledger.Write{
		"stale claim last": {ledger.PutOperation(x2), ledger.PatchMirror("x1", ledger.EffectMirror{Status: ledger.ClaimDone}), ledger.PutClaim(stale)},
		"missing mirror":   {ledger.PutClaim(moved), ledger.PatchMirror("x-none", ledger.EffectMirror{Status: ledger.ClaimDone})},
		"created exists":   {ledger.PutOperation(x2), ledger.PutClaim(*Claim("x1", "h3", t0))},
	} {
		if _, err := s.Apply(t.Context(), writes...); !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("%s: Apply = %v, want ErrConflict", name, err)
		}
		if got := mustGet(t, s, "x2"); got.State != lifecycle.Pending || got.Rev.Version != x2.Rev.Version {
			t.Fatalf("%s: a failed call wrote operation x2: %+v", name, got)
		}
		if got := mustGet(t, s, "x1"); got.Rev.Version != op.Rev.Version || got.Effect != op.Effect {
			t.Fatalf("%s: a failed call wrote operation x1: %+v", name, got)
		}
		if got, _ := s.GetClaim(t.Context(), "x1"); got.Holder != "h1" || got.Rev.Version != c.Rev.Version {
			t.Fatalf("%s: a failed call wrote claim x1: %+v", name, got)
		}
	}
	// And one whose preconditions all hold writes every document.
	moved.Status = ledger.ClaimDone
	revs := mustApply(t, s, ledger.PutOperation(x2), ledger.PutClaim(moved), ledger.PatchMirror("x1", ledger.EffectMirror{Status: ledger.ClaimDone}))
	if revs[0].Version != x2.Rev.Version+1 || revs[1].Version != c.Rev.Version+1 {
		t.Fatalf("revisions %+v", revs)
	}
	if got := mustGet(t, s, "x1"); got.Effect.Status != ledger.ClaimDone || got.Rev.Version != op.Rev.Version+1 {
		t.Fatalf("operation x1 after the call: %+v", got)
	}
}

// testRefusedCalls: a call no store accepts (no write, an empty write, two
// writes of one document) fails before anything is written.
func testRefusedCalls(t *testing.T, s ledger.Ledger) {
	mustCommit(t, s, Op("w1"), nil)
	op := mustGet(t, s, "w1")
	for name, writes := range map[string][]ledger.Write{
		"none":      nil,
		"empty":     {{}},
		"two kinds": {{Op: &op, Claim: Claim("w1", "h", t0)}},
		"twice":     {ledger.PutOperation(op), ledger.PatchMirror("w1", ledger.EffectMirror{Status: ledger.ClaimDone})},
	} {
		if _, err := s.Apply(t.Context(), writes...); err == nil || errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("%s: Apply = %v, want a refusal (not a conflict)", name, err)
		}
	}
	if got := mustGet(t, s, "w1"); got.Rev.Version != op.Rev.Version {
		t.Fatalf("a refused call wrote: %+v", got)
	}
}

// testConcurrentClaimPuts: racing puts of one claim from one read: exactly
// one wins, the others are fenced out.
func testConcurrentClaimPuts(t *testing.T, s ledger.Ledger) {
	c := settled(t, s, "q1", "h0", t0)
	exactlyOneWins(t, "claim puts from one read", ledger.ErrConflict, func(i int) error {
		next := c
		next.Holder = fmt.Sprint("h", i+1)
		_, err := s.Apply(t.Context(), ledger.PutClaim(next), ledger.PatchMirror("q1", ledger.EffectMirror{Status: ledger.ClaimHeld, LeaseUntil: t0}))
		return err
	})
	if got, _ := s.GetClaim(t.Context(), "q1"); got.Rev.Version != 2 {
		t.Fatalf("claim version %d after the race, want 2", got.Rev.Version)
	}
}

// testSchedulePatch: the schedule patch writes the reconciler's fields
// only, at the revision read (from a write it did not read, too), and keeps
// every other field as stored; at a stale revision it is a conflict.
func testSchedulePatch(t *testing.T, s ledger.Ledger) {
	mustCommit(t, s, Op("sp1"), nil)
	read := mustGet(t, s, "sp1")
	moved := read
	moved.State, moved.GeminiStatus = lifecycle.Running, "JOB_STATE_RUNNING"
	rev, _ := mustCommit(t, s, moved, nil)
	sched := read // the fields as first read, at the revision written since
	sched.Rev = rev
	sched.NextCheckAt, sched.Checks, sched.LastCheck, sched.LastCheckAt = t0.Add(time.Hour), 3, "not-found", t0
	sched.StuckAlertedAt, sched.StuckFrom = t0, t0.Add(-time.Hour)
	revs := mustApply(t, s, ledger.PatchSchedule(sched))
	got := mustGet(t, s, "sp1")
	if !sameRevision(revs[0], got.Rev) || got.Rev.Version != rev.Version+1 {
		t.Fatalf("returned %+v, read %+v; want version %d", revs[0], got.Rev, rev.Version+1)
	}
	if got.State != lifecycle.Running || got.GeminiStatus != "JOB_STATE_RUNNING" {
		t.Fatalf("the schedule patch wrote more than its fields: state %s, gemini status %q", got.State, got.GeminiStatus)
	}
	if !got.NextCheckAt.Equal(t0.Add(time.Hour)) || got.Checks != 3 || got.LastCheck != "not-found" || !got.LastCheckAt.Equal(t0) ||
		!got.StuckAlertedAt.Equal(t0) || !got.StuckFrom.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("after the schedule patch: %+v", got)
	}
	// No next check: the field reads back zero and the operation is not due.
	unscheduled := got
	unscheduled.NextCheckAt = time.Time{}
	mustApply(t, s, ledger.PatchSchedule(unscheduled))
	if due, err := s.DueOperations(t.Context(), shard.All(), t0.Add(48*time.Hour), ledger.DueCursor{}, 10); err != nil || len(due) != 0 {
		t.Fatalf("due after a schedule without a next check = %v, %v", ids(due), err)
	}
	if _, err := s.Apply(t.Context(), ledger.PatchSchedule(sched)); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("schedule patch at a stale revision = %v, want ErrConflict", err)
	}
	missing := Op("sp-none")
	missing.Rev = got.Rev
	if _, err := s.Apply(t.Context(), ledger.PatchSchedule(missing)); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("schedule patch of a missing operation = %v, want ErrConflict", err)
	}
}

func sameRevision(a, b ledger.Revision) bool { return a.Version == b.Version && a.Stamp.Equal(b.Stamp) }
