package ledgertest

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
)

// Intent returns an unbound batch intent recorded at created.
func Intent(key string, created time.Time) ledger.Intent {
	return ledger.Intent{Key: key, Kind: "batch", Model: "models/gemini-2.5-flash", DisplayName: "lrosink-" + key,
		Metadata:  map[string]any{"team": "data", "job_id": json.Number("12345678901234567890123")},
		CreatedAt: created}
}

// Bind returns in bound to the batch operation id (Op(id)'s name) at at.
func Bind(in ledger.Intent, id string, at time.Time) ledger.Intent {
	in.Name, in.APIName, in.BoundAt, in.BoundBy = "batches/"+id, "batches/"+id, at, "submit"
	return in
}

func mustGetIntent(t *testing.T, s ledger.Reads, key string) ledger.Intent {
	t.Helper()
	in, err := s.GetIntent(t.Context(), key)
	if err != nil {
		t.Fatalf("get intent %s: %v", key, err)
	}
	return in
}

// keys lists the intents' keys in order.
func keys(ins []ledger.Intent) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.Key
	}
	return out
}

// testIntentCreateIfAbsent: an intent is created only if absent, reads back
// exactly (metadata numbers as their literal, times at the stored
// precision), and a second create of its key conflicts, writing nothing.
func testIntentCreateIfAbsent(t *testing.T, s ledger.Ledger) {
	ctx := t.Context()
	if _, err := s.GetIntent(ctx, "in-1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("missing intent: %v, want ErrNotFound", err)
	}
	in := Intent("in-1", t0)
	in.Metadata["nested"] = map[string]any{"list": []any{json.Number("1.50"), "x", nil}}
	revs := mustApply(t, s, ledger.PutIntent(in))
	if revs[0].Version != ledger.FirstVersion {
		t.Fatalf("created intent at version %d, want %d", revs[0].Version, ledger.FirstVersion)
	}
	got := mustGetIntent(t, s, "in-1")
	if !sameRevision(got.Rev, revs[0]) {
		t.Fatalf("read revision %+v, Apply answered %+v", got.Rev, revs[0])
	}
	want := ledger.StoredIntent(in)
	want.Rev, want.Metadata, got.Metadata = got.Rev, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back\n %+v\nwant\n %+v", got, want)
	}
	checkText(t, "intent metadata", mustGetIntent(t, s, "in-1").Metadata,
		`{"job_id":12345678901234567890123,"nested":{"list":[1.50,"x",null]},"team":"data"}`)
	other := Intent("in-1", t0.Add(time.Hour))
	other.Model = "models/other"
	if _, err := s.Apply(ctx, ledger.PutIntent(other)); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("second create of in-1: %v, want ErrConflict", err)
	}
	if again := mustGetIntent(t, s, "in-1"); again.Model != in.Model || !sameRevision(again.Rev, revs[0]) {
		t.Fatalf("a refused create changed the intent: %+v", again)
	}
	// A key that is not a safe document id as it is (".", "__x__") is
	// kept under its own key all the same.
	for _, k := range []string{".", "..", "__x__", "a:b.c-d_e"} {
		mustApply(t, s, ledger.PutIntent(Intent(k, t0)))
		if got := mustGetIntent(t, s, k); got.Key != k {
			t.Fatalf("intent %q read back as %q", k, got.Key)
		}
	}
}

// testIntentFencedUpdate: an intent is updated only at the revision read;
// every update moves it.
func testIntentFencedUpdate(t *testing.T, s ledger.Ledger) {
	ctx := t.Context()
	mustApply(t, s, ledger.PutIntent(Intent("in-f", t0)))
	read := mustGetIntent(t, s, "in-f")
	alerted := read
	alerted.AlertedAt, alerted.AlertFrom = t0.Add(2*time.Hour), t0.Add(time.Hour)
	rev := mustApply(t, s, ledger.PutIntent(alerted))[0]
	if rev.Version != read.Rev.Version+1 {
		t.Fatalf("update at version %d, want %d", rev.Version, read.Rev.Version+1)
	}
	stale := Bind(read, "x", t0) // decided from the first read
	if _, err := s.Apply(ctx, ledger.PutIntent(stale)); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("update at a stale revision: %v, want ErrConflict", err)
	}
	got := mustGetIntent(t, s, "in-f")
	if got.Bound() || !got.AlertedAt.Equal(ledger.StoredTime(alerted.AlertedAt)) || !got.AlertFrom.Equal(ledger.StoredTime(alerted.AlertFrom)) {
		t.Fatalf("after a refused update: %+v", got)
	}
	bound := Bind(got, "x", t0.Add(3*time.Hour))
	mustApply(t, s, ledger.PutIntent(bound))
	if got := mustGetIntent(t, s, "in-f"); !got.Bound() || got.Name != "batches/x" || got.BoundBy != "submit" || !got.AlertFrom.IsZero() {
		t.Fatalf("bound intent read back %+v (a bound intent has no alert key)", got)
	}
}

