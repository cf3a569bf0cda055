package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenErrorsNameTheFlag: a value given as a flag that cannot be opened
// is named as the flag the operator typed, not only as the variable it
// stands for (CONTRACT §2), in the read commands and the one-shot ones.
func TestOpenErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "l.db")
	if r := run(t, map[string]string{}, "register", "batches/a", "--store", db); r.code != 0 {
		t.Fatalf("register: %d %s", r.code, r.stderr)
	}
	if r := run(t, map[string]string{}, "ops", "list", "--store", "sqlite:"+dir); r.code == 0 || !strings.Contains(r.stderr, "--store (LROSINK_STORE)") {
		t.Errorf("ops list --store DIR: exit %d, stderr %q; want a failure naming --store", r.code, r.stderr)
	}
	bad := "file:" + filepath.Join(dir, "missing", "r.jsonl")
	for _, args := range [][]string{
		{"replay", "batches/a", "--store", db, "--results", bad},
		{"reconcile", "--store", db, "--results", bad},
	} {
		if r := run(t, map[string]string{}, args...); r.code == 0 || !strings.Contains(r.stderr, "--results (LROSINK_RESULTS)") {
			t.Errorf("%s --results in a missing directory: exit %d, stderr %q; want a failure naming --results", args[0], r.code, r.stderr)
		}
	}
}
