package sqliteledger

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// wtx is the group's transaction as its writes see it: statements run on
// the writer's driver connection directly, below database/sql. The group
// holds that connection for one transaction at a time (group.batch, through
// sql.Conn.Raw), so between transactions the pool serves as before.
// database/sql's per-statement costs — converting every argument,
// allocating its Result and Rows wrappers, taking its locks — were a tenth
// of the writer goroutine's work and the largest single source of
// allocations under load (docs/BENCHMARKS.md).
type wtx struct {
	c *cachingConn
	// changed counts the rows its statements changed (over all the
	// group's transactions: only differences are read), so
	// that the group knows whether a failed write changed any (runBare).
	changed int64
	// nv is the statements' converted arguments, reused from one statement
	// to the next: the driver binds them before a call returns and keeps
	// none, and a fresh slice per statement was the largest allocation of
	// serve under load (docs/BENCHMARKS.md). The group keeps one wtx for
	// all its transactions.
	nv []driver.NamedValue
}

// exec runs query with args and returns the number of rows it changed.
func (w *wtx) exec(ctx context.Context, query string, args ...any) (int64, error) {
	nv, err := w.args(args)
	if err != nil {
		return 0, err
	}
	res, err := w.c.ExecContext(ctx, query, nv)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	w.changed += n
	return n, err
}

// firstRow runs query on c (its statement kept prepared) and returns its
// first row as the driver gives it, sql.ErrNoRows when there is none.
func firstRow(ctx context.Context, c *cachingConn, query string, args []driver.NamedValue) (rowValues, error) {
	rows, err := c.QueryContext(ctx, query, args)
	if err != nil {
		return nil, err
	}
	vals := make(rowValues, len(rows.Columns()))
	switch err := rows.Next(vals); {
	case errors.Is(err, io.EOF):
		return nil, errors.Join(sql.ErrNoRows, rows.Close())
	case err != nil:
		return nil, errors.Join(err, rows.Close())
	}
	return vals, rows.Close()
}

// args converts args into w.nv.
func (w *wtx) args(args []any) ([]driver.NamedValue, error) {
	var err error
	w.nv, err = appendNamedValues(w.nv[:0], args)
	return w.nv, err
}

// appendNamedValues appends the adapter's statement arguments (strings,
// integers, nil) to nv as the driver's, as database/sql would convert them.
func appendNamedValues(nv []driver.NamedValue, args []any) ([]driver.NamedValue, error) {
	for i, a := range args {
		var v driver.Value
		switch a := a.(type) {
		case nil, int64, string, float64, bool, []byte:
			v = a
		case int:
			v = int64(a)
		case driver.Valuer:
			var err error
			if v, err = a.Value(); err != nil {
				return nv, fmt.Errorf("argument %d: %w", i+1, err)
			}
		default:
			return nv, fmt.Errorf("argument %d: unsupported type %T", i+1, a)
		}
		nv = append(nv, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	return nv, nil
}
