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

// stmtUse is one use of a statement: put gives it back to its cache, or
// closes it when it is not cached. A value, not a closure, so that a use
// allocates nothing.
type stmtUse struct {
	st     stmtContext
	cached *cachedStmt // nil: prepared for this use alone
}

func (u stmtUse) put() error {
	if u.cached == nil {
		return u.st.Close()
	}
	u.cached.busy = false
	return nil
}

// stmt returns a use of query's statement.
func (c *cachingConn) stmt(ctx context.Context, query string) (stmtUse, error) {
	if e, ok := c.stmts[query]; ok && !e.busy {
		e.busy = true
		return stmtUse{e.st, e}, nil
	}
	ds, err := c.innerConn.PrepareContext(ctx, query)
	if err != nil {
		return stmtUse{}, err
	}
	st, ok := ds.(stmtContext)
	if !ok {
		return stmtUse{}, errors.Join(fmt.Errorf("sqlite driver statement %T lacks the context methods", ds), ds.Close())
	}
	if _, ok := c.stmts[query]; ok || len(c.stmts) >= maxCachedStmts {
		return stmtUse{st, nil}, nil
	}
	e := &cachedStmt{st: st, busy: true}
	c.stmts[query] = e
	return stmtUse{st, e}, nil
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	use, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	res, err := use.st.ExecContext(ctx, args)
	return res, errors.Join(err, use.put())
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	use, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := use.st.QueryContext(ctx, args)
	if err != nil {
		return nil, errors.Join(err, use.put())
	}
	return &cachedRows{Rows: rows, use: use, open: true}, nil
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
	use  stmtUse
	open bool // the statement is not given back yet
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	if r.open {
		err = errors.Join(err, r.use.put())
		r.open = false
	}
	return err
}
