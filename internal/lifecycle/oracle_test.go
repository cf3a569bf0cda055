package lifecycle_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/lrosink/lrosink/internal/lifecycle"
)

// This file holds the test oracle: an independent formulation of the reducer
// rules. It deliberately does not call Apply, State.Rank, State.Terminal or
// ServerTime: ranks come from a literal map, times are compared as integer
// Unix microseconds, and progress is compared as a lexicographic
// (rank, microseconds) key.

// oracleRank is the rank table written out by hand. A state missing from the
// map is unknown.
var oracleRank = map[lifecycle.State]int{
	"PENDING":         0,
	"RUNNING":         1,
	"REQUIRES_ACTION": 1,
	"SUCCEEDED":       2,
	"FAILED":          2,
	"CANCELLED":       2,
	"EXPIRED":         2,
	"INCOMPLETE":      2,
}

// knownStates is the list of known states, spelled as literals.
var knownStates = []lifecycle.State{"PENDING", "RUNNING", "REQUIRES_ACTION", "SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "INCOMPLETE"}

// unknownEventStates are event states the reducer must ignore.
var unknownEventStates = []lifecycle.State{"JOB_STATE_PAUSED", ""}

// storedUnknown is a state that Apply can never store (unknown events are
// always dropped, even on first sighting) but that could be found in a store
// written by an older version or edited by hand.
const storedUnknown lifecycle.State = "PAUSED"

func rankOf(s lifecycle.State) int {
	if r, ok := oracleRank[s]; ok {
		return r
	}
	return -1
}

func isTerminal(s lifecycle.State) bool { return rankOf(s) == 2 }

// micros is the server time of t as Unix microseconds, floored; the zero time
// counts as the epoch.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// sameProgress compares two Currents the way a store sees them: existence,
// state, and server time at microsecond precision.
func sameProgress(a, b lifecycle.Current) bool {
	return a.Exists == b.Exists && a.State == b.State && micros(a.UpdateTime) == micros(b.UpdateTime)
}

// key is the lexicographic progress key of a known state at a time.
type key struct {
	rank int
	us   int64
}

func (k key) less(o key) bool {
	if k.rank != o.rank {
		return k.rank < o.rank
	}
	return k.us < o.us
}

func evKey(e lifecycle.Event) key    { return key{rankOf(e.State), micros(e.UpdateTime)} }
func curKey(c lifecycle.Current) key { return key{rankOf(c.State), micros(c.UpdateTime)} }

// want is an expected decision.
type want struct {
	applied        bool
	reason         lifecycle.Reason
	next           lifecycle.Current
	firstSighting  bool
	entersTerminal bool
	conflict       bool
}

// oracle computes the expected decision for ev against cur.
func oracle(cur lifecycle.Current, ev lifecycle.Event) want {
	dropped := func(r lifecycle.Reason) want {
		return want{reason: r, next: cur, conflict: r == "terminal-conflict"}
	}
	if _, known := oracleRank[ev.State]; !known {
		return dropped("unknown-state")
	}
	moved := lifecycle.Current{Exists: true, State: ev.State, UpdateTime: time.UnixMicro(micros(ev.UpdateTime)).UTC()}
	if !cur.Exists {
		return want{applied: true, reason: "first-sighting", next: moved, firstSighting: true, entersTerminal: isTerminal(ev.State)}
	}
	if isTerminal(cur.State) {
		switch {
		case ev.State == cur.State:
			return dropped("duplicate")
		case isTerminal(ev.State):
			return dropped("terminal-conflict")
		default:
			return dropped("regress-from-terminal")
		}
	}
	e, c := evKey(ev), curKey(cur)
	if c.less(e) {
		r := lifecycle.Reason("newer-update-time")
		if e.rank > c.rank {
			r = "higher-rank"
		}
		return want{applied: true, reason: r, next: moved, entersTerminal: e.rank == 2}
	}
	if e.rank < c.rank {
		return dropped("lower-rank")
	}
	return dropped("stale-or-equal-update-time")
}

// checkDecision compares a decision with an expectation and returns the
// mismatches (empty when they agree).
func checkDecision(got lifecycle.Decision, w want) []string {
	var bad []string
	if got.Applied != w.applied {
		bad = append(bad, fmt.Sprintf("Applied=%v want %v", got.Applied, w.applied))
	}
	if got.Reason != w.reason {
		bad = append(bad, fmt.Sprintf("Reason=%q want %q", got.Reason, w.reason))
	}
	if !sameProgress(got.Next, w.next) {
		bad = append(bad, fmt.Sprintf("Next=%s want %s", fmtCur(got.Next), fmtCur(w.next)))
	}
	if got.FirstSighting != w.firstSighting {
		bad = append(bad, fmt.Sprintf("FirstSighting=%v want %v", got.FirstSighting, w.firstSighting))
	}
	if got.EntersTerminal != w.entersTerminal {
		bad = append(bad, fmt.Sprintf("EntersTerminal=%v want %v", got.EntersTerminal, w.entersTerminal))
	}
	if got.Conflict() != w.conflict {
		bad = append(bad, fmt.Sprintf("Conflict()=%v want %v", got.Conflict(), w.conflict))
	}
	// Whatever the decision, Next is in normalized server-time form: UTC at
	// microsecond precision (so a stored copy compares equal to itself).
	if got.Next.UpdateTime.Location() != time.UTC || got.Next.UpdateTime.Nanosecond()%1000 != 0 {
		bad = append(bad, fmt.Sprintf("Next.UpdateTime %s not normalized to UTC microseconds", got.Next.UpdateTime.Format(time.RFC3339Nano)))
	}
	return bad
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return t.Format(time.RFC3339Nano)
}

func fmtCur(c lifecycle.Current) string {
	if !c.Exists {
		return fmt.Sprintf("{not-exists %q@%s}", c.State, fmtTime(c.UpdateTime))
	}
	return fmt.Sprintf("{%s@%s}", c.State, fmtTime(c.UpdateTime))
}

func fmtEv(e lifecycle.Event) string { return fmt.Sprintf("%q@%s", e.State, fmtTime(e.UpdateTime)) }

func fmtStream(evs []lifecycle.Event) string {
	parts := make([]string, len(evs))
	for i, e := range evs {
		parts[i] = fmt.Sprintf("  [%d] %s", i, fmtEv(e))
	}
	return strings.Join(parts, "\n")
}
