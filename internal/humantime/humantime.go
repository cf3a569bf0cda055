// Package humantime formats durations for people, one way everywhere a
// person reads them (the console, `ops show`, `--help`): never
// "429.023µs" or "10m0s".
package humantime

import (
	"fmt"
	"strings"
	"time"
)

// Duration formats a configured duration, a latency or a run time:
// "6h", "10m", "1m30s", "2.2ms", "429µs".
func Duration(d time.Duration) string {
	switch {
	case d >= time.Second:
		d = d.Round(100 * time.Millisecond)
	case d >= time.Millisecond:
		d = d.Round(100 * time.Microsecond)
	case d >= time.Microsecond:
		d = d.Round(time.Microsecond)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Age formats how long ago or until: "45s", "12m", "3h05m", "4d02h"
// (a negative d counts as its size).
func Age(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// Never reports whether t was never observed: absent, or the epoch that an
// event without a server time is stored at (it loses every tie).
func Never(t time.Time) bool { return t.IsZero() || t.Equal(time.Unix(0, 0)) }

// Until says how far t is from now in words that cannot be misread: "in
// 5m" ahead, "5m overdue" behind, so a past time never reads as a
// countdown; "" when t was never observed.
func Until(now, t time.Time) string {
	if Never(t) {
		return ""
	}
	if d := t.Sub(now); d >= 0 {
		return "in " + Age(d)
	}
	return Age(now.Sub(t)) + " overdue"
}
