package lifecycle_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/lifecycle"
)

var (
	epoch = time.Unix(0, 0).UTC()
	// base is the origin of the seed rows' times.
	base = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cest = time.FixedZone("CEST", 2*3600)
)

// ts returns base + n seconds.
func ts(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }

func cur(s lifecycle.State, t time.Time) lifecycle.Current {
	return lifecycle.Current{Exists: true, State: s, UpdateTime: t}
}

func ev(s lifecycle.State, t time.Time) lifecycle.Event {
	return lifecycle.Event{State: s, UpdateTime: t}
}

type row struct {
	name string
	cur  lifecycle.Current
	ev   lifecycle.Event
	want want
	seed bool // an explicit row: its expectation is written out, not computed
}

func droppedRow(name string, c lifecycle.Current, e lifecycle.Event, r lifecycle.Reason) row {
	return row{name: name, cur: c, ev: e, seed: true,
		want: want{reason: r, next: c, conflict: r == "terminal-conflict"}}
}

// seedRows are the named cases, with expectations written out literally.
func seedRows() []row {
	rows := []row{
		droppedRow("old PENDING after RUNNING", cur("RUNNING", ts(2)), ev("PENDING", ts(1)), "lower-rank"),
		droppedRow("newer PENDING after RUNNING", cur("RUNNING", ts(2)), ev("PENDING", ts(3)), "lower-rank"),
		droppedRow("late RUNNING after SUCCEEDED", cur("SUCCEEDED", ts(5)), ev("RUNNING", ts(3)), "regress-from-terminal"),
		droppedRow("newer RUNNING after SUCCEEDED", cur("SUCCEEDED", ts(5)), ev("RUNNING", ts(9)), "regress-from-terminal"),
		droppedRow("PENDING after EXPIRED", cur("EXPIRED", ts(5)), ev("PENDING", ts(9)), "regress-from-terminal"),
		droppedRow("newer RUNNING after INCOMPLETE", cur("INCOMPLETE", ts(5)), ev("RUNNING", ts(9)), "regress-from-terminal"),
		droppedRow("SUCCEEDED after INCOMPLETE", cur("INCOMPLETE", ts(5)), ev("SUCCEEDED", ts(6)), "terminal-conflict"),
		droppedRow("INCOMPLETE after SUCCEEDED", cur("SUCCEEDED", ts(5)), ev("INCOMPLETE", ts(6)), "terminal-conflict"),
		droppedRow("INCOMPLETE again, newer", cur("INCOMPLETE", ts(5)), ev("INCOMPLETE", ts(9)), "duplicate"),
		{name: "INCOMPLETE after REQUIRES_ACTION, older time", cur: cur("REQUIRES_ACTION", ts(5)), ev: ev("INCOMPLETE", ts(1)), seed: true,
			want: want{applied: true, reason: "higher-rank", next: cur("INCOMPLETE", ts(1)), entersTerminal: true}},
		{name: "first sighting of INCOMPLETE", cur: lifecycle.Current{}, ev: ev("INCOMPLETE", ts(5)), seed: true,
			want: want{applied: true, reason: "first-sighting", next: cur("INCOMPLETE", ts(5)), firstSighting: true, entersTerminal: true}},
		droppedRow("FAILED after SUCCEEDED", cur("SUCCEEDED", ts(5)), ev("FAILED", ts(6)), "terminal-conflict"),
		droppedRow("older CANCELLED after FAILED", cur("FAILED", ts(5)), ev("CANCELLED", ts(1)), "terminal-conflict"),
		droppedRow("SUCCEEDED again, newer", cur("SUCCEEDED", ts(5)), ev("SUCCEEDED", ts(9)), "duplicate"),
		droppedRow("SUCCEEDED again, older", cur("SUCCEEDED", ts(5)), ev("SUCCEEDED", ts(1)), "duplicate"),
		droppedRow("SUCCEEDED again, zero time", cur("SUCCEEDED", ts(5)), ev("SUCCEEDED", time.Time{}), "duplicate"),
		{name: "newer RUNNING after RUNNING", cur: cur("RUNNING", ts(2)), ev: ev("RUNNING", ts(3)), seed: true,
			want: want{applied: true, reason: "newer-update-time", next: cur("RUNNING", ts(3))}},
		droppedRow("equal RUNNING after RUNNING", cur("RUNNING", ts(2)), ev("RUNNING", ts(2)), "stale-or-equal-update-time"),
		droppedRow("equal RUNNING after RUNNING, other zone and sub-microsecond", cur("RUNNING", ts(2)), ev("RUNNING", ts(2).Add(999).In(cest)), "stale-or-equal-update-time"),
		{name: "newer REQUIRES_ACTION after RUNNING", cur: cur("RUNNING", ts(2)), ev: ev("REQUIRES_ACTION", ts(3)), seed: true,
			want: want{applied: true, reason: "newer-update-time", next: cur("REQUIRES_ACTION", ts(3))}},
		droppedRow("older REQUIRES_ACTION after RUNNING", cur("RUNNING", ts(2)), ev("REQUIRES_ACTION", ts(1)), "stale-or-equal-update-time"),
		droppedRow("equal REQUIRES_ACTION after RUNNING", cur("RUNNING", ts(2)), ev("REQUIRES_ACTION", ts(2)), "stale-or-equal-update-time"),
		{name: "newer RUNNING after REQUIRES_ACTION", cur: cur("REQUIRES_ACTION", ts(3)), ev: ev("RUNNING", ts(4)), seed: true,
			want: want{applied: true, reason: "newer-update-time", next: cur("RUNNING", ts(4))}},
		{name: "first sighting of SUCCEEDED", cur: lifecycle.Current{}, ev: ev("SUCCEEDED", ts(5)), seed: true,
			want: want{applied: true, reason: "first-sighting", next: cur("SUCCEEDED", ts(5)), firstSighting: true, entersTerminal: true}},
		{name: "first sighting of PENDING", cur: lifecycle.Current{}, ev: ev("PENDING", ts(0)), seed: true,
			want: want{applied: true, reason: "first-sighting", next: cur("PENDING", ts(0)), firstSighting: true}},
		{name: "first sighting with zero time", cur: lifecycle.Current{}, ev: ev("RUNNING", time.Time{}), seed: true,
			want: want{applied: true, reason: "first-sighting", next: cur("RUNNING", epoch), firstSighting: true}},
		{name: "RUNNING after PENDING, older time", cur: cur("PENDING", ts(5)), ev: ev("RUNNING", ts(1)), seed: true,
			want: want{applied: true, reason: "higher-rank", next: cur("RUNNING", ts(1))}},
		{name: "SUCCEEDED after RUNNING, older time", cur: cur("RUNNING", ts(5)), ev: ev("SUCCEEDED", ts(1)), seed: true,
			want: want{applied: true, reason: "higher-rank", next: cur("SUCCEEDED", ts(1)), entersTerminal: true}},
		{name: "zero-time CANCELLED after RUNNING", cur: cur("RUNNING", ts(5)), ev: ev("CANCELLED", time.Time{}), seed: true,
			want: want{applied: true, reason: "higher-rank", next: cur("CANCELLED", epoch), entersTerminal: true}},
		droppedRow("zero-time RUNNING vs epoch RUNNING", cur("RUNNING", epoch), ev("RUNNING", time.Time{}), "stale-or-equal-update-time"),
		droppedRow("zero-time PENDING vs epoch PENDING", cur("PENDING", epoch), ev("PENDING", time.Time{}), "stale-or-equal-update-time"),
		droppedRow("zero-time RUNNING vs stored zero-time RUNNING", cur("RUNNING", time.Time{}), ev("RUNNING", time.Time{}), "stale-or-equal-update-time"),
		droppedRow("epoch RUNNING vs stored zero-time RUNNING", cur("RUNNING", time.Time{}), ev("RUNNING", epoch), "stale-or-equal-update-time"),
		droppedRow("zero-time RUNNING vs later RUNNING", cur("RUNNING", ts(1)), ev("RUNNING", time.Time{}), "stale-or-equal-update-time"),
		droppedRow("zero-time REQUIRES_ACTION vs later RUNNING", cur("RUNNING", ts(1)), ev("REQUIRES_ACTION", time.Time{}), "stale-or-equal-update-time"),
		droppedRow("zero-time PENDING vs later PENDING", cur("PENDING", ts(1)), ev("PENDING", time.Time{}), "stale-or-equal-update-time"),
		droppedRow("zero-time RUNNING vs 1 microsecond after epoch", cur("RUNNING", epoch.Add(time.Microsecond)), ev("RUNNING", time.Time{}), "stale-or-equal-update-time"),
		{name: "1 microsecond after epoch vs stored zero-time RUNNING", cur: cur("RUNNING", time.Time{}), ev: ev("RUNNING", epoch.Add(time.Microsecond)), seed: true,
			want: want{applied: true, reason: "newer-update-time", next: cur("RUNNING", epoch.Add(time.Microsecond))}},
	}
	// An unknown event state is dropped against every state, Next unchanged.
	currents := []lifecycle.Current{{}}
	for _, s := range append(append([]lifecycle.State{}, knownStates...), storedUnknown) {
		currents = append(currents, cur(s, ts(5)))
	}
	for _, c := range currents {
		for _, us := range unknownEventStates {
			for _, t := range []time.Time{ts(1), ts(5), ts(9), {}} {
				rows = append(rows, droppedRow(fmt.Sprintf("unknown %q@%s vs %s", us, fmtTime(t), fmtCur(c)), c, ev(us, t), "unknown-state"))
			}
		}
	}
	return rows
}

