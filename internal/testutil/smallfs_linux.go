package testutil

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallFS mounts a tmpfs of size (as mount's size= option: "64k") in a
// temporary directory and returns the directory, unmounted when the test
// ends; "" where that cannot be done (not root, or mounts refused), said
// in the test's log. Filling it makes writes under it fail part-way with
// ENOSPC, as a full disk does.
func SmallFS(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: no small filesystem to fill")
		return ""
	}
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Logf("mount a tmpfs of %s: %v", size, err)
		return ""
	}
	// Registered after t.TempDir's, so it runs before the directory is
	// removed and after every cleanup the test registers later (closing the
	// files in it).
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// FillFS writes path until its filesystem has no room left (a SmallFS).
func FillFS(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 1024)
	for range 1 << 10 {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			return
		}
	}
	t.Fatalf("wrote 1 MiB into %s without filling its filesystem", path)
}
