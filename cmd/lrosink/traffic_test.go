package main

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestHealthTrafficSurvivesARestart: the Health page's "Webhook traffic,
// last hour" is counted in the delivery log, so a real serve stopped and
// started again on the same SQLite ledger still shows the deliveries it
// answered before the restart.
func TestHealthTrafficSurvivesARestart(t *testing.T) {
	bin := build(t, "")
	dir, secret := t.TempDir(), webhooktest.NewSecret()
	env := []string{"LROSINK_WEBHOOK_SECRETS=" + secret}
	const want = `<td id="deliveries-total">3 · completed 2 · duplicate 1</td>`
	health := func(p *proc) string {
		t.Helper()
		res, err := http.Get(p.base + "/ui/health")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET /ui/health: %d %v", res.StatusCode, err)
		}
		return string(b)
	}

	p := serve(t, bin, dir, env)
	mustDeliver(t, p.base, secret, "tr_1", "msg_t1", "completed")
	mustDeliver(t, p.base, secret, "tr_2", "msg_t2", "completed")
	mustDeliver(t, p.base, secret, "tr_1", "msg_t3", "duplicate")
	// The log is written just after each answer: wait for all three.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(health(p), want); {
		if time.Now().After(deadline) {
			t.Fatalf("the health page never counted the 3 deliveries:\n%s", health(p))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("serve exited %d on SIGTERM", code)
	}

	again := serve(t, bin, dir, env)
	if body := health(again); !strings.Contains(body, want) || !strings.Contains(body, "Counted in the delivery log") {
		t.Errorf("after a restart the health page lost the traffic (want %s):\n%s", want, body)
	}
}
