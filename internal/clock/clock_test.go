package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/clock"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// TestManualMovesOnlyWhenTold: Now reads the start until Set or Advance
// moves it; Set may go back.
func TestManualMovesOnlyWhenTold(t *testing.T) {
	c := clock.NewManual(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now() = %s, want %s", got, t0)
	}
	c.Advance(90 * time.Second)
	if got, want := c.Now(), t0.Add(90*time.Second); !got.Equal(want) {
		t.Fatalf("after Advance: %s, want %s", got, want)
	}
	c.Set(t0.Add(-time.Hour))
	if got, want := c.Now(), t0.Add(-time.Hour); !got.Equal(want) {
		t.Fatalf("after Set: %s, want %s", got, want)
	}
	var zero clock.Manual
	if !zero.Now().IsZero() {
		t.Fatalf("zero Manual reads %s, want the zero time", zero.Now())
	}
}

// TestManualConcurrentAdvances: every Advance from many goroutines counts
// (no lost update), and readers may run meanwhile (go test -race checks it).
func TestManualConcurrentAdvances(t *testing.T) {
	c := clock.NewManual(t0)
	const workers, each = 8, 2000
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				c.Advance(time.Second)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got, want := c.Now(), t0.Add(workers*each*time.Second); !got.Equal(want) {
		t.Fatalf("after %d concurrent Advances: %s, want %s", workers*each, got, want)
	}
}

func TestAdvanceToNeverGoesBack(t *testing.T) {
	c := clock.NewManual(t0)
	c.AdvanceTo(t0.Add(2 * time.Second))
	c.AdvanceTo(t0.Add(time.Second))
	if got := c.Now(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("Now = %v, want t0+2s", got)
	}
}