// crossRows is the generated cross product: current (not-exists, every known
// state, and the stored unknown state PAUSED) × current time (a real time
// with a non-UTC zone and sub-microsecond part, the epoch, the zero time) ×
// event state (known, JOB_STATE_PAUSED, "") × event time relative to the
// current time (older, equal, equal after normalization, newer, zero).
//
// PAUSED as a stored state cannot arise from Apply (unknown event states are
// dropped even on first sighting); it is included to pin what happens to data
// written by other means: every known event outranks it.
func crossRows() []row {
	type ct struct {
		name string
		t    time.Time
	}
	curTimes := []ct{
		{"real", time.Date(2025, 6, 1, 12, 0, 0, 1500, cest)}, // 1.5µs past the second: normalizes to 1µs
		{"epoch", epoch},
		{"zero", time.Time{}},
	}
	type cs struct {
		name string
		c    func(time.Time) lifecycle.Current
	}
	var curs []cs
	for _, s := range append(append([]lifecycle.State{}, knownStates...), storedUnknown) {
		curs = append(curs, cs{string(s), func(t time.Time) lifecycle.Current { return cur(s, t) }})
	}
	evStates := append(append([]lifecycle.State{}, knownStates...), unknownEventStates...)
	relTimes := func(c time.Time) map[string]time.Time {
		eff := c
		if eff.IsZero() {
			eff = epoch
		}
		// eff may carry sub-microsecond nanoseconds; 300ns more stays in the
		// same microsecond for every current time used here.
		return map[string]time.Time{
			"older":       eff.Add(-time.Microsecond),
			"equal":       eff,
			"equal-norm":  eff.Add(300 * time.Nanosecond).UTC(),
			"newer":       eff.Add(time.Microsecond),
			"zero":        {},
			"much-newer":  eff.Add(time.Hour),
			"older-in-tz": eff.Add(-time.Second).In(cest),
		}
	}
	relOrder := []string{"older", "older-in-tz", "equal", "equal-norm", "newer", "much-newer", "zero"}

	var rows []row
	add := func(name string, c lifecycle.Current, e lifecycle.Event) {
		rows = append(rows, row{name: name, cur: c, ev: e, want: oracle(c, e)})
	}
	for _, es := range evStates {
		for _, rel := range relOrder {
			e := ev(es, relTimes(time.Time{})[rel])
			add(fmt.Sprintf("cur=not-exists/ev=%q@%s", es, rel), lifecycle.Current{}, e)
		}
	}
	for _, c := range curs {
		for _, t := range curTimes {
			rt := relTimes(t.t)
			for _, es := range evStates {
				for _, rel := range relOrder {
					add(fmt.Sprintf("cur=%s@%s/ev=%q@%s", c.name, t.name, es, rel), c.c(t.t), ev(es, rt[rel]))
				}
			}
		}
	}
	return rows
}

