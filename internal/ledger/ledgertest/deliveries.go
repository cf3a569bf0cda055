package ledgertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/shard"
)

// testDeliveryLog: an operation's log keeps the newest Keep entries, newest
// first, drops entries older than the TTL before the newest, is apart from
// the operation (its revision does not move), and a missing log is empty.
func testDeliveryLog(t *testing.T, l ledger.Ledger) {
	ctx := t.Context()
	s, ok := l.(deliverylog.Store)
	if !ok {
		t.Fatalf("%T does not implement deliverylog.Store", l)
	}
	rev, _ := mustCommit(t, l, Op("dl"), nil)
	if got, err := s.ListDeliveries(ctx, "dl"); err != nil || len(got) != 0 {
		t.Fatalf("empty log: %v, %v", got, err)
	}
	r := deliverylog.Retention{Keep: 5, TTL: time.Hour}
	old := deliverylog.Entry{At: t0.Add(-2 * time.Hour), Source: "webhook", Outcome: "applied"}
	if err := s.AppendDeliveries(ctx, "dl", []deliverylog.Entry{old}, r); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		var batch []deliverylog.Entry
		for j := range 4 {
			n := i*4 + j
			batch = append(batch, deliverylog.Entry{At: t0.Add(time.Duration(n) * time.Second), Source: "webhook",
				DeliveryID: fmt.Sprintf("msg_%02d", n), Status: "batch.succeeded", Auth: "v1", Outcome: "duplicate",
				Reason: "same-terminal", Answer: 200, Latency: 1234 * time.Microsecond})
		}
		if err := s.AppendDeliveries(ctx, "dl", batch, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ListDeliveries(ctx, "dl")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("kept %d entries, want 5: %+v", len(got), got)
	}
	for i, e := range got {
		want := fmt.Sprintf("msg_%02d", 11-i)
		if e.DeliveryID != want || !e.At.Equal(t0.Add(time.Duration(11-i)*time.Second)) {
			t.Errorf("entry %d = %s at %s, want %s (newest first)", i, e.DeliveryID, e.At, want)
		}
	}
	if e := got[0]; e.Status != "batch.succeeded" || e.Auth != "v1" || e.Outcome != "duplicate" || e.Reason != "same-terminal" ||
		e.Answer != 200 || e.Latency != 1234*time.Microsecond || e.Source != "webhook" {
		t.Errorf("entry did not round-trip: %+v", e)
	}
	// A console action's entry: its actor round-trips too.
	act := deliverylog.Entry{At: t0.Add(time.Minute), Source: deliverylog.SourceConsole, Status: "replay", Actor: "session:0a1b2c3d",
		DeliveryID: "replay-abc", Outcome: "replayed", Latency: time.Millisecond}
	if err := s.AppendDeliveries(ctx, "dl", []deliverylog.Entry{act}, r); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ListDeliveries(ctx, "dl"); err != nil || len(got) == 0 || !got[0].At.Equal(act.At) ||
		got[0].Actor != act.Actor || got[0].Source != act.Source || got[0].DeliveryID != act.DeliveryID || got[0].Status != act.Status {
		t.Errorf("a console entry did not round-trip: %+v, %v", got, err)
	}
	op, err := l.GetOperation(ctx, "dl")
	if err != nil || op.Rev.Version != rev.Version {
		t.Errorf("operation version %d after logging, want %d (the log is not on the operation): %v", op.Rev.Version, rev.Version, err)
	}
	if got, err := s.ListDeliveries(ctx, "other"); err != nil || len(got) != 0 {
		t.Errorf("another operation's log: %v, %v", got, err)
	}
}

// testCounts: CountPending counts every operation not in a terminal state;
// CountDue those whose next check is at or before now.
func testCounts(t *testing.T, l ledger.Ledger) {
	ctx := t.Context()
	c := l
	for i := range 5 {
		op := Op(fmt.Sprintf("p%d", i))
		op.NextCheckAt = t0.Add(time.Duration(i) * time.Minute)
		if i == 4 {
			op.State, op.UpdateTime = lifecycle.Running, t0
		}
		mustCommit(t, l, op, nil)
	}
	done := Op("done")
	done.State, done.UpdateTime, done.NextCheckAt, done.SettledAt, done.SettledBy = lifecycle.Succeeded, t0, time.Time{}, t0, "webhook"
	mustCommit(t, l, done, Claim("done", "h", t0.Add(time.Minute)))
	if n, err := c.CountPending(ctx); err != nil || n != 5 {
		t.Errorf("CountPending = %d, %v; want 5", n, err)
	}
	if n, err := c.CountDue(ctx, shard.All(), t0.Add(2*time.Minute)); err != nil || n != 3 {
		t.Errorf("CountDue(t0+2m) = %d, %v; want 3", n, err)
	}
}

