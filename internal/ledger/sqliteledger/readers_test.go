package sqliteledger

import (
	"context"
	"database/sql"
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
			_ = s.readers.do(context.Background(), func(*cachingConn) { busy <- struct{}{}; <-held })
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

// TestRowValuesScan: a driver row scans into the adapter's destination
// types, NULL into the Null types, and a value of the wrong type, an
// unsupported destination or a column count mismatch is an error, never a
// silent zero.
func TestRowValuesScan(t *testing.T) {
	var (
		s  string
		i  int64
		n  int
		ni sql.NullInt64
		ns sql.NullString
	)
	row := rowValues{"a", int64(7), int64(3), nil, "j"}
	if err := row.Scan(&s, &i, &n, &ni, &ns); err != nil {
		t.Fatal(err)
	}
	if s != "a" || i != 7 || n != 3 || ni.Valid || !ns.Valid || ns.String != "j" {
		t.Fatalf("scanned %q %d %d %+v %+v", s, i, n, ni, ns)
	}
	if err := (rowValues{int64(5), "x"}).Scan(&ni, &ns); err != nil || !ni.Valid || ni.Int64 != 5 || ns.String != "x" {
		t.Fatalf("non-NULL into Null types: %v %+v %+v", err, ni, ns)
	}
	var f float64
	for name, c := range map[string]struct {
		row  rowValues
		dest []any
	}{
		"string into int64":   {rowValues{"a"}, []any{&i}},
		"int64 into string":   {rowValues{int64(1)}, []any{&s}},
		"NULL into string":    {rowValues{nil}, []any{&s}},
		"unsupported type":    {rowValues{float64(1)}, []any{&f}},
		"fewer destinations":  {rowValues{"a", "b"}, []any{&s}},
		"string into NullInt": {rowValues{"a"}, []any{&ni}},
	} {
		if err := c.row.Scan(c.dest...); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
