package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/results/resultstest"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// build compiles lrosink with the given build tags into a temp dir.
func build(t *testing.T, tags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lrosink")
	// -buildvcs=true: stamp the commit as a user's go build does, even where
	// GOFLAGS turns stamping off (testVersionNamesTheRevision reads it).
	args := []string{"build", "-buildvcs=true", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/lrosink %s: %v\n%s", tags, err, out)
	}
	return bin
}

// childEnv is the test's environment without any lrosink configuration, so
// a developer's shell cannot change what the binary does.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "LROSINK_") || k == "PORT" || k == "HOST" || k == "GEMINI_API_KEY" || k == "GOOGLE_GEMINI_BASE_URL" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// lineWriter hands each complete line written to it to a channel.
type lineWriter struct {
	mu    sync.Mutex
	buf   []byte
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.lines <- string(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

// proc is a running `lrosink serve`.
type proc struct {
	cmd    *exec.Cmd
	base   string
	stdout chan string // results lines, in order
	stderr *syncBuffer
	exited chan struct{}
	err    error // Wait's error, once exited is closed
}

// serve starts `lrosink serve` in dir, as a README would, and waits for
// /healthz.
func serve(t *testing.T, bin, dir string, env []string, args ...string) *proc {
	t.Helper()
	addr := freeAddr(t)
	return serveAt(t, bin, dir, env, "http://"+addr, append([]string{"--addr", addr}, args...)...)
}

// serveAt is serve without --addr: the caller says where it listens (base).
func serveAt(t *testing.T, bin, dir string, env []string, base string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Dir, cmd.Env = dir, childEnv(env...)
	p := &proc{cmd: cmd, base: base, stdout: make(chan string, 1000), stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &lineWriter{lines: p.stdout}, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("serve stderr:\n%s", p.stderr.String())
		}
	})
	for range 300 {
		select {
		case <-p.exited:
			t.Fatalf("serve exited (%v):\n%s", p.err, p.stderr.String())
		default:
		}
		if resp, err := http.Get(p.base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("serve did not come up:\n%s", p.stderr.String())
	return nil
}

// exitCode waits (bounded) for the process to end and returns its status.
func (p *proc) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit")
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("wait: %v", p.err)
	}
	return 0
}

// resultLine is one results line on stdout.
type resultLine struct {
	Operation      string            `json:"operation"`
	Kind           string            `json:"kind"`
	State          string            `json:"state"`
	SettledBy      string            `json:"settled_by"`
	IdempotencyKey string            `json:"idempotency_key"`
	Output         map[string]any    `json:"output"`
	UserMetadata   map[string]any    `json:"user_metadata"`
	Attributes     map[string]string `json:"attributes"`
}

// next reads the next results line (bounded wait).
func (p *proc) next(t *testing.T) resultLine {
	t.Helper()
	select {
	case l := <-p.stdout:
		return parseLine(t, l)
	case <-time.After(30 * time.Second):
		t.Fatal("no results line on stdout")
		return resultLine{}
	}
}

// rest returns the lines left on stdout of an exited process.
func (p *proc) rest(t *testing.T) []resultLine {
	t.Helper()
	<-p.exited // Wait returns only after stdout was copied
	var out []resultLine
	for {
		select {
		case l := <-p.stdout:
			out = append(out, parseLine(t, l))
		default:
			return out
		}
	}
}

func parseLine(t *testing.T, s string) resultLine {
	t.Helper()
	var l resultLine
	if err := json.Unmarshal([]byte(s), &l); err != nil || l.IdempotencyKey == "" {
		t.Fatalf("stdout line is not a results line: %q (%v)", s, err)
	}
	resultstest.Check(t, []byte(s))
	return l
}

// body is a batch.succeeded envelope for the bare batch id.
func body(id string) []byte {
	return []byte(`{"type":"batch.succeeded","version":"v1","timestamp":"` + time.Now().UTC().Format(time.RFC3339Nano) +
		`","data":{"id":"` + id + `","output_file_uri":"gs://bucket/` + id + `.jsonl"},"user_metadata":{"job":"` + id + `"}}`)
}

// deliver posts a signed delivery and returns the status and outcome.
func deliver(t *testing.T, base, secret, msgID string, b []byte) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/Webhook", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = webhooktest.Headers(msgID, time.Now(), b, secret)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var a struct{ Outcome string }
	_ = json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a.Outcome, nil
}

