package sqliteledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
)

// Group commit. SQLite admits one writer, and each write transaction pays
// its BEGIN IMMEDIATE … COMMIT (a WAL append of every page it touched). So
// the Store's one writer goroutine gathers the writes queued while it was
// busy into one transaction; a write whose fn fails (a fence, or any error)
// fails alone and the others commit together. A lone write never waits:
// the writer begins as soon as it is free and takes whatever is queued.
//
// A write runs bare, without a savepoint of its own, as long as every
// failure so far changed nothing: a fence or conflict found by a statement
// that changed no row (what every fenced put's failure is) leaves nothing
// to undo, and SQLite undoes a failed single-row statement itself. Any
// other failure, or one after the write changed rows, rolls the
// transaction back and runs its writes again in the next transaction, each
// in its own SAVEPOINT, which a failing write is rolled back to. A
// savepoint per write cost two more statements and a copy of every page
// the write touched into the statement journal: 15 % of the writer's CPU
// under load (docs/BENCHMARKS.md).
const (
	// maxGroup bounds the writes of one transaction: a few hundred
	// writes keep the transaction's dirty pages (and the WAL frames
	// one COMMIT appends) in the page cache, and the callers' latency
	// bounded at the cost of a few hundred small writes (≈ 50–150 µs each).
	maxGroup = 256
	// groupWindow bounds how long one transaction keeps taking writes that
	// arrive while it runs, so that a steady stream cannot hold the first
	// callers' results back: ~1 ms is a few times one write's cost, small
	// beside the latency a caller sees from the HTTP path. Under load (the
	// previous transaction held more than one write) the transaction also
	// waits out the window for writes still to come: every COMMIT appends
	// every page its writes touched to the WAL, and concurrent writes share
	// most of them (the ends of the time-ordered indexes). Taking whatever
	// happened to be queued gave 1.75 writes per transaction at 50 senders
	// and 8.5 WAL pages per delivery (docs/BENCHMARKS.md). A lone writer
	// never waits.
	groupWindow = time.Millisecond
)

// errClosed is the answer to a write after Close.
var errClosed = errors.New("store closed")

// Stats counts the Store's write transactions and checkpoints since Open.
type Stats struct {
	// Transactions is the number of write transactions committed.
	Transactions int64
	// Writes is the number of writes (calls of the Store's write methods)
	// those transactions committed; Writes / Transactions is the mean
	// group size.
	Writes int64
	// Checkpoints is the number of checkpoints the checkpointer ran
	// (checkpoint.go), CheckpointFailures how many of them failed, and
	// CheckpointBacklog the WAL frames the last one left uncopied.
	Checkpoints, CheckpointFailures, CheckpointBacklog int64
}

// Stats returns the Store's write and checkpoint counters.
func (s *Store) Stats() Stats {
	return Stats{Transactions: s.group.txs.Load(), Writes: s.group.writes.Load(),
		Checkpoints: s.ckpt.runs.Load(), CheckpointFailures: s.ckpt.failures.Load(), CheckpointBacklog: s.ckpt.backlog.Load()}
}

// The states of a queued write: the writer takes it, or its caller gives up
// on it first (its context ended); whoever changes the state first decides.
const (
	reqQueued int32 = iota
	reqTaken
	reqCancelled
)

// writeFn is a write's work in the group's transaction. Its statements run with ctx,
// the caller's context without its cancellation: an interrupted statement
// makes SQLite roll back the whole transaction, every write of the group
// with it, and a cancellable context costs a watcher goroutine per
// statement. A caller's cancellation counts until the writer takes its
// write (group.write).
type writeFn func(ctx context.Context, tx *wtx) error

type writeReq struct {
	ctx   context.Context
	what  fmt.Stringer // built only for an error (Apply's names every write)
	fn    writeFn
	state atomic.Int32
	// retried is set when the request was run once in a transaction that
	// was lost to another write (see batch): it is retried only once.
	retried bool
	err     error
	done    chan struct{}
}

// group is the Store's writer: a queue and the one goroutine draining it.
type group struct {
	db        *sql.DB
	committed func() // after each COMMIT (startGroup)

	mu     sync.Mutex
	queue  []*writeReq
	closed bool

	wake   chan struct{} // capacity 1: "the queue may be non-empty"
	stop   chan struct{} // closed by Close
	exited chan struct{} // closed when the writer goroutine returns

	// loaded: the last transaction held more than one write, so more are
	// likely on their way (only the writer goroutine uses it).
	loaded bool
	timer  *time.Timer // the writer's, for waiting out the window
	// tx is the writer's transaction, one value for all of them so that its
	// argument slice is reused (only the writer goroutine uses it).
	tx wtx

	window time.Duration // groupWindow (tests set their own)
	max    int           // maxGroup (tests set their own)
	taken  atomic.Int64  // writes taken by the writer (tests)
	redone atomic.Int64  // transactions undone to run again in savepoints (tests)

	txs, writes atomic.Int64
}

