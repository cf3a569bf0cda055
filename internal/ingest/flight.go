package ingest

import (
	"sync"
	"sync/atomic"
	"time"
)

// flight coalesces identical concurrent work (singleflight's idea) and runs
// each piece of work on a worker goroutine that outlives it. A fresh
// goroutine per delivery grew its stack from the minimum, by copying, on
// every run (the ledger's SQLite calls and the JSON encoders go deep:
// runtime.copystack was 5–6 % of serve's CPU under load,
// docs/BENCHMARKS.md); a worker's stack grows once. Workers are started on
// demand, never capped, and exit after linger without work.
type flight struct {
	mu    sync.Mutex
	calls map[string]*call

	idle   chan func() // unbuffered: a send succeeds only to a waiting worker
	linger time.Duration

	started, waiting atomic.Int64 // workers started; workers waiting on idle (tests)
}

// call is one run of the work, shared by every caller with its key.
type call struct {
	done chan struct{}
	out  outcome
}

// workerLinger is how long an idle worker waits for work before it exits:
// long enough to carry a steady load from one delivery to the next, short
// enough that a burst's workers are gone soon after.
const workerLinger = 10 * time.Second

func newFlight() *flight {
	return &flight{calls: map[string]*call{}, idle: make(chan func()), linger: workerLinger}
}

// do starts fn for key, or joins the run of fn for key already in flight,
// and returns the call to wait on. key "" always runs alone.
func (f *flight) do(key string, fn func() outcome) *call {
	if key != "" {
		f.mu.Lock()
		if c, ok := f.calls[key]; ok {
			f.mu.Unlock()
			return c
		}
	}
	c := &call{done: make(chan struct{})}
	if key != "" {
		f.calls[key] = c
		f.mu.Unlock()
	}
	f.run(func() {
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

// run hands fn to an idle worker, or starts one.
func (f *flight) run(fn func()) {
	select {
	case f.idle <- fn:
	default:
		f.started.Add(1)
		go f.work(fn)
	}
}

func (f *flight) work(fn func()) {
	t := time.NewTimer(f.linger)
	defer t.Stop()
	for {
		fn()
		t.Reset(f.linger)
		f.waiting.Add(1)
		select {
		case fn = <-f.idle:
			f.waiting.Add(-1)
		case <-t.C:
			f.waiting.Add(-1)
			return
		}
	}
}
