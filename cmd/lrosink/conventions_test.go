package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestTheBinaryNeverSurprises (issue #50), with the real binary as a new
// user runs it: a mistyped command and a mistyped event type exit 2 with
// the suggestion; register in an empty directory refuses, naming the
// path, and creates nothing; `lrosink bench` beside a serve's ledger and
// results file loads a throwaway serve of its own and leaves both as they
// were.
func TestTheBinaryNeverSurprises(t *testing.T) {
	bin := build(t, "")
	empty := t.TempDir()

	out, errOut, code := runCLI(t, bin, empty, "sned", "batch.succeeded", "--id", "x")
	if code != 2 || out != "" || errOut != "lrosink: unknown command \"sned\"; did you mean \"send\"?\nRun 'lrosink --help' for usage.\n" {
		t.Errorf("lrosink sned: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = runWith(t, bin, empty, []string{"LROSINK_WEBHOOK_SECRETS=" + webhooktest.NewSecret()}, "send", "batch.succeded", "--id", "x")
	if code != 2 || out != "" || !strings.Contains(errOut, "did you mean batch.succeeded?") || !strings.Contains(errOut, "video.generated") {
		t.Errorf("lrosink send batch.succeded: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = runCLI(t, bin, empty, "ops", "lsit")
	if code != 2 || !strings.Contains(errOut, `lrosink ops: unknown subcommand "lsit"; did you mean "list"?`) {
		t.Errorf("lrosink ops lsit: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	_, errOut, code = runCLI(t, bin, empty, "register", "batches/x")
	if want := "no ledger at " + filepath.Join(empty, "lrosink.db") + ": start `lrosink serve` there or set LROSINK_STORE"; code != 2 || !strings.Contains(errOut, want) {
		t.Errorf("register in an empty directory: exit %d, stderr %q; want 2 and %q", code, errOut, want)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("register left %v in the empty directory", entries)
	}

	// A serve's directory: its ledger (one operation completed) and results.
	dir, secret := t.TempDir(), webhooktest.NewSecret()
	p := serve(t, bin, dir, []string{"LROSINK_WEBHOOK_SECRETS=" + secret, "LROSINK_RESULTS=file:results.jsonl"})
	mustDeliver(t, p.base, secret, "mine", "msg_mine", "completed")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	// serve alone creates the ledger, and says so.
	if want := "lrosink: ledger sqlite:" + filepath.Join(dir, "lrosink.db") + " (new: created now)\n"; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("serve's stderr does not name the ledger it created (%q):\n%s", want, p.stderr.String())
	}
	before := testutil.DirState(t, dir)
	if _, ok := before["lrosink.db"]; !ok {
		t.Fatalf("no serve ledger in %v", before)
	}
	tmp := t.TempDir()
	out, errOut, code = runWith(t, bin, dir, []string{"TMPDIR=" + tmp, "LROSINK_WEBHOOK_SECRETS=" + secret, "LROSINK_RESULTS=file:results.jsonl"},
		"bench", "--duration", "1s", "--concurrency", "4")
	if code != 0 || !strings.Contains(out, "throwaway serve (this process; temporary ledger and results file, deleted)") ||
		!strings.Contains(out, "results messages published: ") {
		t.Fatalf("bench: exit %d\n%s%s", code, out, errOut)
	}
	if after := testutil.DirState(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("bench changed the serve's directory:\nbefore %v\nafter  %v", before, after)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("bench left %v in TMPDIR", left)
	}
}
