package sqliteledger

import (
	"context"
	"sync"
)

// Point reads run on a few long-lived goroutines. SQLite's call chain
// (modernc's C translated to Go) needs a deep stack: a read on the caller's
// goroutine — in serve a fresh one per delivery — grew that goroutine's
// stack by copying it every time (runtime.copystack was 5–7 % of serve's CPU
// under load, docs/BENCHMARKS.md) and kept it grown for the rest of the
// request. The workers' stacks grow once and stay.
type readers struct {
	jobs chan *readJob
	stop chan struct{}
	once sync.Once // Store.Close may be called more than once
	wg   sync.WaitGroup
	pool sync.Pool // *readJob, so that a read allocates no channel
	n    int       // workers
}

type readJob struct {
	fn   func()
	done chan struct{}
}

func startReaders(n int) *readers {
	r := &readers{jobs: make(chan *readJob), stop: make(chan struct{}), n: n}
	r.pool.New = func() any { return &readJob{done: make(chan struct{}, 1)} }
	for range n {
		r.wg.Go(r.loop)
	}
	return r
}

func (r *readers) loop() {
	for {
		select {
		case j := <-r.jobs:
			j.fn()
			j.done <- struct{}{}
		case <-r.stop:
			return
		}
	}
}

// do runs fn on a worker and returns once it has run, or the context's
// error if ctx ends before a worker takes it (fn then never runs). fn must
// honour ctx itself: once taken it runs to its end.
func (r *readers) do(ctx context.Context, fn func()) error {
	// Checked first: select picks at random among ready cases, and an
	// idle worker is ready too.
	if err := ctx.Err(); err != nil {
		return err
	}
	j := r.pool.Get().(*readJob)
	j.fn = fn
	select {
	case r.jobs <- j:
	case <-ctx.Done():
		j.fn = nil
		r.pool.Put(j)
		return ctx.Err()
	case <-r.stop:
		j.fn = nil
		r.pool.Put(j)
		return errClosed
	}
	<-j.done
	j.fn = nil
	r.pool.Put(j)
	return nil
}

// close stops the workers; a read after close fails with errClosed.
func (r *readers) close() {
	r.once.Do(func() { close(r.stop) })
	r.wg.Wait()
}

// pointRead is the context a point read runs its statement with: ctx's
// values without its cancellation. A read by primary key in WAL mode takes
// microseconds and never waits for the writer, and a cancellable context
// costs two goroutines per statement (database/sql's and the driver's
// watchers of ctx). The caller's cancellation still counts until a worker
// takes the read (readers.do).
func pointRead(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
