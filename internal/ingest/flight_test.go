package ingest

import (
	"bytes"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// goid is the running goroutine's id, read from its stack header.
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return string(bytes.Fields(buf)[1])
}

// TestFlightRunsWorkOnReusedWorkers: work handed to the flight one piece
// after another runs on the one worker the first started, not on a fresh
// goroutine each time (whose stack would grow anew), and never on the
// caller's.
func TestFlightRunsWorkOnReusedWorkers(t *testing.T) {
	f := newFlight()
	caller := goid()
	ids := make([]string, 5)
	for i := range ids {
		c := f.do("", false, func() outcome { ids[i] = goid(); return outcome{} })
		<-c.done
		for f.waiting() < 1 { // a worker is back, waiting for work
			runtime.Gosched()
		}
	}
	if n := f.started.Load(); n != 1 {
		t.Fatalf("%d workers started for sequential work, want 1", n)
	}
	for _, id := range ids {
		if id == caller || id != ids[0] {
			t.Fatalf("work ran on goroutines %v (caller %s), want one worker", ids, caller)
		}
	}
}

// TestFlightCoalescesOneKey: concurrent callers with one key share one run;
// key "" always runs alone.
func TestFlightCoalescesOneKey(t *testing.T) {
	f := newFlight()
	release := make(chan struct{})
	var runs atomic.Int32
	work := func() outcome { runs.Add(1); <-release; return outcome{res: Result{Outcome: "shared"}} }
	first := f.do("k", false, work)
	var calls []*call
	for range 7 {
		calls = append(calls, f.do("k", false, work))
	}
	alone := []*call{f.do("", false, work), f.do("", false, work)}
	close(release)
	var wg sync.WaitGroup
	for _, c := range append(append(calls, first), alone...) {
		wg.Go(func() { <-c.done })
	}
	wg.Wait()
	for _, c := range calls {
		if c != first || c.out.res.Outcome != "shared" {
			t.Fatalf("a caller of key k got its own run (%p, %q), want the first's", c, c.out.res.Outcome)
		}
	}
	if n := runs.Load(); n != 3 {
		t.Fatalf("%d runs, want 3 (one for key k, two alone)", n)
	}
	if _, ok := f.calls["k"]; ok {
		t.Fatal("key k still in flight after its run ended")
	}
}

// TestFlightCapsWorkersAndQueuesTheRest: no more than max pieces of work run
// at once; the rest wait in order and run as workers free up, and all of it
// runs.
func TestFlightCapsWorkersAndQueuesTheRest(t *testing.T) {
	f := newFlight()
	f.max = 3
	release := make(chan struct{})
	var running, peak atomic.Int32
	var mu sync.Mutex
	var order []int
	var calls []*call
	for i := range 10 {
		calls = append(calls, f.do("", false, func() outcome {
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			<-release
			running.Add(-1)
			return outcome{}
		}))
	}
	for running.Load() < 3 {
		runtime.Gosched()
	}
	f.mu.Lock()
	queued, workers := len(f.queue), f.workers
	f.mu.Unlock()
	if queued != 7 || workers != 3 {
		t.Fatalf("10 pieces of work with max 3: %d workers, %d queued; want 3 and 7", workers, queued)
	}
	close(release)
	for _, c := range calls {
		<-c.done
	}
	if p := peak.Load(); p != 3 {
		t.Fatalf("%d ran at once, want at most (and here exactly) 3", p)
	}
	if n := f.started.Load(); n != 3 {
		t.Fatalf("%d workers started, want 3", n)
	}
	// One worker: the queue's order is the order work runs in.
	one := newFlight()
	one.max = 1
	hold := make(chan struct{})
	order = nil
	calls = calls[:0]
	for i := range 6 {
		calls = append(calls, one.do("", false, func() outcome {
			<-hold
			order = append(order, i) // one worker: no other writer
			return outcome{}
		}))
	}
	close(hold)
	for _, c := range calls {
		<-c.done
	}
	if !slices.Equal(order, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("with one worker, work ran in order %v, want 0…5", order)
	}
}

// TestFlightUncappedWorkRunsBesideAFullPool: work marked uncapped (a hint
// waiting on Gemini) gets a worker though every capped one is busy.
func TestFlightUncappedWorkRunsBesideAFullPool(t *testing.T) {
	f := newFlight()
	f.max = 1
	hold := make(chan struct{})
	busy := f.do("", false, func() outcome { <-hold; return outcome{} })
	ran := make(chan struct{})
	uncapped := f.do("", true, func() outcome { close(ran); return outcome{} })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("uncapped work waited behind the full pool")
	}
	<-uncapped.done
	close(hold)
	<-busy.done
}