func TestApplyDecisionTable(t *testing.T) {
	seeds := seedRows()
	cross := crossRows()
	if want := 10*7 + 9*3*10*7; len(cross) != want {
		t.Fatalf("cross product has %d rows, want %d", len(cross), want)
	}
	rows := append(seeds, cross...)
	reasons := map[lifecycle.Reason]int{}
	for _, r := range rows {
		got := lifecycle.Apply(r.cur, r.ev)
		reasons[got.Reason]++
		if bad := checkDecision(got, r.want); len(bad) > 0 {
			t.Errorf("%s: Apply(%s, %s):\n    %v", r.name, fmtCur(r.cur), fmtEv(r.ev), bad)
		}
		// The explicit rows also validate the oracle used for the cross product.
		if r.seed {
			if bad := checkDecision(got, oracle(r.cur, r.ev)); len(bad) > 0 {
				t.Errorf("%s: oracle disagrees with the explicit row: %v", r.name, bad)
			}
		}
	}
	for _, r := range []lifecycle.Reason{
		lifecycle.ReasonFirstSighting, lifecycle.ReasonHigherRank, lifecycle.ReasonNewerTime,
		lifecycle.ReasonRegressFromTerminal, lifecycle.ReasonLowerRank, lifecycle.ReasonStaleOrEqual,
		lifecycle.ReasonTerminalConflict, lifecycle.ReasonDuplicate, lifecycle.ReasonUnknownState,
	} {
		if reasons[r] == 0 {
			t.Errorf("reason %q never produced by the table", r)
		}
	}
	t.Logf("%d seed rows + %d generated rows; reasons: %v", len(seeds), len(cross), reasons)
}