// testDeliveryBatch: deliverylog.AppendBatch (the store's batch, or one
// append per operation) writes every operation's entries, merging with a
// stored log by Merge's rules.
func testDeliveryBatch(t *testing.T, l ledger.Ledger) {
	ctx := t.Context()
	s, ok := l.(deliverylog.Store)
	if !ok {
		t.Fatalf("%T does not implement deliverylog.Store", l)
	}
	r := deliverylog.Retention{Keep: 3, TTL: time.Hour}
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	if err := s.AppendDeliveries(ctx, "b0", []deliverylog.Entry{{At: at(1), DeliveryID: "s1", Outcome: "applied"},
		{At: at(4), DeliveryID: "s4", Outcome: "duplicate"}}, r); err != nil {
		t.Fatal(err)
	}
	batch := []deliverylog.Append{{OpID: "b0", Entries: []deliverylog.Entry{{At: at(3), DeliveryID: "a3", Outcome: "duplicate"},
		{At: at(5), DeliveryID: "a5", Outcome: "duplicate"}}}}
	for i := 1; i < 12; i++ {
		batch = append(batch, deliverylog.Append{OpID: fmt.Sprint("b", i),
			Entries: []deliverylog.Entry{{At: at(i), DeliveryID: fmt.Sprint("n", i), Outcome: "applied"}}})
	}
	if lost, err := deliverylog.AppendBatch(ctx, s, batch, r); err != nil || lost != 0 {
		t.Fatalf("AppendBatch: %d lost, %v", lost, err)
	}
	if ids := DeliveryIDs(t, s, "b0"); fmt.Sprint(ids) != "[a5 s4 a3]" {
		t.Errorf("b0's merged log %v, want [a5 s4 a3]", ids)
	}
	for i := 1; i < 12; i++ {
		got, err := s.ListDeliveries(ctx, fmt.Sprint("b", i))
		if err != nil || len(got) != 1 || got[0].DeliveryID != fmt.Sprint("n", i) {
			t.Errorf("b%d's log %+v, %v", i, got, err)
		}
	}
}

// DeliveryIDs lists opID's delivery log from s and returns its entries'
// delivery ids, newest first as the log keeps them.
func DeliveryIDs(t testing.TB, s deliverylog.Store, opID string) []string {
	t.Helper()
	got, err := s.ListDeliveries(t.Context(), opID)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(got))
	for _, e := range got {
		ids = append(ids, e.DeliveryID)
	}
	return ids
}

// DeliveriesHeld returns what store s still holds of opID's delivery log at
// now: ListDeliveries, except where a TTL policy deletes logs by a stored
// time (Firestore's deliveries.expire_at, which the emulator never runs).
type DeliveriesHeld func(t *testing.T, s deliverylog.Store, opID string, now time.Time) []deliverylog.Entry

// Listed is DeliveriesHeld for a store that deletes expired entries itself
// (SQLite, memory): what ListDeliveries returns.
func Listed(t *testing.T, s deliverylog.Store, opID string, _ time.Time) []deliverylog.Entry {
	t.Helper()
	got, err := s.ListDeliveries(t.Context(), opID)
	if err != nil {
		t.Fatalf("list deliveries %s: %v", opID, err)
	}
	return got
}

// RunDeliveryExpiry checks CONTRACT.md §2's promise for the delivery log
// under sustained appends: an entry older than the TTL does not survive
// later appends, whichever operation it belongs to and however many
// entries each append brings. Every 10 minutes for 4 hours (TTL 1 h) one
// batch logs 180 entries for 12 new operations, and 3 more for an
// operation logged every time (trimmed to Keep); at the end nothing held
// is older than the TTL before the newest entry, and the last hour's
// entries are all held. (SQLite's expiry of at most 100 entries an append
// fell behind: a week's TTL kept entries 19.5 days old.)
func RunDeliveryExpiry(t *testing.T, newStore NewStore, held DeliveriesHeld) {
	t.Parallel()
	l := newStore(t)
	s, ok := l.(deliverylog.Store)
	if !ok {
		t.Fatalf("%T does not implement deliverylog.Store", l)
	}
	const rounds, opsPerRound, perOp, hotPerRound = 24, 12, 15, 3
	r := deliverylog.Retention{Keep: 16, TTL: time.Hour}
	at := func(round, i int) time.Time {
		return t0.Add(time.Duration(round)*10*time.Minute + time.Duration(i)*time.Millisecond)
	}
	entry := func(id string, when time.Time) deliverylog.Entry {
		return deliverylog.Entry{At: when, Source: deliverylog.SourceWebhook, DeliveryID: id, Outcome: "duplicate", Answer: 200}
	}
	var ids []string
	for round := range rounds {
		hot := deliverylog.Append{OpID: "hot"}
		for e := range hotPerRound {
			hot.Entries = append(hot.Entries, entry(fmt.Sprint("hot-", round, "-", e), at(round, e)))
		}
		batch := []deliverylog.Append{hot}
		for o := range opsPerRound {
			id := fmt.Sprintf("r%02d-%02d", round, o)
			ids = append(ids, id)
			a := deliverylog.Append{OpID: id}
			for e := range perOp {
				a.Entries = append(a.Entries, entry(fmt.Sprint(id, "-", e), at(round, hotPerRound+o*perOp+e)))
			}
			batch = append(batch, a)
		}
		if lost, err := deliverylog.AppendBatch(t.Context(), s, batch, r); err != nil || lost != 0 {
			t.Fatalf("round %d: %d operations' appends lost, %v", round, lost, err)
		}
	}
	now := at(rounds-1, hotPerRound+opsPerRound*perOp-1)
	cut := now.Add(-r.TTL)
	old, oldest, live := 0, now, 0
	for _, id := range append(ids, "hot") {
		for _, e := range held(t, s, id, now) {
			if e.At.After(cut) {
				live++
				continue
			}
			old++
			if e.At.Before(oldest) {
				oldest = e.At
			}
		}
	}
	if old > 0 {
		t.Errorf("%d entries older than the TTL survive, the oldest %s before the newest entry (TTL %s)", old, now.Sub(oldest), r.TTL)
	}
	// The last 6 rounds are within the hour: their operations' entries,
	// and the hot operation's newest Keep.
	if want := 6*opsPerRound*perOp + r.Keep; live != want {
		t.Errorf("%d entries of the last hour held, want %d", live, want)
	}
}

