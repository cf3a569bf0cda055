package sqliteledger

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
)

// TestCheckpointerCopiesCommitsIntoTheDatabaseFile: nothing is
// checkpointed before a write; after writes far below the writer's
// autocheckpoint (1,000 pages), the database file alone, read without its
// WAL, holds every operation: the checkpointer copied them there, off the
// writer's COMMIT.
func TestCheckpointerCopiesCommitsIntoTheDatabaseFile(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if n := s.Stats().Checkpoints; n != 0 {
		t.Fatalf("%d checkpoints before any write, want 0", n)
	}
	const n = 50
	for i := range n {
		if _, err := s.Apply(ctx, ledger.PutOperation(ledgertest.Op(fmt.Sprint("ck", i)))); err != nil {
			t.Fatal(err)
		}
	}
	// Polled: the checkpointer runs after the commits, on its own time.
	deadline := time.Now().Add(10 * time.Second)
	var inFile int
	for inFile = operationsInFile(t, path); inFile < n && time.Now().Before(deadline); inFile = operationsInFile(t, path) {
		time.Sleep(10 * time.Millisecond)
	}
	st := s.Stats()
	if inFile != n {
		t.Fatalf("the database file holds %d of %d operations (stats %+v): the WAL was not checkpointed", inFile, n, st)
	}
	if st.Checkpoints == 0 || st.CheckpointFailures != 0 {
		t.Errorf("stats %+v: want checkpoints, none failed", st)
	}
}

// operationsInFile counts the operations in a copy of the database file
// taken without its WAL: what checkpoints have copied there.
func operationsInFile(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+cp+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	err = db.QueryRowContext(t.Context(), "SELECT count(*) FROM operations").Scan(&n)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return 0 // not even the schema was copied yet
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCheckpointerCountsFailures: a checkpoint that fails is counted (the
// writer's own autocheckpoint still bounds the WAL), and close returns.
func TestCheckpointerCountsFailures(t *testing.T) {
	db, err := openPool(t.Context(), dsn(filepath.Join(t.TempDir(), "x.db"), false), 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close() // every checkpoint on it now fails
	c := startCheckpointer(db)
	c.committed()
	deadline := time.Now().Add(10 * time.Second)
	for c.failures.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if f, r := c.failures.Load(), c.runs.Load(); f != 1 || r != 1 {
		t.Errorf("%d failures in %d runs after one commit, want 1 in 1", f, r)
	}
	if err := c.close(); err != nil {
		t.Errorf("close: %v", err)
	}
}