// TestReasonLabelsStable pins the label strings: they are part of the logs,
// metrics and the webhook's answer.
func TestReasonLabelsStable(t *testing.T) {
	for got, want := range map[lifecycle.Reason]string{
		lifecycle.ReasonFirstSighting:       "first-sighting",
		lifecycle.ReasonHigherRank:          "higher-rank",
		lifecycle.ReasonNewerTime:           "newer-update-time",
		lifecycle.ReasonRegressFromTerminal: "regress-from-terminal",
		lifecycle.ReasonLowerRank:           "lower-rank",
		lifecycle.ReasonStaleOrEqual:        "stale-or-equal-update-time",
		lifecycle.ReasonTerminalConflict:    "terminal-conflict",
		lifecycle.ReasonDuplicate:           "duplicate",
		lifecycle.ReasonUnknownState:        "unknown-state",
	} {
		if string(got) != want {
			t.Errorf("reason %q, want %q", got, want)
		}
	}
}

// TestStateModel checks States, Rank, Known and Terminal against the
// hand-written table.
func TestStateModel(t *testing.T) {
	got := lifecycle.States()
	if len(got) != len(knownStates) {
		t.Fatalf("States() = %v, want %v", got, knownStates)
	}
	for i, s := range got {
		if s != knownStates[i] {
			t.Errorf("States()[%d] = %q, want %q", i, s, knownStates[i])
		}
	}
	for _, s := range append(append([]lifecycle.State{}, knownStates...), storedUnknown, "JOB_STATE_PAUSED", "", "running", "SUCCEEDED ") {
		if s.Rank() != rankOf(s) || s.Known() != (rankOf(s) >= 0) || s.Terminal() != isTerminal(s) {
			t.Errorf("%q: Rank=%d Known=%v Terminal=%v, want %d %v %v", s, s.Rank(), s.Known(), s.Terminal(), rankOf(s), rankOf(s) >= 0, isTerminal(s))
		}
	}
}

