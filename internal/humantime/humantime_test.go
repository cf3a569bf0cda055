package humantime

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		10 * time.Minute: "10m", 6 * time.Hour: "6h", 90 * time.Second: "1m30s", 10 * time.Second: "10s",
		429023 * time.Nanosecond: "429µs", 2240 * time.Microsecond: "2.2ms", 168 * time.Hour: "168h",
		2172989 * time.Nanosecond: "2.2ms", 2*time.Hour + 30*time.Minute: "2h30m", 1234 * time.Millisecond: "1.2s",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		45 * time.Second: "45s", -5 * time.Minute: "5m", 3*time.Hour + 5*time.Minute: "3h05m", 98 * time.Hour: "4d02h",
	} {
		if got := Age(d); got != want {
			t.Errorf("Age(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestUntil(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{now.Add(5 * time.Minute), "in 5m"},
		{now, "in 0s"},
		{now.Add(-5 * time.Minute), "5m overdue"},
		{now.Add(-26 * time.Hour), "1d02h overdue"},
		{time.Time{}, ""},
		{time.Unix(0, 0), ""},
	} {
		if got := Until(now, c.t); got != c.want {
			t.Errorf("Until(%v) = %q, want %q", c.t, got, c.want)
		}
	}
}
