package sqliteledger

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
)

// cached returns the statement texts the connection of db keeps prepared.
func cached(t *testing.T, db *sql.DB) map[string]bool {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close() //nolint:errcheck // test
	out := map[string]bool{}
	if err := conn.Raw(func(dc any) error {
		for q := range dc.(*cachingConn).stmts {
			out[q] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStatementsStayPrepared: a write's statements and the group's
// transaction statements stay prepared on the writer's connection after use.
func TestStatementsStayPrepared(t *testing.T) {
	s := openTemp(t)
	if _, _, err := claims.New(s).CommitOperation(t.Context(), ledgertest.Op("s1"), nil); err != nil {
		t.Fatal(err)
	}
	got := cached(t, s.writer)
	for _, q := range []string{sqlInsertOperation, "BEGIN IMMEDIATE", "COMMIT"} {
		if !got[q] {
			t.Errorf("statement not kept prepared after use: %.40q", q)
		}
	}
}

// TestStatementRunTwiceAtOnce: inside one transaction a query whose rows
// are still open can run again (the second use prepares its own).
func TestStatementRunTwiceAtOnce(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	for _, id := range []string{"t1", "t2"} {
		if _, _, err := claims.New(s).CommitOperation(ctx, ledgertest.Op(id), nil); err != nil {
			t.Fatal(err)
		}
	}
	// The group holds the writer connection only during its transactions:
	// between them a transaction through database/sql uses it as before.
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	err = func() error {
		const q = `SELECT id FROM operations ORDER BY id`
		outer, err := tx.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		defer outer.Close() //nolint:errcheck // test
		n := 0
		for outer.Next() {
			inner, err := tx.QueryContext(ctx, q)
			if err != nil {
				return err
			}
			for inner.Next() {
				// Bounded: a statement shared by both loops would
				// restart the outer one forever.
				if n++; n > 100 {
					return errors.New("the nested read never ends")
				}
			}
			if err := inner.Close(); err != nil {
				return err
			}
		}
		if n != 4 {
			t.Errorf("nested reads saw %d rows, want 4", n)
		}
		return outer.Err()
	}()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// And the cached statement still works afterwards.
	if _, err := s.GetOperation(context.WithoutCancel(ctx), "t1"); err != nil {
		t.Fatal(err)
	}
}

// TestCachedStatementUseAllocatesNothing: taking a kept statement and
// giving it back allocates nothing (each of a completion's statements did
// once, for the closure that gave it back).
func TestCachedStatementUseAllocatesNothing(t *testing.T) {
	s := openTemp(t)
	conn, err := s.writer.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close() //nolint:errcheck // test
	ctx := context.WithoutCancel(t.Context())
	if err := conn.Raw(func(dc any) error {
		c := dc.(*cachingConn)
		use, err := c.stmt(ctx, sqlGetOperation)
		if err != nil {
			return err
		}
		if use.cached == nil {
			t.Fatal("the statement was not kept")
		}
		if err := use.put(); err != nil {
			return err
		}
		if n := testing.AllocsPerRun(100, func() {
			use, err := c.stmt(ctx, sqlGetOperation)
			if err != nil || use.cached == nil {
				t.Fatalf("stmt = %+v, %v", use, err)
			}
			if err := use.put(); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("a use of a kept statement allocated %v times, want 0", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
