package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/config"
)

// TestOpenErrorsNameTheFlag: a value given as a flag that cannot be opened
// is named as the flag the operator typed, not only as the variable it
// stands for (CONTRACT §2), in the read commands and the one-shot ones.
func TestOpenErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "l.db")
	if r := run(t, map[string]string{}, "register", "batches/a", "--create", "--store", db); r.code != 0 {
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

// TestMissingLedgerIsRefused: only serve creates a missing SQLite ledger.
// Every other command that opens one refuses, exit 2, naming the absolute
// path and what to do, and creates nothing; register --create creates one
// on purpose. Each command that opened a ledger names it in one stderr line.
func TestMissingLedgerIsRefused(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "lrosink.db")
	env := map[string]string{"LROSINK_STORE": "sqlite:" + missing, "LROSINK_RESULTS": "file:" + filepath.Join(dir, "r.jsonl")}
	want := "no ledger at " + missing + ": start `lrosink serve` there or set LROSINK_STORE"
	for _, args := range [][]string{
		{"register", "batches/a"}, {"ops", "list"}, {"ops", "show", "batches/a"}, {"ops", "backfill-shards"},
		{"replay", "batches/a"}, {"reconcile"},
	} {
		r := run(t, env, args...)
		if r.code != command.ExitUsage || !strings.Contains(r.stderr, want) || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", args, r.code, r.stdout, r.stderr, want)
		}
		if _, err := os.Stat(missing); err == nil {
			t.Fatalf("%v created the ledger", args)
		}
	}
	r := run(t, env, "register", "batches/a", "--create")
	if r.code != command.ExitOK || r.stderr != "lrosink register: ledger sqlite:"+missing+" (new: created now)\n" {
		t.Fatalf("register --create: exit %d, stderr %q", r.code, r.stderr)
	}
	// register --json: one line, the ledger still named on stderr.
	r = run(t, env, "register", "a", "--kind", "batch", "--json")
	var reg map[string]any
	if r.code != command.ExitOK || strings.Count(r.stdout, "\n") != 1 || json.Unmarshal([]byte(r.stdout), &reg) != nil ||
		reg["operation"] != "batches/a" || reg["created"] != false || reg["state"] != "PENDING" {
		t.Errorf("register --json: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"register", "batches/b"}, {"ops", "list"}, {"ops", "show", "batches/a"}} {
		r := run(t, env, args...)
		name := "lrosink " + args[0]
		if args[0] == "ops" {
			name += " " + args[1]
		}
		if r.code != command.ExitOK || r.stderr != name+": ledger sqlite:"+missing+"\n" {
			t.Errorf("%v: exit %d, stderr %q; want one line naming the ledger", args, r.code, r.stderr)
		}
	}
}

// TestRegisterInAnEmptyDirectory: the default ledger is ./lrosink.db; run
// from a directory without one, register refuses and names the absolute
// path instead of creating a ledger no serve sees.
func TestRegisterInAnEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	r := run(t, nil, "register", "batches/x")
	want := "lrosink register: no ledger at " + filepath.Join(dir, "lrosink.db") + ": start `lrosink serve` there or set LROSINK_STORE\n"
	if r.code != command.ExitUsage || r.stderr != want {
		t.Fatalf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("register left %v in the directory", entries)
	}
}

// TestDescribeStore: the ledger line names a SQLite ledger by its absolute
// path and a Firestore one by project, database and emulator.
func TestDescribeStore(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  config.Config
		want string
	}{
		{config.Config{Store: "sqlite:lrosink.db"}, "sqlite:" + filepath.Join(wd, "lrosink.db")},
		{config.Config{Store: "sqlite:/var/lib/l.db"}, "sqlite:/var/lib/l.db"},
		{config.Config{Store: "firestore", Project: "p1", FirestoreDatabase: "(default)"}, "firestore (project p1, database (default))"},
		{config.Config{Store: "firestore", Project: "p1", FirestoreDatabase: "db2", FirestoreEmulatorHost: "127.0.0.1:8681"},
			"firestore (project p1, database db2, emulator 127.0.0.1:8681)"},
	} {
		if got := describeStore(c.cfg); got != c.want {
			t.Errorf("describeStore(%q) = %q, want %q", c.cfg.Store, got, c.want)
		}
	}
}