// TestServerTime checks the normalization the reducer compares with.
func TestServerTime(t *testing.T) {
	for _, c := range []struct {
		in, want time.Time
	}{
		{time.Time{}, epoch},
		{epoch, epoch},
		{time.Date(2025, 1, 1, 2, 0, 0, 1999, cest), time.Date(2025, 1, 1, 0, 0, 0, 1000, time.UTC)},
		{time.Date(2025, 1, 1, 0, 0, 0, 999, time.UTC), base},
	} {
		got := lifecycle.ServerTime(c.in)
		if !got.Equal(c.want) || got.Location() != time.UTC {
			t.Errorf("ServerTime(%s) = %s, want %s UTC", fmtTime(c.in), fmtTime(got), fmtTime(c.want))
		}
	}
}

// TestRegressedTable checks the invariant predicate on hand-picked pairs.
func TestRegressedTable(t *testing.T) {
	for _, c := range []struct {
		prev, next lifecycle.Current
		want       bool
	}{
		{lifecycle.Current{}, lifecycle.Current{}, false},
		{lifecycle.Current{}, cur("RUNNING", ts(1)), false},
		{cur("PENDING", ts(1)), lifecycle.Current{}, true},
		{cur("PENDING", ts(1)), cur("RUNNING", ts(0)), false},
		{cur("RUNNING", ts(1)), cur("PENDING", ts(2)), true},
		{cur("RUNNING", ts(2)), cur("REQUIRES_ACTION", ts(1)), true},
		{cur("RUNNING", ts(2)), cur("REQUIRES_ACTION", ts(2)), false},
		{cur("RUNNING", ts(2)), cur("RUNNING", ts(2).Add(500).In(cest)), false},
		{cur("RUNNING", ts(2)), cur("SUCCEEDED", ts(0)), false},
		{cur("SUCCEEDED", ts(2)), cur("FAILED", ts(3)), true},
		{cur("INCOMPLETE", ts(2)), cur("SUCCEEDED", ts(3)), true},
		{cur("RUNNING", ts(2)), cur("INCOMPLETE", ts(0)), false},
		{cur("SUCCEEDED", ts(2)), cur("RUNNING", ts(3)), true},
		{cur("SUCCEEDED", ts(2)), cur("SUCCEEDED", ts(2)), false},
		{cur("RUNNING", ts(2)), cur("JOB_STATE_PAUSED", ts(3)), true},
		{cur("RUNNING", epoch), cur("RUNNING", time.Time{}), false},
		{cur("RUNNING", epoch.Add(time.Microsecond)), cur("RUNNING", time.Time{}), true},
	} {
		if got := lifecycle.Regressed(c.prev, c.next); got != c.want {
			t.Errorf("Regressed(%s, %s) = %v, want %v", fmtCur(c.prev), fmtCur(c.next), got, c.want)
		}
	}
}

// TestDroppedNextIsNormalizedCurrent: on a drop, Next is the current
// progress with its time normalized (ServerTime), not necessarily the
// byte-identical input: for the zero Current, Next.UpdateTime is the epoch,
// not the zero time. Callers must compare with sameProgress semantics (or
// not look at Next at all when nothing was applied).
func TestDroppedNextIsNormalizedCurrent(t *testing.T) {
	for _, c := range []lifecycle.Current{
		{},
		cur("RUNNING", time.Date(2025, 1, 1, 2, 0, 0, 1999, cest)),
		cur("SUCCEEDED", time.Time{}),
		cur(storedUnknown, ts(1)),
	} {
		for _, e := range []lifecycle.Event{ev("JOB_STATE_PAUSED", ts(9)), ev("PENDING", time.Time{}), ev("FAILED", ts(0))} {
			d := lifecycle.Apply(c, e)
			if d.Applied {
				continue
			}
			norm := lifecycle.Current{Exists: c.Exists, State: c.State, UpdateTime: lifecycle.ServerTime(c.UpdateTime)}
			if d.Next != norm {
				t.Errorf("Apply(%s, %s) dropped with Next %s, want exactly %s", fmtCur(c), fmtEv(e), fmtCur(d.Next), fmtCur(norm))
			}
			if !sameProgress(d.Next, c) {
				t.Errorf("Apply(%s, %s) dropped but Next %s is not the same progress", fmtCur(c), fmtEv(e), fmtCur(d.Next))
			}
		}
	}
}
