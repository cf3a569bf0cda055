package reconcile

import (
	"testing"
	"time"
)

// TestNextStuckAlert: the schedule holds however irregular the passes are:
// a late pass alerts once for every point it passed and the next point is
// the first one after it.
func TestNextStuckAlert(t *testing.T) {
	s := time.Date(2026, 11, 21, 18, 0, 0, 0, time.UTC)
	h := time.Hour
	for _, c := range []struct {
		last time.Time
		want time.Time
	}{
		{time.Time{}, s},
		{s.Add(-h), s}, // alerted before it became stuck (StuckAfter was raised)
		{s, s.Add(h)},
		{s.Add(30 * time.Minute), s.Add(h)},
		{s.Add(h), s.Add(6 * h)},
		{s.Add(7 * h), s.Add(24 * h)},
		{s.Add(24 * h), s.Add(48 * h)},
		{s.Add(50 * h), s.Add(72 * h)},
		{s.Add(72 * h), s.Add(96 * h)},
	} {
		if got := nextStuckAlert(s, c.last); !got.Equal(c.want) {
			t.Errorf("last alert at +%v: next at +%v, want +%v", c.last.Sub(s), got.Sub(s), c.want.Sub(s))
		}
	}
}