// startGroup starts the writer goroutine; committed is called after each
// COMMIT (the checkpointer's kick: it must not block).
func startGroup(db *sql.DB, committed func()) *group {
	g := &group{db: db, committed: committed, wake: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{}),
		window: groupWindow, max: maxGroup}
	go g.loop()
	return g
}

// close stops accepting writes, lets the writer finish what is queued and
// waits for it to return.
func (g *group) close() {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		close(g.stop)
	}
	g.mu.Unlock()
	<-g.exited
}

// write queues fn and waits for its result, delivered after its
// transaction committed (or failed). A context that ends while the write is
// queued takes it out: it is never written and the context's error is
// returned at once. Once taken, the caller waits for the transaction, which
// is bounded by maxGroup and groupWindow.
func (g *group) write(ctx context.Context, what fmt.Stringer, fn writeFn) error {
	if err := ctx.Err(); err != nil {
		return fail(ctx, what.String(), err)
	}
	r := &writeReq{ctx: ctx, what: what, fn: fn, done: make(chan struct{})}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return fmt.Errorf("sqlite: %s: %w", what, errClosed)
	}
	g.queue = append(g.queue, r)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqCancelled) {
			return r.failed(ctx.Err())
		}
		<-r.done
		return r.err
	}
}

// queued counts the writes waiting to be taken (tests use it to know a
// group has formed).
func (g *group) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, r := range g.queue {
		if r.state.Load() == reqQueued {
			n++
		}
	}
	return n
}

// take takes up to n queued writes, oldest first, dropping the cancelled.
func (g *group) take(n int) []*writeReq {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*writeReq
	i := 0
	for ; i < len(g.queue) && len(out) < n; i++ {
		if r := g.queue[i]; r.state.CompareAndSwap(reqQueued, reqTaken) {
			out = append(out, r)
		}
	}
	g.taken.Add(int64(len(out)))
	clear(g.queue[:i]) // let the taken and the cancelled be collected
	g.queue = g.queue[i:]
	if len(g.queue) == 0 {
		g.queue = nil
	}
	return out
}

func (g *group) pending() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue) > 0
}

func (g *group) loop() {
	defer close(g.exited)
	var carry []*writeReq
	for {
		for len(carry) > 0 || g.pending() {
			carry = g.batch(carry)
		}
		select {
		case <-g.stop:
			// No write is queued after closed is set; drain what was.
			if !g.pending() {
				return
			}
		case <-g.wake:
		}
	}
}

// batch runs one transaction: first carry (writes whose transaction was
// lost, see below), then the queued writes, taking more as they arrive
// until maxGroup or groupWindow. It returns the writes to run again.
//
// BEGIN comes before taking, so that the writes stay cancellable while
// BEGIN IMMEDIATE waits for another process's write lock.
func (g *group) batch(carry []*writeReq) (again []*writeReq) {
	// Not a caller's context: this transaction serves many callers.
	ctx := context.Background()
	ran := false
	conn, err := g.db.Conn(ctx)
	if err == nil {
		err = onDriverConn(conn, "writer", func(c *cachingConn) {
			ran = true
			g.tx.c = c
			again = g.batchOn(ctx, &g.tx, carry)
			g.tx.c = nil // back in the pool
		})
		_ = conn.Close() // back to the pool; batchOn ended its transaction
	}
	if !ran {
		// No transaction could begin: every write waiting fails.
		for _, r := range append(carry, g.take(g.max-len(carry))...) {
			r.finish(r.failed(err))
		}
	}
	return again
}