func mustDeliver(t *testing.T, base, secret, id, msgID, wantOutcome string) {
	t.Helper()
	code, outcome, err := deliver(t, base, secret, msgID, body(id))
	if err != nil || code != http.StatusOK || (wantOutcome != "" && outcome != wantOutcome) {
		t.Fatalf("delivery %s of %s: %d %q %v, want 200 %q", msgID, id, code, outcome, err, wantOutcome)
	}
}

// runCLI runs a one-shot lrosink command in dir.
func runCLI(t *testing.T, bin, dir string, args ...string) (string, string, int) {
	t.Helper()
	return runWith(t, bin, dir, nil, args...)
}

// showJSON is the part of `ops show --json` the tests read.
type showJSON struct {
	State string `json:"state"`
	Claim *struct {
		Status   string `json:"status"`
		Attempts int    `json:"attempts"`
	} `json:"claim"`
}

func show(t *testing.T, bin, dir, name string) showJSON {
	t.Helper()
	out, errOut, code := runCLI(t, bin, dir, "ops", "show", name, "--json")
	var s showJSON
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.Claim == nil {
		t.Fatalf("ops show %s --json: exit %d, %q %q", name, code, out, errOut)
	}
	return s
}

// TestBinary builds lrosink once per build tag set and runs it as a user
// would.
func TestBinary(t *testing.T) {
	bin, faulty := build(t, ""), build(t, "faultinject")
	t.Run("ServeEndToEnd", func(t *testing.T) { testServeEndToEnd(t, bin) })
	t.Run("RestartAfterCrash", func(t *testing.T) { testRestartAfterCrash(t, faulty) })
	t.Run("GracefulShutdown", func(t *testing.T) { testGracefulShutdown(t, bin) })
	t.Run("SIGTERMDrainsDetachedWork", func(t *testing.T) { testSIGTERMDrainsDetachedWork(t, bin) })
	t.Run("StopBoundWriteLockedLedger", func(t *testing.T) { testStopBoundWriteLockedLedger(t, bin) })
	t.Run("StopBoundSlowBody", func(t *testing.T) { testStopBoundSlowBody(t, bin) })
	t.Run("FaultNeedsTheBuildTag", func(t *testing.T) { testFaultNeedsTheBuildTag(t, bin) })
	t.Run("VersionNamesTheRevision", func(t *testing.T) { testVersionNamesTheRevision(t, bin) })
	t.Run("BrokenSetupExitsBeforeListening", func(t *testing.T) { testBrokenSetupExitsBeforeListening(t, bin) })
	t.Run("NonLoopbackNeedsAdminToken", func(t *testing.T) { testNonLoopbackNeedsAdminToken(t, bin) })
	t.Run("PortAloneIsLoopback", func(t *testing.T) { testPortAloneIsLoopback(t, bin) })
	t.Run("StartupRefusals", func(t *testing.T) { testStartupRefusals(t, bin) })
	t.Run("DevSecretSurvivesRestart", func(t *testing.T) { testDevSecretSurvivesRestart(t, bin) })
	t.Run("MessagesInUsersWords", func(t *testing.T) { testMessagesInUsersWords(t, bin) })
	t.Run("SimulateOutputForAFile", func(t *testing.T) { testSimulateOutputForAFile(t, bin) })
	t.Run("ServeLogFormat", func(t *testing.T) { testServeLogFormat(t, bin) })
	t.Run("ServeStreamInATerminal", func(t *testing.T) { testServeStreamInATerminal(t, bin) })
}

// testBrokenSetupExitsBeforeListening: serve builds the whole app (secrets
// decoded, topic id checked, store and sink opened) before it listens; a
// bad value is exit 2 with one line naming the variable.
func testBrokenSetupExitsBeforeListening(t *testing.T, bin string) {
	badSecret := "whsec_%%%not-base64%%%"
	for _, c := range []struct {
		name, variable string
		env            []string
	}{
		{"secret tail not base64", "LROSINK_WEBHOOK_SECRETS", []string{"LROSINK_WEBHOOK_SECRETS=" + badSecret}},
		{"topic id too short", "LROSINK_RESULTS", []string{"LROSINK_RESULTS=pubsub:projects/p/topics/ab"}},
		{"unknown store scheme", "LROSINK_STORE", []string{"LROSINK_STORE=mysql:x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := freeAddr(t)
			cmd := exec.Command(bin, "serve", "--addr", addr)
			cmd.Dir, cmd.Env = t.TempDir(), childEnv(c.env...)
			testutil.FailsBeforeListening(t, cmd, addr, c.variable, badSecret)
		})
	}
}