// testIntentAtomicWithOperation: a bind is one Apply of the operation (which
// names its intent) and the intent; a failed precondition on either writes
// neither.
func testIntentAtomicWithOperation(t *testing.T, s ledger.Ledger) {
	ctx := t.Context()
	mustApply(t, s, ledger.PutIntent(Intent("in-a", t0)))
	in := mustGetIntent(t, s, "in-a")

	// The operation exists already: its create fails, so the bind does too.
	mustCommit(t, s, Op("taken"), nil)
	op := Op("taken")
	op.Intent = "in-a"
	if _, err := s.Apply(ctx, ledger.PutOperation(op), ledger.PutIntent(Bind(in, "taken", t0))); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("bind with a create of an existing operation: %v, want ErrConflict", err)
	}
	if got := mustGetIntent(t, s, "in-a"); got.Bound() || !sameRevision(got.Rev, in.Rev) {
		t.Fatalf("the intent changed in a failed bind: %+v", got)
	}
	// The intent changed since it was read: the operation is not created.
	moved := in
	moved.AlertedAt = t0.Add(time.Hour)
	mustApply(t, s, ledger.PutIntent(moved))
	op = Op("fresh")
	op.Intent = "in-a"
	if _, err := s.Apply(ctx, ledger.PutOperation(op), ledger.PutIntent(Bind(in, "fresh", t0))); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("bind with a stale intent: %v, want ErrConflict", err)
	}
	if _, err := s.GetOperation(ctx, "fresh"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("a failed bind created its operation: %v", err)
	}
	// Both current: both written.
	in = mustGetIntent(t, s, "in-a")
	revs := mustApply(t, s, ledger.PutOperation(op), ledger.PutIntent(Bind(in, "fresh", t0.Add(time.Minute))))
	if revs[0].Version != ledger.FirstVersion || revs[1].Version != in.Rev.Version+1 {
		t.Fatalf("bind revisions %+v", revs)
	}
	if got := mustGet(t, s, "fresh"); got.Intent != "in-a" {
		t.Fatalf("operation's intent %q, want in-a", got.Intent)
	}
	if got := mustGetIntent(t, s, "in-a"); got.Name != "batches/fresh" {
		t.Fatalf("bound intent %+v", got)
	}
	// A whole put keeps what the operation says of its intent.
	next := mustGet(t, s, "fresh")
	next.Checks++
	mustApply(t, s, ledger.PutOperation(next))
	if got := mustGet(t, s, "fresh"); got.Intent != "in-a" {
		t.Fatalf("after a put: intent %q", got.Intent)
	}
}

