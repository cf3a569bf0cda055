// Package lifecycle is the pure state model of a long-running operation and
// the monotonic-apply reducer. It performs no I/O: every decision about
// whether an event may change stored state is made here, so it can be tested
// exhaustively and reused by every ledger adapter.
package lifecycle

import "time"

// State is an operation's lifecycle state in lrosink's own vocabulary.
// Adapters map provider-specific states (JOB_STATE_*, BATCH_STATE_*,
// interaction statuses, webhook event types) onto these values; anything else
// is an unknown state with rank -1.
type State string

// The known states.
const (
	Pending        State = "PENDING"
	Running        State = "RUNNING"
	RequiresAction State = "REQUIRES_ACTION"
	Succeeded      State = "SUCCEEDED"
	Failed         State = "FAILED"
	Cancelled      State = "CANCELLED"
	Expired        State = "EXPIRED"
	// Incomplete: the operation ended without finishing its work (an
	// interaction that stopped at max_output_tokens, or ran out of budget).
	// Terminal like the others: Gemini will not resume it.
	Incomplete State = "INCOMPLETE"
)

// States lists every known state, in rank order.
func States() []State {
	return []State{Pending, Running, RequiresAction, Succeeded, Failed, Cancelled, Expired, Incomplete}
}

// Rank orders states by progress: PENDING 0, RUNNING and REQUIRES_ACTION 1,
// terminal states 2, unknown -1.
func (s State) Rank() int {
	switch s {
	case Pending:
		return 0
	case Running, RequiresAction:
		return 1
	case Succeeded, Failed, Cancelled, Expired, Incomplete:
		return 2
	default:
		return -1
	}
}

// Known reports whether s is one of the known states.
func (s State) Known() bool { return s.Rank() >= 0 }

// Terminal reports whether s is a terminal (absorbing) state.
func (s State) Terminal() bool { return s.Rank() == 2 }

// ServerTime returns t in UTC at microsecond precision, or
// 1970-01-01T00:00:00Z when t is the zero time: an event without a server
// time loses every tie. Microseconds are the finest precision every store
// keeps (Firestore truncates), so a re-delivered event compares equal to the
// stored copy of itself.
func ServerTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return t.UTC().Truncate(time.Microsecond)
}

// Event is what the reducer needs to know about an incoming observation: the
// state it claims and the server time of that state.
type Event struct {
	State      State
	UpdateTime time.Time
}

// Current is the stored progress of an operation. The zero value means the
// operation has never been seen.
type Current struct {
	Exists     bool
	State      State
	UpdateTime time.Time
}

// Reason labels a decision. Labels are stable: they appear in logs, metrics
// and the webhook's answer.
type Reason string

// Reasons for applied events.
const (
	ReasonFirstSighting Reason = "first-sighting"
	ReasonHigherRank    Reason = "higher-rank"
	ReasonNewerTime     Reason = "newer-update-time"
)

// Reasons for dropped events.
const (
	ReasonRegressFromTerminal Reason = "regress-from-terminal"
	ReasonLowerRank           Reason = "lower-rank"
	ReasonStaleOrEqual        Reason = "stale-or-equal-update-time"
	// ReasonTerminalConflict: a different terminal state after a terminal
	// one. It is recorded on the operation but never applied: the first
	// finalize wins, because its side effect may already have run.
	ReasonTerminalConflict Reason = "terminal-conflict"
	// ReasonDuplicate: the same terminal state again (any server time).
	ReasonDuplicate    Reason = "duplicate"
	ReasonUnknownState Reason = "unknown-state"
)

// Decision is the reducer's verdict on one event.
type Decision struct {
	// Applied is true when Next differs from the current state and must be
	// stored.
	Applied bool
	Reason  Reason
	// Next is the progress after the decision. When the event is dropped it
	// is the current progress with its time normalized by ServerTime.
	Next Current
	// FirstSighting is true when the operation was not known before and the
	// event creates it.
	FirstSighting bool
	// EntersTerminal is true exactly once per operation: when this decision
	// moves it into a terminal state. That is the moment a side effect is owed.
	EntersTerminal bool
}

// Conflict reports whether the decision is a terminal conflict that should be
// recorded (but not applied).
func (d Decision) Conflict() bool { return d.Reason == ReasonTerminalConflict }

// Apply decides what an event does to an operation's stored progress.
//
// Rules, in order:
//   - an unknown event state is dropped (unknown-state) and never moves
//     progress, not even for an operation seen for the first time;
//   - an operation never seen is created from any known state;
//   - a terminal current state is absorbing: the same terminal again is a
//     duplicate, a different terminal a terminal-conflict, anything else
//     regress-from-terminal;
//   - a lower rank is dropped, a higher rank applied whatever its time;
//   - within a rank the newer server time wins; an equal or older time is
//     dropped.
//
// Drop stability holds: an event dropped against a state S is dropped against
// every state reachable from S, because rank never decreases and, within a
// rank, the stored time never decreases.
func Apply(cur Current, ev Event) Decision {
	ev.UpdateTime = ServerTime(ev.UpdateTime)
	cur.UpdateTime = ServerTime(cur.UpdateTime)
	next := Current{Exists: true, State: ev.State, UpdateTime: ev.UpdateTime}
	drop := func(r Reason) Decision { return Decision{Reason: r, Next: cur} }

	switch {
	case !ev.State.Known():
		return drop(ReasonUnknownState)
	case !cur.Exists:
		return Decision{Applied: true, Reason: ReasonFirstSighting, Next: next,
			FirstSighting: true, EntersTerminal: ev.State.Terminal()}
	case cur.State.Terminal():
		switch {
		case ev.State == cur.State:
			return drop(ReasonDuplicate)
		case ev.State.Terminal():
			return drop(ReasonTerminalConflict)
		default:
			return drop(ReasonRegressFromTerminal)
		}
	case ev.State.Rank() < cur.State.Rank():
		return drop(ReasonLowerRank)
	case ev.State.Rank() > cur.State.Rank():
		return Decision{Applied: true, Reason: ReasonHigherRank, Next: next, EntersTerminal: ev.State.Terminal()}
	case ev.UpdateTime.After(cur.UpdateTime):
		return Decision{Applied: true, Reason: ReasonNewerTime, Next: next}
	default:
		return drop(ReasonStaleOrEqual)
	}
}

// Regressed reports whether moving from prev to next loses progress: the
// rank drops, a terminal state changes, or the time goes back within a rank.
// An operation that disappears also regresses. It is the invariant every
// store must keep, checked by tests and the simulator.
func Regressed(prev, next Current) bool {
	switch {
	case !prev.Exists:
		return false
	case !next.Exists:
		return true
	case prev.State.Terminal():
		return next.State != prev.State
	case next.State.Rank() < prev.State.Rank():
		return true
	case next.State.Rank() == prev.State.Rank():
		return ServerTime(next.UpdateTime).Before(ServerTime(prev.UpdateTime))
	default:
		return false
	}
}