// testNonLoopbackNeedsAdminToken: `serve --addr 0.0.0.0:0` without
// LROSINK_ADMIN_TOKEN exits 2 before listening, with one line naming the
// variable, and creates no ledger; with the token it serves, and /Register
// needs it.
func testNonLoopbackNeedsAdminToken(t *testing.T, bin string) {
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--addr", "0.0.0.0:0")
	cmd.Dir, cmd.Env = dir, childEnv()
	errb := &syncBuffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second): // a bound on waiting for the refusal
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("serve --addr 0.0.0.0:0 without a token did not exit:\n%s", errb.String())
	}
	var ee *exec.ExitError
	lines := strings.Split(strings.TrimRight(errb.String(), "\n"), "\n")
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || len(lines) != 1 || !strings.Contains(lines[0], "LROSINK_ADMIN_TOKEN") {
		t.Fatalf("serve --addr 0.0.0.0:0 without a token: %v, stderr %q; want exit 2 and one line naming LROSINK_ADMIN_TOKEN", err, errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "lrosink.db")); err == nil {
		t.Error("the ledger was created before the refusal")
	}

	const token = "binary-admin-token-0123456789"
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	p := serveAt(t, bin, dir, []string{"LROSINK_ADMIN_TOKEN=" + token}, "http://127.0.0.1:"+port, "--addr", "0.0.0.0:"+port)
	// /Register and the console are behind the token on a non-loopback address.
	for _, c := range []struct {
		method, path, auth string
		status             int
	}{
		{http.MethodPost, "/Register", "", 401},
		{http.MethodPost, "/Register", "Bearer wrong-admin-token-0123456789", 401},
		{http.MethodPost, "/Register", "Bearer " + token, 201},
		{http.MethodGet, "/ui/", "", 401},
		{http.MethodGet, "/ui/", "Bearer " + token, 200},
	} {
		var body io.Reader
		if c.method == http.MethodPost {
			body = strings.NewReader(`{"name":"batches/bin_tok"}`)
		}
		req, _ := http.NewRequest(c.method, p.base+c.path, body)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s with Authorization %q: %d, want %d", c.method, c.path, c.auth, resp.StatusCode, c.status)
		}
	}
	if strings.Contains(p.stderr.String(), token) {
		t.Error("the admin token is in serve's output")
	}
}

// testPortAloneIsLoopback: PORT without --addr or HOST changes the port and
// nothing else: serve listens on 127.0.0.1.
func testPortAloneIsLoopback(t *testing.T, bin string) {
	_, port, _ := net.SplitHostPort(freeAddr(t))
	p := serveAt(t, bin, t.TempDir(), []string{"PORT=" + port}, "http://127.0.0.1:"+port)
	if want := "lrosink: listening on http://127.0.0.1:" + port + "\n"; !strings.Contains(p.stderr.String(), want) {
		t.Fatalf("PORT=%s: stderr lacks %q:\n%s", port, want, p.stderr.String())
	}
}

// testVersionNamesTheRevision: `lrosink version` names the commit the go
// command stamped into the binary (go version -m: vcs.revision), and says
// "revision unknown" when nothing was stamped. The expected revision comes
// from the binary's build info, not from git, so the test passes in a
// source tree without .git (a git archive, a Cloud Build upload:
// scripts/check-deploy.sh runs it there); in a git checkout whose .git is a
// directory, the stamp must be HEAD.
func testVersionNamesTheRevision(t *testing.T, bin string) {
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", bin, err)
	}
	rev := ""
	for _, l := range strings.Split(string(info), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision=") {
			rev = strings.TrimPrefix(f[1], "vcs.revision=")
		}
	}
	want := "(revision unknown)"
	if rev != "" {
		want = "revision " + rev[:min(12, len(rev))]
	}
	// In a checkout, go build stamps HEAD when .git is a directory; in a
	// linked worktree (.git is a file) it stamps nothing. Without git or
	// outside a checkout there is nothing to compare with.
	if top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output(); err == nil {
		fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git"))
		head, herr := exec.Command("git", "rev-parse", "HEAD").Output()
		switch {
		case err != nil || herr != nil:
			t.Fatalf("git checkout at %s without a readable .git or HEAD: %v %v", strings.TrimSpace(string(top)), err, herr)
		case fi.IsDir() && rev != strings.TrimSpace(string(head)):
			t.Errorf("go build stamped vcs.revision=%q in a checkout at HEAD %s", rev, strings.TrimSpace(string(head)))
		case !fi.IsDir() && rev != "":
			t.Errorf("go build stamped vcs.revision=%q in a linked worktree (it stamps nothing there)", rev)
		}
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, errOut, code := runCLI(t, bin, t.TempDir(), args...)
		if code != 0 || !strings.HasPrefix(out, "lrosink ") || !strings.Contains(out, want) {
			t.Errorf("lrosink %v: exit %d, %q %q; want a line containing %q", args, code, out, errOut, want)
		}
	}
}

