package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestSendAgainstServe: the README's first step with the real binary.
// `lrosink send batch.succeeded --id X`, signed with the secret serve was
// given in the environment, yields one results line; sent twice, still one
// (the next line on stdout is for another operation).
func TestSendAgainstServe(t *testing.T) {
	bin := build(t, "")
	dir, secret := t.TempDir(), webhooktest.NewSecret()
	p := serve(t, bin, dir, []string{"LROSINK_WEBHOOK_SECRETS=" + secret})
	send := func(id, wantOutcome string) {
		t.Helper()
		cmd := exec.Command(bin, "send", "batch.succeeded", "--id", id, "--url", p.base+"/Webhook")
		cmd.Dir, cmd.Env = dir, childEnv("LROSINK_WEBHOOK_SECRETS="+secret)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil || !strings.HasPrefix(out.String(), "HTTP 200 OK\n") ||
			!strings.Contains(out.String(), `"outcome":"`+wantOutcome+`"`) {
			t.Fatalf("lrosink send --id %s: %v\n%s%s", id, err, out.String(), errb.String())
		}
		if strings.Contains(out.String()+errb.String(), strings.TrimPrefix(secret, "whsec_")) {
			t.Fatal("send printed the secret")
		}
	}
	send("send_x", "completed")
	if l := p.next(t); l.Operation != "batches/send_x" || l.State != "SUCCEEDED" || l.SettledBy != "webhook" {
		t.Fatalf("results line %+v", l)
	}
	send("send_x", "duplicate")
	send("send_y", "completed")
	if l := p.next(t); l.Operation != "batches/send_y" {
		t.Fatalf("after the second send of send_x, the next line is for %s, want batches/send_y", l.Operation)
	}
}
