package sink

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/lrosink/lrosink/internal/results"
)

// TestFilePublishersShareFsyncs: publishes whose lines are written while
// another fsync runs are covered by one fsync after it, and none returns
// before an fsync covering its line completed. The running fsync is
// stood in for by holding syncMu, so the group forms without timing.
func TestFilePublishersShareFsyncs(t *testing.T) {
	f := tempFile(t)
	const n = 16
	f.syncMu.Lock()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = f.Publish(t.Context(), results.Message{Operation: fmt.Sprintf("batches/g%d", i)})
		})
	}
	waitWritten(f, n)
	if f.synced != 0 {
		t.Fatalf("synced %d lines while the fsync lock was held", f.synced)
	}
	f.syncMu.Unlock()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if f.synced != n || f.syncs != 1 {
		t.Fatalf("%d publishes: %d fsyncs covering %d lines, want 1 covering %d", n, f.syncs, f.synced, n)
	}
}

// TestFileLeaderGathersConcurrentPublishes: an fsync leader that finds other
// publishes in flight lets them write first (gather), so one fsync covers
// them all, with nothing else holding the fsync back; gather stands in for
// the syncWindow sleep and returns once every line is written.
func TestFileLeaderGathersConcurrentPublishes(t *testing.T) {
	f := tempFile(t)
	const n = 16
	gathered := 0
	f.gather = func() {
		gathered++
		waitWritten(f, n)
	}
	// Others count as in flight for the whole test, so whichever publish
	// leads the fsync gathers.
	f.inflight.Add(1)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = f.Publish(t.Context(), results.Message{Operation: fmt.Sprintf("batches/w%d", i)})
		})
	}
	wg.Wait()
	f.inflight.Add(-1)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if f.syncs != 1 || f.synced != n || gathered != 1 {
		t.Fatalf("%d concurrent publishes: %d fsyncs covering %d lines after %d gathers, want 1 covering %d after 1", n, f.syncs, f.synced, gathered, n)
	}
}

// TestFileLonePublishDoesNotWait: with no other publish in flight the line
// is fsynced at once, without the gathering window.
func TestFileLonePublishDoesNotWait(t *testing.T) {
	f := tempFile(t)
	f.gather = func() { t.Error("a lone publish waited for others") }
	for i := range 3 {
		if err := f.Publish(t.Context(), results.Message{Operation: fmt.Sprintf("batches/l%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if f.syncs != 3 || f.synced != 3 {
		t.Fatalf("3 lone publishes: %d fsyncs covering %d lines, want 3 covering 3", f.syncs, f.synced)
	}
}

// waitWritten waits until n lines have been written to f.
func waitWritten(f *File, n int64) {
	for {
		f.mu.Lock()
		w := f.written
		f.mu.Unlock()
		if w == n {
			return
		}
		runtime.Gosched()
	}
}

// tempFile opens a results file in a temporary directory, closed when the
// test ends.
func tempFile(t *testing.T) *File {
	t.Helper()
	f, err := NewFile(filepath.Join(t.TempDir(), "results.jsonl"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}
