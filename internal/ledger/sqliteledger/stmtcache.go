package sqliteledger

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"modernc.org/sqlite"
)

// Prepared statements, kept per connection. database/sql prepares and
// finalizes a statement for every Exec or Query it is not given a *sql.Stmt
// for, and SQLite's parser was a fifth of serve's CPU under load
// (docs/BENCHMARKS.md). Every connection of the Store's pools therefore keeps
// each statement text it ran prepared, and runs it again reset (modernc's
// statements reset rather than finalize a single statement after use). It
// is done below database/sql, so the adapter's methods and the writes'
// closures keep passing SQL text.

// maxCachedStmts bounds one connection's cache: the adapter's statements
// are a few dozen fixed texts (PageOperations builds at most 32); a text
// beyond the bound is prepared per call as before.
const maxCachedStmts = 128

// connector opens modernc connections wrapped in a statement cache.
type connector struct{ base driver.Connector }

func newConnector(dsn string) (driver.Connector, error) {
	base, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return connector{base}, nil
}

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	inner, ok := conn.(innerConn)
	if !ok {
		return nil, errors.Join(fmt.Errorf("sqlite driver connection %T lacks the context methods", conn), conn.Close())
	}
	return &cachingConn{innerConn: inner, stmts: map[string]*cachedStmt{}}, nil
}

func (c connector) Driver() driver.Driver { return c.base.Driver() }

// innerConn is what the cache needs of a modernc connection, and forwards.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

type stmtContext interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

type cachedStmt struct {
	st stmtContext
	// busy while its rows are open: one statement cannot run twice at
	// once (a query inside a transaction may be run again before the rows
	// of the first are closed), so such a second use prepares its own.
	busy bool
}

// cachingConn is used by one goroutine at a time (database/sql's rule), so
// its map needs no lock.
type cachingConn struct {
	innerConn
	stmts map[string]*cachedStmt
}

// stmt returns query's statement and the function that gives it back.
func (c *cachingConn) stmt(ctx context.Context, query string) (stmtContext, func() error, error) {
	if e, ok := c.stmts[query]; ok && !e.busy {
		e.busy = true
		return e.st, func() error { e.busy = false; return nil }, nil
	}
	ds, err := c.innerConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	st, ok := ds.(stmtContext)
	if !ok {
		return nil, nil, errors.Join(fmt.Errorf("sqlite driver statement %T lacks the context methods", ds), ds.Close())
	}
	if _, ok := c.stmts[query]; ok || len(c.stmts) >= maxCachedStmts {
		return st, st.Close, nil
	}
	e := &cachedStmt{st: st, busy: true}
	c.stmts[query] = e
	return st, func() error { e.busy = false; return nil }, nil
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	st, put, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	res, err := st.ExecContext(ctx, args)
	return res, errors.Join(err, put())
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	st, put, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args)
	if err != nil {
		return nil, errors.Join(err, put())
	}
	return &cachedRows{Rows: rows, put: put}, nil
}

// Close finalizes the cached statements, then closes the connection.
func (c *cachingConn) Close() error {
	var errs []error
	for q, e := range c.stmts {
		errs = append(errs, e.st.Close())
		delete(c.stmts, q)
	}
	return errors.Join(append(errs, c.innerConn.Close())...)
}

// cachedRows gives its statement back when closed.
type cachedRows struct {
	driver.Rows
	put func() error
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	if r.put != nil {
		err = errors.Join(err, r.put())
		r.put = nil
	}
	return err
}
