//go:build !linux

package testutil

import "testing"

// SmallFS: only Linux tests mount a small filesystem; "" here.
func SmallFS(t testing.TB, size string) string {
	t.Log("no small filesystem to fill on this system")
	return ""
}

// FillFS: there is no SmallFS to fill here.
func FillFS(t testing.TB, path string) { t.Fatal("FillFS: no small filesystem on this system") }