// testServeEndToEnd: `lrosink serve` in an empty directory with a secret in
// the environment. A signed batch.succeeded yields exactly one results line;
// its duplicate none (a second operation's line comes next); `ops show`
// reads the live ledger; SIGTERM ends it with status 0 and stdout held
// nothing but the two results lines.
func testServeEndToEnd(t *testing.T, bin string) {
	dir, secret := t.TempDir(), webhooktest.NewSecret()
	p := serve(t, bin, dir, []string{"LROSINK_WEBHOOK_SECRETS=" + secret})

	mustDeliver(t, p.base, secret, "e2e_a", "msg_a1", "completed")
	l := p.next(t)
	wantAttrs := map[string]string{"idempotency_key": "gemini:batches/e2e_a", "operation": "batches/e2e_a", "state": "SUCCEEDED", "kind": "batch",
		"api_name": "batches/e2e_a"}
	if l.Operation != "batches/e2e_a" || l.State != "SUCCEEDED" || l.Kind != "batch" || l.SettledBy != "webhook" ||
		l.IdempotencyKey != "gemini:batches/e2e_a" || fmt.Sprint(l.Attributes) != fmt.Sprint(wantAttrs) || l.UserMetadata["job"] != "e2e_a" {
		t.Fatalf("results line %+v", l)
	}
	mustDeliver(t, p.base, secret, "e2e_a", "msg_a1", "duplicate")
	mustDeliver(t, p.base, secret, "e2e_b", "msg_b1", "completed")
	if l := p.next(t); l.Operation != "batches/e2e_b" {
		t.Fatalf("after the duplicate, next line is for %s, want batches/e2e_b", l.Operation)
	}

	out, errOut, code := runCLI(t, bin, dir, "ops", "show", "batches/e2e_a")
	if code != 0 || !strings.Contains(out, "SUCCEEDED") || !strings.Contains(out, "DONE") {
		t.Fatalf("ops show: exit %d\n%s%s", code, out, errOut)
	}
	if s := show(t, bin, dir, "batches/e2e_a"); s.State != "SUCCEEDED" || s.Claim.Status != "DONE" {
		t.Fatalf("ops show --json: %+v", s)
	}
	if _, err := os.Stat(filepath.Join(dir, "lrosink.db")); err != nil {
		t.Fatalf("default ledger ./lrosink.db: %v", err)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit status %d after SIGTERM", code)
	}
	if rest := p.rest(t); len(rest) != 0 {
		t.Fatalf("extra stdout lines: %+v", rest)
	}
}

