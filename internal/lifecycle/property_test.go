package lifecycle_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/lifecycle"
)

const (
	propStreams = 10_000
	// propSeed is the base seed; stream i uses seed propSeed+i, so a failure
	// names the one seed that reproduces it.
	propSeed uint64 = 0x5eed_11fe
)

var terminals = []lifecycle.State{"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "INCOMPLETE"}

var zones = []*time.Location{time.UTC, cest, time.FixedZone("PST", -8*3600), time.FixedZone("IST", 5*3600+1800)}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// stream is one operation's generated event stream.
type stream struct {
	events    []lifecycle.Event
	terminals []lifecycle.State // the distinct terminal states in the stream
	termTime  map[lifecycle.State]time.Time
}

// genStream generates a realistic lifecycle: PENDING(t0) → RUNNING(t1) →
// alternating REQUIRES_ACTION/RUNNING with increasing distinct times → nTerm
// different terminals, each later than every non-terminal time. Sometimes
// unknown-state and zero-time events are mixed in. Every event then gets 0–3
// re-delivered copies (same instant, possibly another zone or sub-microsecond
// jitter) and the whole stream is shuffled.
func genStream(r *rand.Rand, nTerm int) stream {
	t := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.IntN(1<<20)) * time.Second)
	tick := func() time.Time {
		// millisecond steps: distinct after microsecond truncation
		t = t.Add(time.Duration(1+r.IntN(5000)) * time.Millisecond)
		return t
	}
	var evs []lifecycle.Event
	add := func(s lifecycle.State, at time.Time) { evs = append(evs, ev(s, at)) }
	add("PENDING", tick())
	add("RUNNING", tick())
	for i, n := 0, r.IntN(5); i < n; i++ {
		add("REQUIRES_ACTION", tick())
		add("RUNNING", tick())
	}
	if r.IntN(2) == 0 {
		add("REQUIRES_ACTION", tick()) // the terminal may follow REQUIRES_ACTION
	}
	st := stream{termTime: map[lifecycle.State]time.Time{}}
	for _, i := range r.Perm(len(terminals))[:nTerm] {
		s := terminals[i]
		st.terminals = append(st.terminals, s)
		st.termTime[s] = tick()
		add(s, st.termTime[s])
	}
	last := t
	if r.IntN(3) == 0 { // unknown-state events, at any time, even after the terminal
		for i, n := 0, 1+r.IntN(3); i < n; i++ {
			at := time.Time{}
			if r.IntN(4) != 0 {
				at = last.Add(time.Duration(r.IntN(20_000)-15_000) * time.Millisecond)
			}
			add([]lifecycle.State{"JOB_STATE_PAUSED", "", "PAUSED", "running"}[r.IntN(4)], at)
		}
	}
	if r.IntN(3) == 0 { // zero-time events of non-terminal states
		for i, n := 0, 1+r.IntN(3); i < n; i++ {
			add([]lifecycle.State{"PENDING", "RUNNING", "REQUIRES_ACTION"}[r.IntN(3)], time.Time{})
		}
	}
	for _, e := range evs[:len(evs):len(evs)] {
		for range r.IntN(4) {
			c := e
			if !c.UpdateTime.IsZero() {
				// same instant as seen by another delivery path
				c.UpdateTime = c.UpdateTime.Add(time.Duration(r.IntN(1000))).In(zones[r.IntN(len(zones))])
			}
			evs = append(evs, c)
		}
	}
	r.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	st.events = evs
	return st
}

// stepChecker runs one stream through Apply and checks the per-step
// invariants. It returns the final Current and the trace of decisions.
type stepResult struct {
	final      lifecycle.Current
	decisions  []lifecycle.Decision
	enters     int             // how many decisions had EntersTerminal
	firstTerm  lifecycle.State // the state when EntersTerminal fired
	firstTermI int             // the index of that event
}

func runStream(evs []lifecycle.Event) (stepResult, []string) {
	var (
		res  = stepResult{firstTermI: -1}
		prev lifecycle.Current
		bad  []string
	)
	fail := func(i int, format string, args ...any) {
		bad = append(bad, fmt.Sprintf("step %d (%s): ", i, fmtEv(evs[i]))+fmt.Sprintf(format, args...))
	}
	for i, e := range evs {
		d := lifecycle.Apply(prev, e)
		res.decisions = append(res.decisions, d)
		if lifecycle.Regressed(prev, d.Next) {
			fail(i, "Regressed(%s, %s)", fmtCur(prev), fmtCur(d.Next))
		}
		if d.Applied && sameProgress(prev, d.Next) {
			fail(i, "applied (%s) but Next %s == prev", d.Reason, fmtCur(d.Next))
		}
		if !d.Applied && !sameProgress(prev, d.Next) {
			fail(i, "dropped (%s) but Next %s != prev %s", d.Reason, fmtCur(d.Next), fmtCur(prev))
		}
		if d.FirstSighting != (!prev.Exists && d.Next.Exists) {
			fail(i, "FirstSighting=%v with prev %s next %s", d.FirstSighting, fmtCur(prev), fmtCur(d.Next))
		}
		wasTerm := prev.Exists && isTerminal(prev.State)
		isTerm := d.Next.Exists && isTerminal(d.Next.State)
		if wasTerm && !isTerm {
			fail(i, "left terminal %s for %s", fmtCur(prev), fmtCur(d.Next))
		}
		if d.EntersTerminal != (!wasTerm && isTerm) {
			fail(i, "EntersTerminal=%v with prev %s next %s", d.EntersTerminal, fmtCur(prev), fmtCur(d.Next))
		}
		if d.EntersTerminal {
			res.enters++
			if res.enters > 1 {
				fail(i, "EntersTerminal a second time")
			}
			res.firstTerm, res.firstTermI = d.Next.State, i
		}
		prev = d.Next
	}
	res.final = prev
	return res, bad
}

