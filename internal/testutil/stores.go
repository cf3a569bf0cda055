package testutil

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/ledger"
	fsledger "github.com/lrosink/lrosink/internal/ledger/firestore"
	"github.com/lrosink/lrosink/internal/ledger/sqlite"
)

// EachStore runs f as one subtest per ledger adapter the door runs on, each
// with a fresh, empty ledger: "sqlite" (a file in a temp dir) and
// "firestore" (a fresh project on the emulator). Both are closed when the
// subtest ends.
func EachStore(t *testing.T, f func(t *testing.T, s ledger.Ledger)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
		if err != nil {
			t.Fatalf("open sqlite ledger: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		f(t, s)
	})
	t.Run("firestore", func(t *testing.T) {
		c, _ := emutest.Firestore(t)
		f(t, fsledger.New(c, nil))
	})
}
