package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
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

// testDevSecretSurvivesRestart: without LROSINK_WEBHOOK_SECRETS, serve keeps
// the dev secret it generated beside the ledger (lrosink.db.secret, mode
// 0600), says where on start-up, signs with the same secret after a
// restart, and a delivery signed otherwise gets a 401 whose detail names the
// file. The secret never appears in a log record.
func testDevSecretSurvivesRestart(t *testing.T, bin string) {
	dir := t.TempDir()
	file := filepath.Join(dir, "lrosink.db.secret")
	p := serve(t, bin, dir, nil)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no dev secret beside the ledger: %v\n%s", err, p.stderr.String())
	}
	secret := strings.TrimSpace(string(b))
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", file, st.Mode().Perm())
	}
	if !strings.Contains(p.stderr.String(), "lrosink.db.secret") {
		t.Errorf("start-up does not say where the secret is:\n%s", p.stderr.String())
	}
	mustDeliver(t, p.base, secret, "devs1", "msg_d1", "completed")
	stopServe(t, p)

	p = serve(t, bin, dir, nil)
	if b2, _ := os.ReadFile(file); string(b2) != string(b) {
		t.Fatalf("the restart changed the dev secret file")
	}
	mustDeliver(t, p.base, secret, "devs2", "msg_d2", "completed")

	code, answer, err := deliverRaw(p.base, webhooktest.NewSecret(), "msg_d3", body("devs3"))
	if err != nil || code != http.StatusUnauthorized || !strings.Contains(answer, `"reason":"no-matching-signature"`) ||
		!strings.Contains(answer, "lrosink.db.secret") {
		t.Fatalf("delivery with another secret: %d %s %v; want 401 no-matching-signature with a detail naming lrosink.db.secret", code, answer, err)
	}
	// Plain lines (the start-up notice) may show the secret to the person
	// running serve; log records never do.
	for l := range strings.Lines(p.stderr.String()) {
		if strings.HasPrefix(l, "{") && strings.Contains(l, secret) {
			t.Errorf("a log record holds the dev secret: %s", l)
		}
	}
}

// stopServe stops p with SIGTERM and waits for it to exit.
func stopServe(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.exited
}

// deliverRaw posts a delivery signed with secret and returns the status and
// the whole answer.
func deliverRaw(base, secret, msgID string, b []byte) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/Webhook", bytes.NewReader(b))
	if err != nil {
		return 0, "", err
	}
	req.Header = webhooktest.Headers(msgID, time.Now(), b, secret)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer), err
}

// testMessagesInUsersWords: what a user got wrong is said in their words,
// naming the flag, variable or path, with the documented exit status
// (CONTRACT.md §1: 2 for usage and configuration errors).
func testMessagesInUsersWords(t *testing.T, bin string) {
	dir := t.TempDir()
	for _, c := range []struct {
		name      string
		args      []string
		code      int
		want, not []string
	}{
		{"bare id", []string{"register", "abc"}, 2, []string{`invalid operation name "abc"`, "kind"}, []string{"opname"}},
		{"unknown flag", []string{"register", "batches/x", "--bogus"}, 2, []string{"unknown flag --bogus"}, []string{"flag provided", " -bogus"}},
		{"bad flag value", []string{"ops", "list", "--limit", "x"}, 2, []string{`--limit`}, []string{"flag -limit"}},
		{"flag without value", []string{"ops", "list", "--limit"}, 2, []string{`--limit needs a value`}, []string{"flag needs"}},
		{"store is a directory", []string{"register", "batches/x", "--store", "sqlite:" + dir}, 2, []string{dir + " is a directory"}, []string{"(14)", "unable to open"}},
		{"store in a missing directory", []string{"register", "batches/x", "--store", "sqlite:" + dir + "/no/x.db"}, 2, []string{dir + "/no", "does not exist"}, []string{"(14)", "unable to open"}},
		{"webhooks without GEMINI_API_KEY", []string{"webhooks", "list"}, 2, []string{"GEMINI_API_KEY"}, nil},
		{"simulate on firestore without an emulator", []string{"simulate", "--store", "firestore", "--ops", "5"}, 2, []string{"FIRESTORE_EMULATOR_HOST"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := runEnv(t, bin, dir, []string{"FIRESTORE_EMULATOR_HOST=", "GOOGLE_CLOUD_PROJECT="}, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr %q", code, c.code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(errOut, n) {
					t.Errorf("stderr %q has %q", errOut, n)
				}
			}
		})
	}
}

// testSimulateOutputForAFile: with stderr not a terminal (a file, a pipe)
// simulate draws no progress bar (no \r frames in the file), and on SQLite,
// whose reads and writes are not counted, the report says n/a rather than 0.
func testSimulateOutputForAFile(t *testing.T, bin string) {
	out, errOut, code := runEnv(t, bin, t.TempDir(), nil, "simulate", "--ops", "20")
	if code != 0 {
		t.Fatalf("simulate --ops 20: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(errOut, "\r") {
		t.Errorf("stderr is not a terminal but has progress frames: %q", errOut)
	}
	if strings.Contains(out, "store 0 reads") || !strings.Contains(out, "store reads and writes n/a") {
		t.Errorf("the SQLite report's cost line should say n/a:\n%s", out)
	}
}
