package testutil_test

import (
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/testutil"
)

// TestClockIsSetByTheTest: the fake clock reads what NewClock was given
// and moves only by Advance and Set (the concurrency guarantees are
// internal/clock's tests).
func TestClockIsSetByTheTest(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	c := testutil.NewClock(t0)
	var now func() time.Time = c.Now // what the components under test take
	if !now().Equal(t0) {
		t.Fatalf("Now() = %s, want %s", now(), t0)
	}
	c.Advance(time.Minute)
	c.Advance(time.Minute)
	if want := t0.Add(2 * time.Minute); !now().Equal(want) {
		t.Fatalf("after two Advances: %s, want %s", now(), want)
	}
	c.Set(t0)
	if !now().Equal(t0) {
		t.Fatalf("after Set: %s, want %s", now(), t0)
	}
}
