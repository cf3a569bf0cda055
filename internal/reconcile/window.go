package reconcile

import "sync"

// window bounds a pass's Gemini checks in flight, adapting within
// Config.Concurrency (additive increase, multiplicative decrease, as TCP
// does): a check Gemini answered with a transient error (429 RESOURCE_
// EXHAUSTED, 503: the project's quota or Gemini itself is overloaded) halves
// the bound, down to one; each bound's worth of answered checks raises it by
// one, back up to the configured concurrency. The budget (Budget) caps the
// rate of calls; the window keeps a pass from holding many calls open
// against a Gemini that is pushing back, which the rate alone does not.
// Each pass starts with a full window.
type window struct {
	mu       sync.Mutex
	freed    *sync.Cond
	max      int // Config.Concurrency
	limit    int // current bound, 1..max
	lowest   int // the smallest bound the pass came down to
	inflight int
	answered int // checks answered without pushback since the bound last changed
}

func newWindow(max int) *window {
	w := &window{max: max, limit: max, lowest: max}
	w.freed = sync.NewCond(&w.mu)
	return w
}

// tryAcquire takes a slot if the bound allows one.
func (w *window) tryAcquire() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.take()
}

func (w *window) take() bool {
	if w.inflight >= w.limit {
		return false
	}
	w.inflight++
	return true
}

// acquire waits for a slot. Slots free up as checks end, and a check that
// its pass's work context cut short ends at once, so this never outwaits
// the pass.
func (w *window) acquire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.take() {
		w.freed.Wait()
	}
}

// release gives a slot back; pushback says Gemini answered the check with a
// transient error.
func (w *window) release(pushback bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inflight--
	switch {
	case pushback:
		w.limit = max(1, w.limit/2)
		w.lowest = min(w.lowest, w.limit)
		w.answered = 0
	case w.limit < w.max:
		w.answered++
		if w.answered >= w.limit {
			w.limit++
			w.answered = 0
		}
	}
	w.freed.Broadcast()
}

// smallest is the lowest bound the pass came down to (max if Gemini never
// pushed back): the pass line's "concurrency".
func (w *window) smallest() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lowest
}
