package sqliteledger

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
)

// TestPointReadsRunOnTheReaderGoroutines: GetOperation and GetClaim are run
// by the Store's reader goroutines, not on the caller's: with every worker
// held, a read waits for one, and gives up with its context's error
// without running; once a worker is free it answers.
func TestPointReadsRunOnTheReaderGoroutines(t *testing.T) {
	s := openTemp(t)
	held := make(chan struct{})
	var wg sync.WaitGroup
	busy := make(chan struct{}, 64)
	for range s.readers.n + 8 { // more holders than workers: all are taken
		wg.Go(func() {
			_ = s.readers.do(context.Background(), func() { busy <- struct{}{}; <-held })
		})
	}
	workers := 0
	for workers < s.readers.n {
		<-busy
		workers++
	}
	for _, read := range []func(context.Context) error{
		func(ctx context.Context) error { _, err := s.GetOperation(ctx, "batches/r1"); return err },
		func(ctx context.Context) error { _, err := s.GetClaim(ctx, "batches/r1"); return err },
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		err := read(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("read with every reader goroutine held: %v, want the context's deadline", err)
		}
	}
	close(held)
	wg.Wait()
	if _, err := s.GetOperation(t.Context(), "batches/r1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("read once the workers are free: %v, want ErrNotFound", err)
	}
}
