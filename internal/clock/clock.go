// Package clock holds a clock that moves only when it is told to: the
// simulator's world time, and (through internal/testutil) the tests' fake
// clock. It lives outside testutil because the simulator is not test code.
package clock

import (
	"sync"
	"time"
)

// Manual is a clock whose time changes only through Set and Advance. It is
// safe for concurrent use; the zero value reads the zero time.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a clock that reads t until it is moved.
func NewManual(t time.Time) *Manual { return &Manual{now: t} }

// Now returns the clock's time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t (backwards too).
func (c *Manual) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock forward by d, in one step: concurrent Advances
// all count.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// AdvanceTo moves the clock forward to t, never back: sleepers on a
// virtual clock each move it to when they wake, in any order, and it ends
// at the latest.
func (c *Manual) AdvanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}
