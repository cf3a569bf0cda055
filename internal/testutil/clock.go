package testutil

import (
	"time"

	"github.com/lrosink/lrosink/internal/clock"
)

// Clock is the tests' fake clock: time moves only when the test calls Set
// or Advance, and goroutines may read it meanwhile. It is the simulator's
// clock (internal/clock), so there is one of each.
type Clock = clock.Manual

// NewClock returns a fake clock reading t.
func NewClock(t time.Time) *Clock { return clock.NewManual(t) }
