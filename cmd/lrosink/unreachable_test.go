package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestUnreachableStoreFailsClearly: with Firestore pointed at a closed
// port, a CLI command fails (exit 1) with an error naming the host instead
// of hanging; serve stays live (/healthz 200) but not ready (/readyz 503
// naming the store), and the console answers 503 instead of hanging.
//
// The deadlines below only stop a hanging binary from hanging the test.
func TestUnreachableStoreFailsClearly(t *testing.T) {
	bin := build(t, "")
	host := freeAddr(t) // listened on, then closed: nothing answers there
	env := []string{"LROSINK_STORE=firestore", "FIRESTORE_EMULATOR_HOST=" + host, "LROSINK_STORE_TIMEOUT=2s"}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "ops", "list")
	cmd.Dir, cmd.Env = t.TempDir(), childEnv(env...)
	var errb strings.Builder
	cmd.Stderr = &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("ops list against an unreachable Firestore hung (killed after 60s); stderr %q", errb.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(errb.String(), host) {
		t.Errorf("ops list: exit %d (%v), stderr %q; want exit 1 naming %s", code, err, errb.String(), host)
	}

	p := serve(t, bin, t.TempDir(), env)
	c := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := c.Get(p.base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}
	// It names the store, and no limit but the one that cut the read:
	// LROSINK_STORE_TIMEOUT (2s), shorter than the probe's own 3 s.
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, host) || strings.Contains(body, "within 3s") {
		t.Errorf("/readyz: %d %s; want 503 naming %s, and not the probe's 3s", code, body, host)
	}
	if code, body := get("/ui/"); code != http.StatusServiceUnavailable || !strings.Contains(body, "did not answer") {
		t.Errorf("/ui/: %d %s; want 503", code, body)
	}

	// A store that answers: ready.
	ok := serve(t, bin, t.TempDir(), nil)
	resp, err := c.Get(ok.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ready"`) {
		t.Errorf("/readyz on a SQLite ledger: %d %s", resp.StatusCode, b)
	}
}
