package sink

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// smallFS mounts a 64 KiB tmpfs in a temporary directory and returns it,
// unmounted when the test ends; "" where that cannot be done (not root, or
// mounts refused).
func smallFS(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: no small filesystem to fill, the injected short write stands in")
		return ""
	}
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Logf("mount a 64k tmpfs: %v: the injected short write stands in", err)
		return ""
	}
	// Registered after t.TempDir, so it runs before the directory is
	// removed, and after the cleanups the test registers later (closing the
	// files in it).
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}