// testDeliveryTraffic: WebhookTraffic counts the webhook entries of the
// window by outcome (not reconcile entries, not older ones), says when the
// newest webhook entry arrived even when the window is empty, and says when
// its bound cut the count (what the bound counts is the store's: entries
// on SQLite, logs on Firestore and memory). Entries are appended in time
// order, as the Recorder does.
func testDeliveryTraffic(t *testing.T, l ledger.Ledger) {
	ctx := t.Context()
	s, ok := l.(deliverylog.Store)
	tc, ok2 := l.(deliverylog.TrafficCounter)
	if !ok || !ok2 {
		t.Fatalf("%T does not implement deliverylog.Store and deliverylog.TrafficCounter", l)
	}
	r := deliverylog.Retention{Keep: 50, TTL: 24 * time.Hour}
	since := t0.Add(-time.Hour)
	hook := func(at time.Time, outcome string) deliverylog.Entry {
		return deliverylog.Entry{At: at, Source: deliverylog.SourceWebhook, DeliveryID: "msg", Outcome: outcome, Answer: 200}
	}
	empty, err := tc.WebhookTraffic(ctx, since, 100)
	if err != nil || len(empty.Outcomes) != 0 || !empty.Last.IsZero() || empty.Partial {
		t.Fatalf("an empty log's traffic: %+v, %v", empty, err)
	}
	for _, a := range []struct {
		op      string
		entries []deliverylog.Entry
	}{
		{"old", []deliverylog.Entry{hook(t0.Add(-3*time.Hour), "completed")}},
		{"a", []deliverylog.Entry{hook(t0.Add(-2*time.Hour), "completed"), hook(t0.Add(-50*time.Minute), "completed"),
			{At: t0.Add(-40 * time.Minute), Source: deliverylog.SourceReconcile, Outcome: "unchanged"}}},
		{"a", []deliverylog.Entry{hook(t0.Add(-30*time.Minute), "duplicate"), hook(t0.Add(-20*time.Minute), "duplicate")}},
		{"b", []deliverylog.Entry{hook(t0.Add(-10*time.Minute), "dropped")}},
		{"c", []deliverylog.Entry{{At: t0.Add(-5 * time.Minute), Source: deliverylog.SourceReconcile, Outcome: "unchanged"}}},
	} {
		if err := s.AppendDeliveries(ctx, a.op, a.entries, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := tc.WebhookTraffic(ctx, since, 100)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Outcomes) != "map[completed:1 dropped:1 duplicate:2]" || got.Partial {
		t.Errorf("traffic since %s: %v (partial %v), want map[completed:1 dropped:1 duplicate:2], complete", since, got.Outcomes, got.Partial)
	}
	if want := t0.Add(-10 * time.Minute); !got.Last.Equal(want) {
		t.Errorf("last webhook delivery %s, want %s", got.Last, want)
	}
	// An hour without deliveries still knows the last one.
	later, err := tc.WebhookTraffic(ctx, t0.Add(time.Hour), 100)
	if err != nil || len(later.Outcomes) != 0 || !later.Last.Equal(t0.Add(-10*time.Minute)) {
		t.Errorf("traffic of a later, empty hour: %+v, %v; want none, last at t0-10m", later, err)
	}
	// A bound of 1 cuts the count, and says so.
	cut, err := tc.WebhookTraffic(ctx, since, 1)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range cut.Outcomes {
		n += v
	}
	if !cut.Partial || n >= 4 {
		t.Errorf("traffic read with a bound of 1: %v counted, partial %v; want fewer than the 4, said to be partial", cut.Outcomes, cut.Partial)
	}
}
