package testutil

import (
	"os"
	"path/filepath"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/fsledger"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
)

// RequireEmulators names the environment variable that, set to 1, makes a
// test that wants the Firestore emulator fail when FIRESTORE_EMULATOR_HOST
// is missing instead of skipping its Firestore case. `make test` sets it,
// so there every Firestore case runs or the run fails.
const RequireEmulators = "LROSINK_REQUIRE_EMULATORS"

// MemLedger returns a fresh, empty in-memory ledger: the store of tests
// about logic (the door, the reconciler, the handlers), which then need no
// emulator. It passes the same storage suite as the real adapters and
// tallies reads and writes as the Firestore adapter does.
func MemLedger(t testing.TB) *memledger.Store {
	t.Helper()
	return memledger.New()
}

// EachStore runs f as one subtest per ledger adapter, each with a fresh,
// empty ledger: "memory", "sqlite" (a file in a temp dir) and "firestore"
// (a fresh project on the emulator; see Firestore for when it runs). Each is
// closed when its subtest ends.
func EachStore(t *testing.T, f func(t *testing.T, s ledger.Ledger)) {
	t.Helper()
	t.Run("memory", func(t *testing.T) {
		f(t, MemLedger(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqliteledger.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
		if err != nil {
			t.Fatalf("open sqlite ledger: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		f(t, s)
	})
	t.Run("firestore", func(t *testing.T) {
		f(t, FirestoreLedger(t))
	})
}

// Firestore returns a client for a fresh project on the Firestore emulator.
// Without FIRESTORE_EMULATOR_HOST it skips the test, saying so, so that the
// logic tests of a package run anywhere; with LROSINK_REQUIRE_EMULATORS=1
// (`make test`) it fails it instead: an emulator case is never skipped where
// the emulators are meant to be.
func Firestore(t testing.TB) *firestore.Client {
	t.Helper()
	run, fatal, skip := firestorePolicy(os.Getenv)
	switch {
	case fatal != "":
		t.Fatal(fatal)
	case !run:
		t.Skip(skip)
	}
	c, _ := emutest.Firestore(t)
	return c
}

// FirestoreLedger is the Firestore adapter on a fresh emulator project, or
// a skip or failure as Firestore decides.
func FirestoreLedger(t testing.TB) *fsledger.Store {
	t.Helper()
	return fsledger.New(Firestore(t), nil)
}

// firestorePolicy decides, from the environment, whether a Firestore case
// runs, and if not whether that is a failure or a skip (and says why).
func firestorePolicy(getenv func(string) string) (run bool, fatal, skip string) {
	if getenv("FIRESTORE_EMULATOR_HOST") != "" {
		return true, "", ""
	}
	if getenv(RequireEmulators) == "1" {
		return false, "FIRESTORE_EMULATOR_HOST is not set but " + RequireEmulators + "=1 requires the emulators: " +
			"run the tests with `make test`, which starts them (scripts/with-emulators.sh)", ""
	}
	return false, "", "skipped: FIRESTORE_EMULATOR_HOST is not set (this Firestore case runs under `make test`, which starts the emulators)"
}
