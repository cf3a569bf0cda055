package sqliteledger

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
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

// TestPointReadAllocatesNoColumnNames: the point reads' one-letter,
// untyped columns (pointRead) spare the driver a string per column name
// and declared type on every read: at least one allocation per column
// fewer than the same read of the plain columns, counted, not timed. The
// rows read are the same.
func TestPointReadAllocatesNoColumnNames(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	op := ledgertest.Op("batches/alloc1")
	op.History = []ledger.HistoryEntry{{Source: "webhook", Reason: "applied"}}
	if _, err := s.Apply(ctx, ledger.PutOperation(op)); err != nil {
		t.Fatal(err)
	}
	plain := `SELECT ` + opColumns + ` FROM operations WHERE id = ?`
	read := func(query string) (ledger.Operation, float64) {
		var got ledger.Operation
		var err error
		n := testing.AllocsPerRun(50, func() {
			if rerr := s.readers.do(ctx, func(c *cachingConn) { got, err = pointRow(c, query, op.ID, scanOperation) }); rerr != nil {
				err = rerr
			}
		})
		if err != nil {
			t.Fatalf("read with %q: %v", query, err)
		}
		return got, n
	}
	want, plainAllocs := read(plain)
	got, pointAllocs := read(sqlGetOperation)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("point read = %+v, plain read = %+v", got, want)
	}
	t.Logf("allocations: point %.0f, plain %.0f", pointAllocs, plainAllocs)
	if cols := strings.Count(opColumns, ",") + 1; pointAllocs > plainAllocs-float64(cols) {
		t.Fatalf("point read: %.0f allocations, plain columns: %.0f; want at least %d (one per column) fewer", pointAllocs, plainAllocs, cols)
	}
}

func TestPointReadQuery(t *testing.T) {
	if got, want := pointRead("id, name,\n\tstate", "t"), "SELECT +id AS a, +name AS b, +state AS c FROM t WHERE id = ?"; got != want {
		t.Fatalf("pointRead = %q, want %q", got, want)
	}
}
