package lifecycle_test

import (
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/lifecycle"
)

// Drop stability: if Apply(S, E) is dropped then Apply(S', E) is dropped for
// every S' reachable from S. This is what lets a store skip the write for a
// re-delivered event without re-reading.

const dropChecks = 20_000

// TestDropStabilityRandom builds S from random prefixes of generated streams,
// picks events E dropped at S (times chosen near S's time and among the
// stream's times to hit the boundaries), applies a random continuation (the
// rest of the stream, or arbitrary events) and checks E stays dropped at
// every state S' along the way.
func TestDropStabilityRandom(t *testing.T) {
	seed := propSeed + 2<<32
	r := newRand(seed)
	allStates := append(append([]lifecycle.State{}, knownStates...), unknownEventStates...)
	reasons := map[lifecycle.Reason]int{}
	var checks, rounds, failures int
	for checks < dropChecks {
		rounds++
		st := genStream(r, 1+r.IntN(2))
		cut := r.IntN(len(st.events) + 1)
		var s lifecycle.Current
		for _, e := range st.events[:cut] {
			s = lifecycle.Apply(s, e).Next
		}
		pickTime := func() time.Time {
			switch r.IntN(6) {
			case 0:
				return time.Time{}
			case 1:
				return s.UpdateTime.Add(time.Duration(r.IntN(3)-1) * time.Microsecond)
			case 2:
				return s.UpdateTime.Add(time.Duration(r.IntN(1000))).In(zones[r.IntN(len(zones))])
			default:
				return st.events[r.IntN(len(st.events))].UpdateTime
			}
		}
		randomEvent := func() lifecycle.Event {
			return ev(allStates[r.IntN(len(allStates))], pickTime())
		}
		var e lifecycle.Event
		var d lifecycle.Decision
		found := false
		for range 20 {
			e = randomEvent()
			if d = lifecycle.Apply(s, e); !d.Applied {
				found = true
				break
			}
		}
		if !found {
			continue
		}
		reasons[d.Reason]++
		var cont []lifecycle.Event
		if r.IntN(2) == 0 {
			cont = st.events[cut:]
		} else {
			for range 1 + r.IntN(8) {
				cont = append(cont, randomEvent())
			}
		}
		sp := s
		for k, c := range cont {
			sp = lifecycle.Apply(sp, c).Next
			checks++
			if d2 := lifecycle.Apply(sp, e); d2.Applied {
				failures++
				t.Errorf("seed %d round %d: E=%s dropped at S=%s (%s) but applied at S'=%s (%s) reached by:\n%s",
					seed, rounds, fmtEv(e), fmtCur(s), d.Reason, fmtCur(sp), d2.Reason, fmtStream(cont[:k+1]))
				if failures >= 5 {
					t.FailNow()
				}
				break
			}
		}
	}
	for _, want := range []lifecycle.Reason{
		lifecycle.ReasonRegressFromTerminal, lifecycle.ReasonLowerRank, lifecycle.ReasonStaleOrEqual,
		lifecycle.ReasonTerminalConflict, lifecycle.ReasonDuplicate, lifecycle.ReasonUnknownState,
	} {
		if reasons[want] == 0 {
			t.Errorf("seed %d: drop reason %q never exercised", seed, want)
		}
	}
	t.Logf("seed %d: %d (S, E, S') checks over %d rounds; drop reasons at S: %v", seed, checks, rounds, reasons)
}

// node is a Current reduced to what the reducer compares, usable as a map key.
type node struct {
	exists bool
	state  lifecycle.State
	us     int64
}

func nodeOf(c lifecycle.Current) node { return node{c.Exists, c.State, micros(c.UpdateTime)} }

func (n node) current() lifecycle.Current {
	if !n.exists {
		return lifecycle.Current{}
	}
	return lifecycle.Current{Exists: true, State: n.state, UpdateTime: time.UnixMicro(n.us).UTC()}
}

// TestDropStabilityExhaustive checks drop stability for every (S, E, S')
// triple over a finite universe: states not-exists, the 8 known states and
// the stored unknown PAUSED at times {epoch, t1, t2, t3}; events of the 8
// known states, JOB_STATE_PAUSED and "" at times {zero, epoch, t1, t2, t3}.
// S' ranges over the reachability closure of S under those events.
func TestDropStabilityExhaustive(t *testing.T) {
	times := []time.Time{epoch, ts(1), ts(2), ts(3)}
	evTimes := append([]time.Time{{}}, times...)
	var events []lifecycle.Event
	for _, s := range append(append([]lifecycle.State{}, knownStates...), unknownEventStates...) {
		for _, at := range evTimes {
			events = append(events, ev(s, at))
		}
	}
	starts := []node{nodeOf(lifecycle.Current{})}
	for _, s := range append(append([]lifecycle.State{}, knownStates...), storedUnknown) {
		for _, at := range times {
			starts = append(starts, nodeOf(cur(s, at)))
		}
	}

	// successors, memoized; every edge is also checked against Regressed.
	succ := map[node][]node{}
	var successors func(n node) []node
	successors = func(n node) []node {
		if out, ok := succ[n]; ok {
			return out
		}
		seen := map[node]bool{}
		var out []node
		for _, e := range events {
			d := lifecycle.Apply(n.current(), e)
			if lifecycle.Regressed(n.current(), d.Next) {
				t.Errorf("edge %s --%s--> %s regresses", fmtCur(n.current()), fmtEv(e), fmtCur(d.Next))
			}
			m := nodeOf(d.Next)
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
		succ[n] = out
		return out
	}
	closure := func(n node) []node {
		seen := map[node]bool{n: true}
		queue := []node{n}
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			for _, y := range successors(x) {
				if !seen[y] {
					seen[y] = true
					queue = append(queue, y)
				}
			}
		}
		out := make([]node, 0, len(seen))
		for y := range seen {
			out = append(out, y)
		}
		return out
	}

	// Sanity of the universe: from nothing, every known state at every time
	// is reachable (first sighting takes any known state), and nothing else.
	if got, want := len(closure(starts[0])), 1+len(knownStates)*len(times); got != want {
		t.Fatalf("closure of not-exists has %d states, want %d", got, want)
	}
	// A terminal state reaches only itself.
	for _, s := range []lifecycle.State{"FAILED", "INCOMPLETE"} {
		if got := closure(nodeOf(cur(s, ts(2)))); len(got) != 1 {
			t.Errorf("closure of %s@t2 = %v, want only itself", s, got)
		}
	}

	var triples, drops int
	for _, s := range starts {
		reach := closure(s)
		for _, e := range events {
			d := lifecycle.Apply(s.current(), e)
			if d.Applied {
				continue
			}
			drops++
			for _, sp := range reach {
				triples++
				if d2 := lifecycle.Apply(sp.current(), e); d2.Applied {
					t.Errorf("E=%s dropped at S=%s (%s) but applied at reachable S'=%s (%s)",
						fmtEv(e), fmtCur(s.current()), d.Reason, fmtCur(sp.current()), d2.Reason)
				}
			}
		}
	}
	if triples == 0 {
		t.Fatal("no triples checked")
	}
	t.Logf("%d start states, %d events, %d dropped (S, E) pairs, %d (S, E, S') triples", len(starts), len(events), drops, triples)
}
