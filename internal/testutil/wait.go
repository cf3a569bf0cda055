package testutil

import (
	"testing"
	"time"
)

// WaitFor polls cond every 20 ms until it holds, failing the test after
// within: a bound on a hang, never a measured duration.
func WaitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
