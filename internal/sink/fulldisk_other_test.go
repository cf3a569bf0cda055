//go:build !linux

package sink

import "testing"

// smallFS: only Linux tests mount a small filesystem.
func smallFS(t *testing.T) string {
	t.Log("no small filesystem to fill on this system: the injected short write stands in")
	return ""
}
