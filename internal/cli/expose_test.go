package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/cli/command"
)

// TestServeRefusesNonLoopbackWithoutToken: on an address other hosts can
// reach, serve refuses to start without LROSINK_ADMIN_TOKEN: exit 2, one
// line naming the variable, before it opens anything or listens.
func TestServeRefusesNonLoopbackWithoutToken(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"--addr 0.0.0.0", nil, []string{"--addr", "0.0.0.0:0"}},
		{"--addr all interfaces", nil, []string{"--addr", ":0"}},
		{"--addr [::]", nil, []string{"--addr", "[::]:0"}},
		{"--addr a non-loopback IP", nil, []string{"--addr", "192.0.2.1:0"}},
		{"HOST=0.0.0.0", map[string]string{"HOST": "0.0.0.0", "PORT": "0"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			env := map[string]string{"LROSINK_STORE": "sqlite:" + filepath.Join(dir, "ledger.db")}
			for k, v := range c.env {
				env[k] = v
			}
			r := runServeOnce(t, env, c.args...)
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			if r.code != command.ExitUsage || len(lines) != 1 || !strings.Contains(lines[0], "LROSINK_ADMIN_TOKEN") {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line naming LROSINK_ADMIN_TOKEN", r.code, r.stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "ledger.db")); err == nil {
				t.Error("the ledger was opened before the refusal")
			}
		})
	}
	// Loopback needs no token.
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		if err := checkExposure(t.Context(), addr, ""); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
}

// TestServeAdminToken: with LROSINK_ADMIN_TOKEN set, serve starts on a
// non-loopback address and /Register and /Reconcile need the token, while
// /Webhook (signature-authenticated) and /healthz do not; the token never
// reaches the logs.
func TestServeAdminToken(t *testing.T) {
	const token = "s3cret-admin-token-0123456789"
	env := storeEnv(t)
	env["LROSINK_ADMIN_TOKEN"] = token
	env["LROSINK_WEBHOOK_SECRETS"] = "whsec_ZmxhZ3NlY3JldGZsYWdzZWNyZXQ="
	s := startServe(t, env, "--addr", "0.0.0.0:0")
	_, port, ok := strings.Cut(strings.TrimPrefix(s.base, "http://"), "]:")
	if !ok {
		_, port, _ = strings.Cut(strings.TrimPrefix(s.base, "http://"), ":")
	}
	base := "http://127.0.0.1:" + port

	post := func(path, auth, body string) (int, map[string]any, http.Header) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&a)
		return resp.StatusCode, a, resp.Header
	}
	reg := `{"name":"batches/tok1"}`
	for _, c := range []struct {
		name, path, auth string
		status           int
	}{
		{"Register without a token", "/Register", "", 401},
		{"Register with a wrong token", "/Register", "Bearer not-the-admin-token-0123", 401},
		{"Register with the token", "/Register", "Bearer " + token, 201},
		{"Reconcile without a token", "/Reconcile", "", 401},
		{"Reconcile with a wrong token", "/Reconcile", "Bearer not-the-admin-token-0123", 401},
	} {
		status, a, h := post(c.path, c.auth, reg)
		if status != c.status {
			t.Errorf("%s: %d %v, want %d", c.name, status, a, c.status)
		}
		if status == 401 && (a["outcome"] != "rejected" || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer")) {
			t.Errorf("%s: answer %v, WWW-Authenticate %q", c.name, a, h.Get("WWW-Authenticate"))
		}
	}
	if status, a, _ := post("/Reconcile", "Bearer "+token, ""); status != http.StatusOK {
		t.Errorf("Reconcile with the token: %d %v", status, a)
	}
	resp, err := http.DefaultClient.Do(delivery(t, base, env["LROSINK_WEBHOOK_SECRETS"], "tok2", "msg_tok2"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("signed webhook without the admin token: %d", resp.StatusCode)
	}
	resp, err = http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d", resp.StatusCode)
	}
	if s.stop(); strings.Contains(s.stderr.String(), token) {
		t.Errorf("the admin token is in serve's output:\n%s", s.stderr.String())
	}
}

// runServeOnce runs serve and returns when it exits; a serve that starts
// listening instead is stopped and the test fails.
func runServeOnce(t *testing.T, env map[string]string, args ...string) runResult {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, append([]string{"serve"}, args...), strings.NewReader(""), &out, &errb, mapEnv(env))
	}()
	for {
		select {
		case code := <-done:
			return runResult{code, out.String(), errb.String()}
		default:
		}
		if strings.Contains(errb.String(), "listening on") {
			cancel()
			<-done
			t.Fatalf("serve %v started listening:\n%s", args, errb.String())
		}
		waitFor(t, "serve to exit or listen", func() bool {
			return len(done) > 0 || strings.Contains(errb.String(), "listening on")
		})
	}
}
