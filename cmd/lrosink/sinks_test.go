package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// runWith runs a one-shot lrosink command in dir with exactly the given
// lrosink variables.
func runWith(t *testing.T, bin, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, childEnv(env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("lrosink %v: %v", args, err)
	}
	return out.String(), errb.String(), 0
}

// TestPublishingCommandsNeedAConfiguredSink: replay and reconcile publish
// only to an explicitly configured LROSINK_RESULTS. With only LROSINK_STORE
// set (the runbook's claim-missing procedure as a new user runs it) they
// refuse with exit 2 and one line naming the variable, and print no results
// message on the operator's terminal; with it set, replay publishes there.
func TestPublishingCommandsNeedAConfiguredSink(t *testing.T) {
	bin := build(t, "")
	dir, secret := t.TempDir(), webhooktest.NewSecret()
	p := serve(t, bin, dir, []string{"LROSINK_WEBHOOK_SECRETS=" + secret})
	mustDeliver(t, p.base, secret, "sink_a", "msg_s1", "completed")
	if l := p.next(t); l.Operation != "batches/sink_a" {
		t.Fatalf("serve published %+v", l)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	store := "LROSINK_STORE=sqlite:" + filepath.Join(dir, "lrosink.db")

	for _, args := range [][]string{{"replay", "batches/sink_a"}, {"reconcile"}} {
		out, errOut, code := runWith(t, bin, dir, []string{store}, args...)
		if code != 2 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "LROSINK_RESULTS") {
			t.Errorf("%v with only LROSINK_STORE: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, one line naming LROSINK_RESULTS", args, code, out, errOut)
		}
	}
	if s := show(t, bin, dir, "batches/sink_a"); s.Claim.Status != "DONE" {
		t.Fatalf("claim after the refused replay: %+v", s.Claim)
	}

	results := filepath.Join(dir, "results.jsonl")
	out, errOut, code := runWith(t, bin, dir, []string{store, "LROSINK_RESULTS=file:" + results}, "replay", "batches/sink_a")
	if code != 0 || !strings.HasPrefix(out, "replay-") || strings.Count(out, "\n") != 1 {
		t.Fatalf("replay with LROSINK_RESULTS: exit %d, %q %q", code, out, errOut)
	}
	b, err := os.ReadFile(results)
	if err != nil || !strings.Contains(string(b), `"replay_id":"`+strings.TrimSpace(out)+`"`) {
		t.Fatalf("the configured sink got %q (%v)", b, err)
	}
	// stdout is a sink like any other when named.
	out, errOut, code = runWith(t, bin, dir, []string{store, "LROSINK_RESULTS=stdout"}, "replay", "batches/sink_a")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.Contains(lines[0], `"operation":"batches/sink_a"`) {
		t.Fatalf("replay with LROSINK_RESULTS=stdout: exit %d, %q %q", code, out, errOut)
	}
}
