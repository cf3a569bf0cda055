package console

import (
	"sync"
	"time"

	"github.com/lrosink/lrosink/internal/reconcile"
)

// Pass is one reconcile pass as the health page shows it.
type Pass struct {
	Started, Ended time.Time
	Summary        reconcile.Summary
	// Err is the pass's error, if it stopped early ("" if it completed).
	Err string
}

// Passes keeps the last few reconcile passes of this process in memory: a
// fixed ring, so a long-running serve never grows it. On Cloud Run the
// Console service runs no passes (the Reconcile service does); the health
// page says so and points to the log query.
type Passes struct {
	mu   sync.Mutex
	ring []Pass
	next int
	full bool
}

// NewPasses returns a ring of n passes (at least 1).
func NewPasses(n int) *Passes { return &Passes{ring: make([]Pass, max(n, 1))} }

// Record adds p, dropping the oldest when the ring is full.
func (p *Passes) Record(pass Pass) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ring[p.next] = pass
	p.next = (p.next + 1) % len(p.ring)
	if p.next == 0 {
		p.full = true
	}
}

// Recent returns the recorded passes, newest first.
func (p *Passes) Recent() []Pass {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.next
	if p.full {
		n = len(p.ring)
	}
	out := make([]Pass, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, p.ring[(p.next-i+len(p.ring))%len(p.ring)])
	}
	return out
}

// Observer records every reconcile pass in p as it ends, at now().
func (p *Passes) Observer(now func() time.Time) reconcile.Observer {
	return passObserver{p, now}
}

type passObserver struct {
	p   *Passes
	now func() time.Time
}

func (o passObserver) ObservePass(started time.Time, s reconcile.Summary, err error) {
	pass := Pass{Started: started, Ended: o.now(), Summary: s}
	if err != nil {
		pass.Err = err.Error()
	}
	o.p.Record(pass)
}
