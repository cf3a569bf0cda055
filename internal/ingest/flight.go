package ingest

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// flight coalesces identical concurrent work (singleflight's idea) and runs
// each piece of work on a worker goroutine that outlives it. A fresh
// goroutine per delivery grew its stack from the minimum, by copying, on
// every run (the ledger's SQLite calls and the JSON encoders go deep:
// runtime.copystack was 5–6 % of serve's CPU under load,
// docs/BENCHMARKS.md); a worker's stack grows once. At most maxWorkers run
// at once: more work waits in a queue, in order, for the next free worker.
// Work in flight beyond what the ledger writer and the sink can take in
// only waits inside, each worker holding a grown stack (about a quarter of
// serve's memory at 500 senders), so the cap bounds memory. Work that waits
// on Gemini (a hint's confirmation) is not capped: a slow Gemini must not
// hold every worker while deliveries that need only the ledger queue
// behind it. Workers start on demand and exit after linger without work.
type flight struct {
	mu    sync.Mutex
	calls map[string]*call
	queue []func()      // work waiting for a worker, oldest first
	idle  []chan func() // the inboxes of workers waiting for work, newest last
	// workers is the number of worker goroutines (busy or idle).
	workers int

	max    int
	linger time.Duration

	started atomic.Int64 // workers ever started (tests)
}

// call is one run of the work, shared by every caller with its key.
type call struct {
	done chan struct{}
	out  outcome
}

const (
	// maxWorkers bounds the door's work in flight: enough for the ledger
	// writer's groups and the sink's gathered fsyncs to fill (both take
	// what is in flight at once). Measured at 500 senders: 64 lost 15 % of
	// the rate; 160 gained 5 % over 128 once the delivery log stopped
	// rewriting rows, for 1–2 MB and a p99 a few ms longer (85–90 ms in
	// those runs); 192 and 256 gained a few per cent more for 5–10 MB more
	// and a tail past 100 ms (docs/BENCHMARKS.md).
	maxWorkers = 160
	// workerLinger is how long an idle worker waits for work before it
	// exits: long enough to carry a steady load from one delivery to the
	// next, short enough that a burst's workers are gone soon after.
	workerLinger = 10 * time.Second
)

func newFlight() *flight {
	return &flight{calls: map[string]*call{}, max: maxWorkers, linger: workerLinger}
}

// do starts fn for key, or joins the run of fn for key already in flight or
// queued, and returns the call to wait on. key "" always runs alone.
// uncapped work gets a worker even when maxWorkers are busy.
func (f *flight) do(key string, uncapped bool, fn func() outcome) *call {
	f.mu.Lock()
	if c, ok := f.calls[key]; ok && key != "" {
		f.mu.Unlock()
		return c
	}
	c := &call{done: make(chan struct{})}
	if key != "" {
		f.calls[key] = c
	}
	f.runLocked(uncapped, func() {
		c.out = fn()
		if key != "" {
			f.mu.Lock()
			delete(f.calls, key)
			f.mu.Unlock()
		}
		close(c.done)
	})
	return c
}

// runLocked hands fn to the newest idle worker, starts a worker (below the
// cap, or for uncapped work), or queues fn; it unlocks f.mu.
func (f *flight) runLocked(uncapped bool, fn func()) {
	if n := len(f.idle); n > 0 {
		inbox := f.idle[n-1]
		f.idle = f.idle[:n-1]
		f.mu.Unlock()
		inbox <- fn // buffered: never blocks
		return
	}
	if f.workers < f.max || uncapped {
		f.workers++
		f.mu.Unlock()
		f.started.Add(1)
		go f.work(fn)
		return
	}
	f.queue = append(f.queue, fn)
	f.mu.Unlock()
}

func (f *flight) work(fn func()) {
	inbox := make(chan func(), 1)
	t := time.NewTimer(f.linger)
	defer t.Stop()
	for {
		fn()
		f.mu.Lock()
		if len(f.queue) > 0 {
			fn = f.queue[0]
			f.queue[0] = nil
			f.queue = f.queue[1:]
			f.mu.Unlock()
			continue
		}
		f.idle = append(f.idle, inbox)
		f.mu.Unlock()
		t.Reset(f.linger)
		select {
		case fn = <-inbox:
		case <-t.C:
			f.mu.Lock()
			if i := slices.Index(f.idle, inbox); i >= 0 {
				f.idle = slices.Delete(f.idle, i, i+1)
				f.workers--
				f.mu.Unlock()
				return
			}
			// Taken off the idle list by runLocked, whose fn is on its way.
			f.mu.Unlock()
			fn = <-inbox
		}
	}
}

// waiting counts the idle workers (tests).
func (f *flight) waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.idle)
}