// testIntentQueries: the unbound listing (recorded at or before a cutoff,
// (created, key) order, paged, counted) and the alert scan (alert key at or
// before a cutoff, in its order); bound intents are in neither.
func testIntentQueries(t *testing.T, s ledger.Ledger) {
	ctx := t.Context()
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for i, k := range []string{"q-c", "q-a", "q-b", "q-d", "q-e"} {
		mustApply(t, s, ledger.PutIntent(Intent(k, at([]int{1, 1, 2, 3, 10}[i]))))
	}
	// q-d is bound; q-a was alerted, its next alert due from minute 20.
	mustApply(t, s, ledger.PutIntent(Bind(mustGetIntent(t, s, "q-d"), "d", at(4))))
	a := mustGetIntent(t, s, "q-a")
	a.AlertedAt, a.AlertFrom = at(5), at(20)
	mustApply(t, s, ledger.PutIntent(a))

	list := func(before time.Time, after ledger.IntentCursor, limit int) []string {
		t.Helper()
		ins, err := s.UnboundIntents(ctx, before, after, limit)
		if err != nil {
			t.Fatalf("unbound intents: %v", err)
		}
		return keys(ins)
	}
	if got, want := list(at(3), ledger.IntentCursor{}, 10), []string{"q-a", "q-c", "q-b"}; !same(got, want) {
		t.Fatalf("unbound by minute 3: %v, want %v", got, want)
	}
	first, err := s.UnboundIntents(ctx, at(60), ledger.IntentCursor{}, 2)
	if err != nil || !same(keys(first), []string{"q-a", "q-c"}) {
		t.Fatalf("first page: %v %v", keys(first), err)
	}
	if got, want := list(at(60), ledger.IntentAfter(first[1]), 2), []string{"q-b", "q-e"}; !same(got, want) {
		t.Fatalf("second page: %v, want %v", got, want)
	}
	for before, want := range map[time.Time]int64{at(0): 0, at(1): 2, at(3): 3, at(60): 4} {
		if n, err := s.CountUnboundIntents(ctx, before); err != nil || n != want {
			t.Errorf("count unbound by %v: %d %v, want %d", before, n, err, want)
		}
	}
	due := func(cutoff time.Time) []string {
		t.Helper()
		ins, err := s.IntentAlertsDue(ctx, cutoff, 10)
		if err != nil {
			t.Fatalf("intent alerts due: %v", err)
		}
		return keys(ins)
	}
	if got, want := due(at(10)), []string{"q-c", "q-b", "q-e"}; !same(got, want) {
		t.Fatalf("alerts due by minute 10: %v, want %v (q-a's next is at 20, q-d is bound)", got, want)
	}
	if got, want := due(at(20)), []string{"q-c", "q-b", "q-e", "q-a"}; !same(got, want) {
		t.Fatalf("alerts due by minute 20: %v, want %v", got, want)
	}
	if ins, err := s.IntentAlertsDue(ctx, at(60), 1); err != nil || !same(keys(ins), []string{"q-c"}) {
		t.Fatalf("alerts due, limit 1: %v %v", keys(ins), err)
	}
	for _, f := range []func() (int, error){
		func() (int, error) {
			ins, err := s.UnboundIntents(ctx, at(60), ledger.IntentCursor{}, 0)
			return len(ins), err
		},
		func() (int, error) { ins, err := s.IntentAlertsDue(ctx, at(60), 0); return len(ins), err },
	} {
		if n, err := f(); err != nil || n != 0 {
			t.Fatalf("a query with limit 0 read %d, %v", n, err)
		}
	}
}

// RunIntentRetention checks what a store deletes of intents, for a store
// keeping settled operations for LongRetention (expire plays its deletion:
// a prune, or Firestore's TTL policy from the stored expire_at): an
// unbound intent never, however old; a bound one IntentKeep +
// LongRetention after its binding, not a moment before.
func RunIntentRetention(t *testing.T, newStore func(*testing.T) ledger.Ledger, expire Expiry) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	mustApply(t, s, ledger.PutIntent(Intent("ir-unbound", t0)))
	mustApply(t, s, ledger.PutIntent(Intent("ir-bound", t0)))
	mustApply(t, s, ledger.PutIntent(Bind(mustGetIntent(t, s, "ir-bound"), "ir", t0.Add(time.Hour))))
	gone := t0.Add(time.Hour + LongRetention + ledger.IntentKeep)
	present := func(when time.Time, want map[string]bool) {
		t.Helper()
		expire(t, s, when)
		for key, kept := range want {
			_, err := s.GetIntent(ctx, key)
			if err != nil && !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("get intent %s: %v", key, err)
			}
			if (err == nil) != kept {
				t.Fatalf("at %v: intent %s kept %v, want %v", when, key, err == nil, kept)
			}
		}
	}
	present(gone.Add(-time.Second), map[string]bool{"ir-unbound": true, "ir-bound": true})
	present(gone, map[string]bool{"ir-unbound": true, "ir-bound": false})
	present(gone.Add(100*LongRetention), map[string]bool{"ir-unbound": true})
}