// batchOn is batch on the writer connection's transaction tx. Writes run
// bare unless carry holds writes run again: then each runs in a savepoint.
func (g *group) batchOn(ctx context.Context, tx *wtx, carry []*writeReq) []*writeReq {
	start := time.Now()
	safe := len(carry) > 0
	if _, err := tx.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
		for _, r := range append(carry, g.take(g.max-len(carry))...) {
			r.finish(r.failed(err))
		}
		return nil
	}
	var (
		ran    []*writeReq // fn succeeded: their result is the COMMIT's
		failed []*writeReq // their own error, delivered after COMMIT too
	)
	next := carry
	n := len(carry)
	for len(next) > 0 || n < g.max {
		if len(next) == 0 {
			if n > 0 && time.Since(start) >= g.window {
				break
			}
			if next = g.take(g.max - n); len(next) == 0 {
				if g.loaded && g.await(start.Add(g.window)) {
					continue
				}
				break
			}
			n += len(next)
		}
		r := next[0]
		next = next[1:]
		if err := r.ctx.Err(); err != nil {
			r.err = r.failed(err) // not written
			failed = append(failed, r)
			continue
		}
		if !safe {
			if err, alone := runBare(ctx, tx, r); err == nil {
				ran = append(ran, r)
				continue
			} else if alone {
				r.err = err
				failed = append(failed, r)
				continue
			}
			// The failure may have left changes: undo the transaction and
			// run its writes again, each in a savepoint. This is not a lost
			// transaction, so none of them counts as retried.
			abandon(ctx, tx, failed)
			g.redone.Add(1)
			return append(append(ran, r), next...)
		}
		ferr, lost := g.runOne(ctx, tx, r)
		if ferr != nil {
			r.err = ferr
			failed = append(failed, r)
		} else {
			ran = append(ran, r)
		}
		if lost != nil {
			// The transaction is gone (SQLite rolls the whole
			// transaction back on some I/O errors, or when interrupted,
			// which writeFn's context rules out): the writes already run
			// in it were not written. They, and those not run yet, go
			// to the next transaction; one already retried fails.
			abandon(ctx, tx, failed) // the connection may still hold the transaction
			var again []*writeReq
			for _, q := range append(ran, next...) {
				if q.retried {
					q.finish(q.failed(fmt.Errorf("transaction lost: %w", lost)))
					continue
				}
				q.retried = true
				again = append(again, q)
			}
			return again
		}
	}
	g.loaded = len(ran)+len(failed) > 1
	var err error
	if len(ran) == 0 {
		_, err = tx.exec(ctx, "ROLLBACK")
	} else if _, err = tx.exec(ctx, "COMMIT"); err == nil {
		g.txs.Add(1)
		g.writes.Add(int64(len(ran)))
		g.committed()
	} else {
		// A failed COMMIT may leave the transaction open on the writer's
		// connection; end it so the next BEGIN does not fail.
		_, _ = tx.exec(ctx, "ROLLBACK")
	}
	for _, r := range ran {
		if err != nil {
			r.finish(r.failed(err))
			continue
		}
		r.finish(nil)
	}
	for _, r := range failed {
		r.finish(r.err)
	}
	return nil
}

// await waits until a write is queued (true) or until deadline or Close
// (false).
func (g *group) await(deadline time.Time) bool {
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	if g.timer == nil {
		g.timer = time.NewTimer(d)
	} else {
		g.timer.Reset(d)
	}
	defer g.timer.Stop()
	select {
	case <-g.wake:
		return true
	case <-g.timer.C:
		return false
	case <-g.stop:
		return false
	}
}

// abandon rolls tx back and delivers the errors of the writes that failed
// alone in it; the writes that ran go to another transaction.
func abandon(ctx context.Context, tx *wtx, failed []*writeReq) {
	_, _ = tx.exec(ctx, "ROLLBACK")
	for _, q := range failed {
		q.finish(q.err)
	}
}

// runBare runs r's fn in tx without a savepoint. On failure, alone says the
// failure is r's alone: a fence or a conflict, with no row changed by r, so
// nothing needs undoing (SQLite undoes a failed single-row statement, and
// one that touches many rows is given its own statement journal).
func runBare(ctx context.Context, tx *wtx, r *writeReq) (err error, alone bool) {
	before := tx.changed
	err = callFn(r.fn, context.WithoutCancel(r.ctx), tx)
	if err == nil {
		return nil, false
	}
	if tx.changed == before && (errors.Is(err, ledger.ErrConflict) || errors.Is(err, ledger.ErrFenced)) {
		return fmt.Errorf("sqlite: %s: %w", r.what, err), true
	}
	return err, false
}

// runOne runs r's fn inside a savepoint of tx. It returns fn's error,
// wrapped, and, when the savepoint could not be opened, rolled back or
// released, the error that says the transaction was lost.
func (g *group) runOne(ctx context.Context, tx *wtx, r *writeReq) (ferr, lost error) {
	if _, err := tx.exec(ctx, "SAVEPOINT w"); err != nil {
		return nil, err
	}
	if err := callFn(r.fn, context.WithoutCancel(r.ctx), tx); err != nil {
		if errors.Is(err, ledger.ErrConflict) || errors.Is(err, ledger.ErrFenced) {
			ferr = fmt.Errorf("sqlite: %s: %w", r.what, err)
		} else {
			ferr = r.failed(err)
		}
		if _, err := tx.exec(ctx, "ROLLBACK TO w"); err != nil {
			return ferr, err
		}
	}
	if _, err := tx.exec(ctx, "RELEASE w"); err != nil {
		return ferr, err
	}
	return ferr, nil
}

// callFn runs fn, turning a panic into its error: fn runs on the writer
// goroutine, where a panic would end the process rather than the one
// request (net/http recovers a handler's panic); it fails like any other
// failure (not a fence: a bare group runs again in savepoints).
func callFn(fn writeFn, ctx context.Context, tx *wtx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in write: %v", p)
		}
	}()
	return fn(ctx, tx)
}

// failed is err as the store reports it for r (fail, named by r.what).
func (r *writeReq) failed(err error) error { return fail(r.ctx, r.what.String(), err) }

func (r *writeReq) finish(err error) {
	r.err = err
	close(r.done)
}
