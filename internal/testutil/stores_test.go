package testutil

import (
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/ledger"
)

func TestFirestorePolicy(t *testing.T) {
	for _, c := range []struct {
		name        string
		env         map[string]string
		run         bool
		wantMessage string
	}{
		{"emulator set", map[string]string{"FIRESTORE_EMULATOR_HOST": "127.0.0.1:1"}, true, ""},
		{"emulator set and required", map[string]string{"FIRESTORE_EMULATOR_HOST": "127.0.0.1:1", RequireEmulators: "1"}, true, ""},
		{"missing, not required", map[string]string{}, false, "skipped"},
		{"missing, required", map[string]string{RequireEmulators: "1"}, false, RequireEmulators + "=1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			run, fatal, skip := firestorePolicy(func(k string) string { return c.env[k] })
			if run != c.run {
				t.Fatalf("run = %v, want %v", run, c.run)
			}
			required := c.env[RequireEmulators] == "1"
			switch {
			case run && (fatal != "" || skip != ""):
				t.Fatalf("runs but also says fatal %q skip %q", fatal, skip)
			case !run && required && (fatal == "" || skip != "" || !strings.Contains(fatal, c.wantMessage)):
				t.Fatalf("required and missing: fatal %q skip %q, want a failure naming %q", fatal, skip, c.wantMessage)
			case !run && !required && (skip == "" || fatal != "" || !strings.Contains(skip, c.wantMessage)):
				t.Fatalf("missing, not required: fatal %q skip %q, want a skip", fatal, skip)
			}
		})
	}
}

// TestEachStoreRunsTheMemoryAndSQLiteLedgers: whatever the environment,
// EachStore runs the memory and SQLite ledgers, each fresh.
func TestEachStoreRunsTheMemoryAndSQLiteLedgers(t *testing.T) {
	seen := map[string]bool{}
	EachStore(t, func(t *testing.T, s ledger.Ledger) {
		if _, err := s.GetOperation(t.Context(), "x"); err == nil {
			t.Errorf("%s: a fresh ledger has an operation", t.Name())
		}
		seen[t.Name()[strings.LastIndex(t.Name(), "/")+1:]] = true
	})
	if !seen["memory"] || !seen["sqlite"] {
		t.Fatalf("stores run: %v, want memory and sqlite", seen)
	}
}