func reportStream(t *testing.T, seed uint64, evs []lifecycle.Event, res stepResult, bad []string) {
	t.Helper()
	var trace strings.Builder
	for i, e := range evs {
		if i < len(res.decisions) {
			d := res.decisions[i]
			fmt.Fprintf(&trace, "  [%d] %s -> applied=%v %s next=%s enters=%v\n", i, fmtEv(e), d.Applied, d.Reason, fmtCur(d.Next), d.EntersTerminal)
		}
	}
	t.Errorf("seed %d: %d violations:\n  %s\nstream:\n%s", seed, len(bad), strings.Join(bad, "\n  "), trace.String())
}

// TestApplyStreamsOneTerminal feeds shuffled realistic streams with one
// terminal and checks the per-step invariants, the prefix maximum, and that
// the final state is the stream's terminal whatever the order.
func TestApplyStreamsOneTerminal(t *testing.T) {
	var steps, failures int
	for i := range propStreams {
		seed := propSeed + uint64(i)
		r := newRand(seed)
		st := genStream(r, 1)
		term := st.terminals[0]
		res, bad := runStream(st.events)
		steps += len(st.events)

		// Prefix maximum: with distinct server times, the stored progress
		// after every step is the maximal (rank, time) among the known
		// events seen so far.
		var (
			maxK key
			seen bool
		)
		for j, e := range st.events {
			if _, ok := oracleRank[e.State]; ok {
				if k := evKey(e); !seen || maxK.less(k) {
					maxK, seen = k, true
				}
			}
			n := res.decisions[j].Next
			if seen != n.Exists || (seen && curKey(n) != maxK) {
				bad = append(bad, fmt.Sprintf("step %d: Next %s, want progress key %+v (seen=%v)", j, fmtCur(n), maxK, seen))
			}
		}
		if res.final.State != term || micros(res.final.UpdateTime) != micros(st.termTime[term]) {
			bad = append(bad, fmt.Sprintf("final %s, want %s@%s", fmtCur(res.final), term, fmtTime(st.termTime[term])))
		}
		if res.enters != 1 || res.firstTerm != term {
			bad = append(bad, fmt.Sprintf("EntersTerminal %d times, first terminal %q, want once with %q", res.enters, res.firstTerm, term))
		}
		// Order independence: other shuffles end in the same progress.
		for range 2 {
			other := append([]lifecycle.Event(nil), st.events...)
			r.Shuffle(len(other), func(a, b int) { other[a], other[b] = other[b], other[a] })
			res2, bad2 := runStream(other)
			if len(bad2) > 0 || !sameProgress(res2.final, res.final) {
				bad = append(bad, fmt.Sprintf("reshuffled stream ends in %s (violations %v), original in %s\nreshuffled:\n%s",
					fmtCur(res2.final), bad2, fmtCur(res.final), fmtStream(other)))
			}
		}
		if len(bad) > 0 {
			reportStream(t, seed, st.events, res, bad)
			if failures++; failures >= 5 {
				t.Fatal("too many failing streams")
			}
		}
	}
	t.Logf("%d streams, %d events", propStreams, steps)
}

// TestApplyStreamsTwoTerminals: a stream with two different terminals ends
// in whichever terminal arrived first; every later event with the other
// terminal is a terminal-conflict and every later copy of the winner a
// duplicate; the side effect is owed exactly once.
func TestApplyStreamsTwoTerminals(t *testing.T) {
	var conflicts, failures int
	for i := range propStreams {
		seed := propSeed + 1<<32 + uint64(i)
		r := newRand(seed)
		st := genStream(r, 2)
		res, bad := runStream(st.events)

		first := -1
		for j, e := range st.events {
			if isTerminal(e.State) {
				first = j
				break
			}
		}
		winner := st.events[first].State
		if res.final.State != winner || micros(res.final.UpdateTime) != micros(st.events[first].UpdateTime) {
			bad = append(bad, fmt.Sprintf("final %s, want the first terminal %s", fmtCur(res.final), fmtEv(st.events[first])))
		}
		if res.enters != 1 || res.firstTermI != first {
			bad = append(bad, fmt.Sprintf("EntersTerminal %d times, at step %d, want once at step %d", res.enters, res.firstTermI, first))
		}
		for j := first + 1; j < len(st.events); j++ {
			e, d := st.events[j], res.decisions[j]
			var want lifecycle.Reason
			switch {
			case e.State == winner:
				want = lifecycle.ReasonDuplicate
			case isTerminal(e.State):
				want = lifecycle.ReasonTerminalConflict
				conflicts++
				if !d.Conflict() {
					bad = append(bad, fmt.Sprintf("step %d: %s after %s: Conflict() false", j, fmtEv(e), winner))
				}
			case rankOf(e.State) < 0:
				want = lifecycle.ReasonUnknownState
			default:
				want = lifecycle.ReasonRegressFromTerminal
			}
			if d.Applied || d.Reason != want {
				bad = append(bad, fmt.Sprintf("step %d: %s after terminal %s: applied=%v %s, want dropped %s", j, fmtEv(e), winner, d.Applied, d.Reason, want))
			}
		}
		if len(bad) > 0 {
			reportStream(t, seed, st.events, res, bad)
			if failures++; failures >= 5 {
				t.Fatal("too many failing streams")
			}
		}
	}
	if conflicts == 0 {
		t.Fatal("no terminal-conflict exercised")
	}
	t.Logf("%d streams, %d terminal conflicts", propStreams, conflicts)
}
