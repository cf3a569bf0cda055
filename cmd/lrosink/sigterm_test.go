package main

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// testSIGTERMDrainsDetachedWork: a delivery whose publish is held at a
// Pub/Sub that went slow is answered 503 deadline-exceeded at
// LROSINK_WEBHOOK_DEADLINE and its door work goes on detached. SIGTERM
// then does not cut that work off: serve drains the door, the publish
// completes once Pub/Sub answers, the claim is DONE (not held for its
// lease) and the process exits 0 on its own.
func testSIGTERMDrainsDetachedWork(t *testing.T, bin string) {
	ps, psProject := emutest.PubSub(t)
	topic := "projects/" + psProject + "/topics/serve-sigterm"
	if _, err := ps.TopicAdminClient.CreateTopic(t.Context(), &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	pubsubProxy := testutil.NewGatedProxy(t, emutest.PubSubHost(t))
	dir, secret := t.TempDir(), webhooktest.NewSecret()
	p := serve(t, bin, dir, []string{"LROSINK_WEBHOOK_SECRETS=" + secret, "LROSINK_WEBHOOK_DEADLINE=1s",
		"GOOGLE_CLOUD_PROJECT=" + psProject, "PUBSUB_EMULATOR_HOST=" + pubsubProxy.Addr}, "--results", "pubsub:"+topic)

	pubsubProxy.Hold()
	code, outcome, err := deliver(t, p.base, secret, "msg_detached", body("detached"))
	if err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("delivery with its publish held: %d %q %v, want 503 deadline-exceeded", code, outcome, err)
	}
	if pubsubProxy.Waiting() == 0 {
		t.Fatal("no publish is held at Pub/Sub: the work is not in flight")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i := 0; !strings.Contains(p.stderr.String(), `"message":"draining the ingest door"`); i++ {
		if i == 500 { // bounds a hang
			t.Fatal("serve is not draining the door after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
	pubsubProxy.Release() // Pub/Sub answers again, within the stop's budget
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0", code)
	}
	if s := show(t, bin, dir, "batches/detached"); s.State != "SUCCEEDED" || s.Claim.Status != "DONE" {
		t.Fatalf("after the stop: state %s, claim %s; want SUCCEEDED, DONE", s.State, s.Claim.Status)
	}
}
