package sqliteledger

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/lrosink/lrosink/internal/ledger"
)

// Point reads run on a few long-lived goroutines. SQLite's call chain
// (modernc's C translated to Go) needs a deep stack: a read on the caller's
// goroutine — in serve a fresh one per delivery — grew that goroutine's
// stack by copying it every time (runtime.copystack was 5–7 % of serve's CPU
// under load, docs/BENCHMARKS.md) and kept it grown for the rest of the
// request. The workers' stacks grow once and stay.
//
// Each worker holds one connection of its own pool and runs its statement
// on the driver connection directly (pointRow): database/sql's pool, Rows
// and Scan conversions were a fifth of a point read's cost, and a read of
// one row by key needs none of them.
type readers struct {
	jobs chan *readJob
	stop chan struct{}
	once sync.Once // Store.Close may be called more than once
	wg   sync.WaitGroup
	pool sync.Pool // *readJob, so that a read allocates no channel
	n    int       // workers
}

type readJob struct {
	fn   func(*cachingConn)
	done chan struct{}
}

// startReaders starts one worker per connection of db (its pool must have
// n connections), each holding its connection until close.
func startReaders(ctx context.Context, db *sql.DB, n int) (*readers, error) {
	r := &readers{jobs: make(chan *readJob), stop: make(chan struct{}), n: n}
	r.pool.New = func() any { return &readJob{done: make(chan struct{}, 1)} }
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("reader connection: %w", err)
		}
		r.wg.Go(func() { r.loop(c) })
	}
	return r, nil
}

func (r *readers) loop(c *sql.Conn) {
	defer c.Close() //nolint:errcheck // back to its pool, which Close closes
	for {
		select {
		case j := <-r.jobs:
			if err := onDriverConn(c, "reader", j.fn); err != nil {
				j.fn(nil) // no usable connection: fn reports errClosed
			}
			j.done <- struct{}{}
		case <-r.stop:
			return
		}
	}
}

// do runs fn on a worker and returns once it has run, or the context's
// error if ctx ends before a worker takes it (fn then never runs). Once
// taken, fn runs to its end (a point read: microseconds).
func (r *readers) do(ctx context.Context, fn func(*cachingConn)) error {
	// Checked first: select picks at random among ready cases, and an
	// idle worker is ready too.
	if err := ctx.Err(); err != nil {
		return err
	}
	j := r.pool.Get().(*readJob)
	defer func() {
		j.fn = nil
		r.pool.Put(j)
	}()
	j.fn = fn
	select {
	case r.jobs <- j:
	case <-ctx.Done():
		return ctx.Err()
	case <-r.stop:
		return errClosed
	}
	<-j.done
	return nil
}

// onDriverConn runs fn on c's driver connection, below database/sql (the
// group's transactions and the point reads; role names the connection in
// the error when it is not one of this package's).
func onDriverConn(c *sql.Conn, role string, fn func(*cachingConn)) error {
	return c.Raw(func(dc any) error {
		cc, ok := dc.(*cachingConn)
		if !ok {
			return fmt.Errorf("%s connection is a %T", role, dc)
		}
		fn(cc)
		return nil
	})
}

// close stops the workers; a read after close fails with errClosed.
func (r *readers) close() {
	r.once.Do(func() { close(r.stop) })
	r.wg.Wait()
}

// getOne is a point read on a reader goroutine: query, which takes id,
// scanned with scan; what names the row ("operation") in the errors, and
// no row is ledger.ErrNotFound.
func getOne[T any](ctx context.Context, r *readers, what, query, id string, scan func(scanner) (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	if rerr := r.do(ctx, func(c *cachingConn) { v, err = pointRow(c, query, id, scan) }); rerr != nil {
		err = rerr
	}
	var zero T
	if errors.Is(err, sql.ErrNoRows) {
		return zero, fmt.Errorf("sqlite: get %s %s: %w", what, id, ledger.ErrNotFound)
	}
	if err != nil {
		return zero, fail(ctx, "get "+what+" "+id, err)
	}
	return v, nil
}

// pointRow runs query, which takes one argument, on c and scans its one
// row with scan (sql.ErrNoRows when there is none). The statement runs
// without a cancellable context: a read by primary key in WAL mode takes
// microseconds and never waits for the writer, and a cancellable context
// costs a watcher goroutine per statement; the caller's cancellation
// counts until a worker takes the read (readers.do).
func pointRow[T any](c *cachingConn, query string, arg any, scan func(scanner) (T, error)) (T, error) {
	if c == nil {
		var zero T
		return zero, errClosed
	}
	row, err := firstRow(context.Background(), c, query, []driver.NamedValue{{Ordinal: 1, Value: arg}})
	if err != nil {
		var zero T
		return zero, err
	}
	return scan(row)
}

// pointRead returns "SELECT cols FROM table WHERE id = ?" with each of the
// comma-separated cols written as "+col AS x", x a letter: a point read
// runs for every delivery, and modernc's driver makes a Go string of each
// result column's name and declared type on every query (two allocations
// per column, a tenth of serve's allocations under load). A one-byte name
// needs no allocation, and the unary + (a no-op on every value, NULL
// included) leaves the column without a declared type; the scanners read
// by position, and the plan is the same (TestQueryPlans).
func pointRead(cols, table string) string {
	const names = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, c := range strings.Split(cols, ",") {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("+" + strings.TrimSpace(c) + " AS " + names[i:i+1])
	}
	b.WriteString(" FROM " + table + " WHERE id = ?")
	return b.String()
}

// rowValues is a row as the driver gives it (STRICT tables: TEXT is a
// string, INTEGER an int64, NULL nil), scanned into the few types the
// adapter's scanners use.
type rowValues []driver.Value

func (v rowValues) Scan(dest ...any) error {
	if len(dest) != len(v) {
		return fmt.Errorf("scan %d columns into %d values", len(v), len(dest))
	}
	for i, d := range dest {
		ok := true
		switch d := d.(type) {
		case *string:
			*d, ok = v[i].(string)
		case *int64:
			*d, ok = v[i].(int64)
		case *int:
			var n int64
			n, ok = v[i].(int64)
			*d = int(n)
		case *sql.NullInt64:
			*d = sql.NullInt64{}
			if v[i] != nil {
				d.Int64, ok = v[i].(int64)
				d.Valid = true
			}
		case *sql.NullString:
			*d = sql.NullString{}
			if v[i] != nil {
				d.String, ok = v[i].(string)
				d.Valid = true
			}
		default:
			return fmt.Errorf("scan column %d: unsupported destination %T", i, d)
		}
		if !ok {
			return fmt.Errorf("scan column %d: %T into %T", i, v[i], d)
		}
	}
	return nil
}
