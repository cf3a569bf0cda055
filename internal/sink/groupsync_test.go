package sink

import (
	"fmt"
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
	f, err := NewFile(filepath.Join(t.TempDir(), "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	const n = 16
	f.syncMu.Lock()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = f.Publish(t.Context(), results.Message{Operation: fmt.Sprintf("batches/g%d", i)})
		})
	}
	for {
		f.mu.Lock()
		w := f.written
		f.mu.Unlock()
		if w == n {
			break
		}
		runtime.Gosched()
	}
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
