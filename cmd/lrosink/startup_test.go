package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runEnv runs lrosink args in dir with env added to childEnv, and returns
// its output and exit status. A bound on the wait, not a timed assertion:
// every command here is expected to refuse at once.
func runEnv(t *testing.T, bin, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, childEnv(env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("lrosink %v did not exit:\n%s", args, errb.String())
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("lrosink %v: %v", args, err)
	}
	return out.String(), errb.String(), 0
}

// testStartupRefusals: a configuration serve cannot run with is exit 2 and
// one line on stderr naming what is at fault (CONTRACT.md §1), before
// anything is announced or created: no dev secret, no "draining", no ledger.
func testStartupRefusals(t *testing.T, bin string) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		name  string
		env   []string
		args  []string
		names string // what the one line must name
	}{
		{"PORT not a number", []string{"PORT=abc"}, nil, "PORT"},
		{"PORT out of range", []string{"PORT=70000"}, nil, "PORT"},
		{"--addr without a port", nil, []string{"--addr", "127.0.0.1"}, "--addr"},
		{"port in use", nil, []string{"--addr", busy.Addr().String()}, busy.Addr().String()},
		{"--claim-lease 1ns", nil, []string{"--claim-lease", "1ns"}, "--claim-lease"},
		{"LROSINK_CLAIM_LEASE=1ms", []string{"LROSINK_CLAIM_LEASE=1ms"}, nil, "LROSINK_CLAIM_LEASE"},
		{"lease under twice the deadline", []string{"LROSINK_CLAIM_LEASE=30s"}, []string{"--webhook-deadline", "20s"}, "LROSINK_CLAIM_LEASE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"serve"}, c.args...)
			if len(c.args) == 0 || c.args[0] != "--addr" {
				if !strings.HasPrefix(strings.Join(c.env, " "), "PORT=") {
					args = append(args, "--addr", freeAddr(t))
				}
			}
			out, errOut, code := runEnv(t, bin, dir, c.env, args...)
			lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
			if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], c.names) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line naming %s", code, errOut, c.names)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			for _, s := range []string{"secret", "draining", "listening", "lookup"} {
				if strings.Contains(errOut, s) {
					t.Errorf("stderr %q mentions %q", errOut, s)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "lrosink.db")); err == nil {
				t.Error("the ledger was created before the refusal")
			}
		})
	}
}