// testRestartAfterCrash: the process dies (exit 137) at a boundary of the
// ingest door; a restarted serve finishes the side effect through the
// redelivered webhook, or through its reconcile passes alone. Across both runs there is one
// line per operation, plus at most one more with the same idempotency_key
// when the crash came after the publish.
func testRestartAfterCrash(t *testing.T, bin string) {
	for _, c := range []struct {
		fault        string
		linesAtCrash int
		// redeliver: recovery through Gemini's redelivery; otherwise
		// through serve's own reconcile passes alone.
		redeliver bool
	}{
		{"crash-after-publish", 1, true},
		{"crash-after-commit", 0, false},
	} {
		t.Run(c.fault, func(t *testing.T) {
			dir, secret := t.TempDir(), webhooktest.NewSecret()
			// The lease is written into the claim when it is committed, so it
			// is the crashed run's --claim-lease that lets the restarted run
			// seize the dead holder's claim after 1s (the lease floor is twice
			// the webhook deadline, hence the short deadline). The restarted
			// run keeps the default 10m lease: its own claim cannot expire under it.
			p := serve(t, bin, dir, []string{"LROSINK_WEBHOOK_SECRETS=" + secret, "LROSINK_FAULT=" + c.fault}, "--claim-lease", "1s", "--webhook-deadline", "500ms")
			if code, _, err := deliver(t, p.base, secret, "msg_c1", body("crash1")); err == nil && code == http.StatusOK {
				t.Fatalf("delivery answered %d although the process was to crash", code)
			}
			if code := p.exitCode(t); code != 137 {
				t.Fatalf("exit status %d, want 137", code)
			}
			first := p.rest(t)
			if len(first) != c.linesAtCrash {
				t.Fatalf("%d lines before the crash, want %d", len(first), c.linesAtCrash)
			}
			if s := show(t, bin, dir, "batches/crash1"); s.State != "SUCCEEDED" || s.Claim.Status != "CLAIMED" {
				t.Fatalf("after the crash: %+v, want SUCCEEDED with the claim CLAIMED", s)
			}

			p = serve(t, bin, dir, []string{"LROSINK_WEBHOOK_SECRETS=" + secret}, "--reconcile-every", "1s")
			if c.redeliver {
				mustDeliver(t, p.base, secret, "crash1", "msg_c1", "") // recovered, duplicate or in progress: all 200
			}
			for i := 0; ; i++ {
				if s := show(t, bin, dir, "batches/crash1"); s.Claim.Status == "DONE" {
					break
				}
				if i == 300 {
					t.Fatal("claim not DONE after restart")
				}
				time.Sleep(100 * time.Millisecond)
			}
			// A sentinel operation's line comes after any line of crash1.
			mustDeliver(t, p.base, secret, "sentinel", "msg_s1", "completed")
			var again []resultLine
			for l := p.next(t); l.Operation != "batches/sentinel"; l = p.next(t) {
				again = append(again, l)
			}
			// The restart must publish exactly once: DONE is only ever
			// committed after a publish, and fencing admits one holder.
			if len(again) != 1 || again[0].IdempotencyKey != "gemini:batches/crash1" {
				t.Fatalf("lines after restart %+v, want one for gemini:batches/crash1", again)
			}
			for _, l := range first {
				if l.IdempotencyKey != again[0].IdempotencyKey || l.Attributes["idempotency_key"] != l.IdempotencyKey {
					t.Fatalf("line before the crash %+v, after %+v: keys differ", l, again[0])
				}
			}
			if s := show(t, bin, dir, "batches/crash1"); s.Claim.Attempts != 2 {
				t.Fatalf("claim attempts %d, want 2 (the crashed holder and the one that seized it)", s.Claim.Attempts)
			}
		})
	}
}

// testGracefulShutdown: SIGTERM while a delivery is in flight. The request
// still completes (200, its results line written) and the process then
// exits 0.
func testGracefulShutdown(t *testing.T, bin string) {
	dir, secret := t.TempDir(), webhooktest.NewSecret()
	p := serve(t, bin, dir, []string{"LROSINK_WEBHOOK_SECRETS=" + secret})
	b := body("inflight")
	pr, pw := io.Pipe()
	// "Expect: 100-continue" makes the request observably in flight: the
	// server answers 100 once the handler reads the body, and the client
	// sends the body only then. A fresh transport avoids reusing an idle
	// keep-alive connection, which Shutdown rightly closes.
	inHandler := make(chan struct{})
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{Got100Continue: func() { close(inHandler) }})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/Webhook", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header, req.ContentLength = webhooktest.Headers("msg_if", time.Now(), b, secret), int64(len(b))
	req.Header.Set("Expect", "100-continue")
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{ExpectContinueTimeout: 30 * time.Second}}
	type answer struct {
		code int
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			answered <- answer{0, err}
			return
		}
		resp.Body.Close()
		answered <- answer{resp.StatusCode, nil}
	}()
	select {
	case <-inHandler:
	case a := <-answered:
		t.Fatalf("answered before the body was sent: %d %v", a.code, a.err)
	case <-time.After(30 * time.Second):
		t.Fatal("no 100 Continue")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i := 0; !strings.Contains(p.stderr.String(), `"message":"shutting down"`); i++ {
		if i == 300 {
			t.Fatal("no shutdown logged after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := pw.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	if a := <-answered; a.err != nil || a.code != http.StatusOK {
		t.Fatalf("in-flight delivery: %d %v, want 200", a.code, a.err)
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit status %d after SIGTERM", code)
	}
	if lines := p.rest(t); len(lines) != 1 || lines[0].Operation != "batches/inflight" {
		t.Fatalf("results %+v, want the in-flight delivery's line", lines)
	}
	if !strings.Contains(p.stderr.String(), `"message":"stopped"`) {
		t.Fatal("no clean stop logged")
	}
}

// testFaultNeedsTheBuildTag: LROSINK_FAULT on a normal build is refused
// rather than silently ignored (a crash test would pass without a crash).
func testFaultNeedsTheBuildTag(t *testing.T, bin string) {
	cmd := exec.Command(bin, "ops", "list")
	cmd.Dir, cmd.Env = t.TempDir(), childEnv("LROSINK_FAULT=crash-after-publish")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "LROSINK_FAULT") {
		t.Fatalf("LROSINK_FAULT without the tag: %v %s", err, out)
	}
}

type syncBuffer = testutil.SyncBuffer
