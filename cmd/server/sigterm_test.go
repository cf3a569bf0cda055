package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestSIGTERMDrainsWorkInFlight: Cloud Run stops an instance with SIGTERM
// and kills it 10 s later. A webhook whose door work is in flight (state and
// claim committed in Firestore, its publish held at a Pub/Sub that went
// slow) when SIGTERM arrives finishes: the delivery is answered, the claim
// is DONE, not left held for its 10-minute lease, and the process exits 0
// on its own.
func TestSIGTERMDrainsWorkInFlight(t *testing.T) {
	bin := buildServer(t)
	fs, fsProject := emutest.Firestore(t)
	ps, psProject := emutest.PubSub(t)
	ctx := t.Context()
	topic := "projects/" + psProject + "/topics/sigterm"
	if _, err := ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	pubsubProxy := testutil.NewGatedProxy(t, emutest.PubSubHost(t))
	secret := webhooktest.NewSecret()
	cmd, base, logs := startCmd(t, bin, "GOOGLE_CLOUD_PROJECT="+fsProject, "LROSINK_RESULTS=pubsub:"+topic,
		"LROSINK_WEBHOOK_SECRETS="+secret, "PUBSUB_EMULATOR_HOST="+pubsubProxy.Addr)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	pubsubProxy.Hold()
	body := []byte(`{"type":"batch.succeeded","version":"v1","timestamp":"` + time.Now().UTC().Format(time.RFC3339) +
		`","data":{"id":"batch_sigterm"}}`)
	req, err := http.NewRequest(http.MethodPost, base+"/Webhook", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = webhooktest.Headers("msg_sigterm", time.Now(), body, secret)
	type answer struct {
		status  int
		outcome string
		err     error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var a map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&a)
		answered <- answer{status: resp.StatusCode, outcome: a["outcome"]}
	}()

	claim := fs.Collection("claims").Doc("gemini:batches%2Fbatch_sigterm")
	claimStatus := func() string {
		snap, err := claim.Get(ctx)
		if err != nil {
			return ""
		}
		st, _ := snap.Data()["status"].(string)
		return st
	}
	waitUntil(t, "the claim committed and its publish held at Pub/Sub", func() bool {
		return claimStatus() == "CLAIMED" && pubsubProxy.Waiting() > 0
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the server to start stopping", func() bool {
		return strings.Contains(logs.String(), `"message":"shutting down"`) || len(exited) > 0
	})
	pubsubProxy.Release() // Pub/Sub answers again, within the stop's budget

	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v, want status 0", err)
		}
	case <-time.After(30 * time.Second): // bounds a hang; not a speed assertion
		t.Fatal("the server did not exit within 30 s of SIGTERM")
	}
	if a := <-answered; a.err != nil || a.status != http.StatusOK || a.outcome != "completed" {
		t.Fatalf("the delivery in flight was answered %+v, want 200 completed", a)
	}
	if st := claimStatus(); st != "DONE" {
		t.Fatalf("claim %q after the stop, want DONE", st)
	}
}

// waitUntil polls cond, failing after 20 s (a bound on a hang).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, 20*time.Second, cond)
}

// TestSIGTERMDuringReconcilePass: a reconcile pass runs under its own
// budget (LROSINK_RECONCILE_DEADLINE, 270 s by default), far longer than
// the 8 s a stop has. SIGTERM during a pass held at a Gemini that hangs
// ends the pass as partial, not failed: /Reconcile answers 200
// "partial":true, the stop's drain finishes, and the process exits 0.
func TestSIGTERMDuringReconcilePass(t *testing.T) {
	bin := buildServer(t)
	_, fsProject := emutest.Firestore(t)
	called := make(chan struct{}, 1)
	release := make(chan struct{})
	gemini := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case called <- struct{}{}:
		default:
		}
		select { // hang until the caller gives up (or the test ends)
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(gemini.Close)
	t.Cleanup(func() { close(release) }) // runs first: Close waits for handlers
	cmd, base, logs := startCmd(t, bin, "GOOGLE_CLOUD_PROJECT="+fsProject, "LROSINK_RESULTS=stdout",
		"GEMINI_API_KEY=test-key", "GOOGLE_GEMINI_BASE_URL="+gemini.URL)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	type answer struct {
		status  int
		partial bool
		err     error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.Post(base+"/Reconcile", "application/json", nil)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var s struct {
			Partial bool `json:"partial"`
		}
		err = json.NewDecoder(resp.Body).Decode(&s)
		answered <- answer{status: resp.StatusCode, partial: s.Partial, err: err}
	}()
	select {
	case <-called:
	case <-time.After(20 * time.Second): // bounds a hang; not a speed assertion
		t.Fatal("the reconcile pass never called Gemini")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM during a reconcile pass: %v, want status 0", err)
		}
	case <-time.After(30 * time.Second): // bounds a hang; not a speed assertion
		t.Fatal("the server did not exit within 30 s of SIGTERM")
	}
	if a := <-answered; a.err != nil || a.status != http.StatusOK || !a.partial {
		t.Fatalf("/Reconcile in flight was answered %+v, want 200 partial:true", a)
	}
	if out := logs.String(); strings.Contains(out, "reconcile pass failed") {
		t.Fatalf("a pass ended by the stop was logged as failed:\n%s", out)
	}
}

// TestSIGTERMStopBound: the slowest stop the container binary can meet,
// within the documented bound (app.StopTimeout from SIGTERM, the clients'
// close included). A delivery's publish is held at a Pub/Sub that never
// answers again, so its work is still in flight at the drain's end and the
// Pub/Sub client's Close flushes it for up to 60 s; another client
// dribbles a body the handler is reading (its read deadline is the webhook
// deadline, 10 s). The delivery is answered 503 stopping, the slow request,
// the drain and the close are cut off, and the process exits 1 naming
// them; the claim stays CLAIMED, seized after its lease.
func TestSIGTERMStopBound(t *testing.T) {
	bin := buildServer(t)
	fs, fsProject := emutest.Firestore(t)
	ps, psProject := emutest.PubSub(t)
	topic := "projects/" + psProject + "/topics/stopbound"
	if _, err := ps.TopicAdminClient.CreateTopic(t.Context(), &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	pubsubProxy := testutil.NewGatedProxy(t, emutest.PubSubHost(t))
	secret := webhooktest.NewSecret()
	cmd, base, logs := startCmd(t, bin, "GOOGLE_CLOUD_PROJECT="+fsProject, "LROSINK_RESULTS=pubsub:"+topic,
		"LROSINK_WEBHOOK_SECRETS="+secret, "PUBSUB_EMULATOR_HOST="+pubsubProxy.Addr)
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	pubsubProxy.Hold()
	b := []byte(`{"type":"batch.succeeded","version":"v1","timestamp":"` + time.Now().UTC().Format(time.RFC3339) +
		`","data":{"id":"batch_stopbound"}}`)
	answered := testutil.PostInHandler(t, base+"/Webhook", webhooktest.Headers("msg_stopbound", time.Now(), b, secret), b)
	claim := fs.Collection("claims").Doc("gemini:batches%2Fbatch_stopbound")
	claimStatus := func() string {
		snap, err := claim.Get(t.Context())
		if err != nil {
			return ""
		}
		st, _ := snap.Data()["status"].(string)
		return st
	}
	waitUntil(t, "the claim committed and its publish held at Pub/Sub", func() bool {
		return claimStatus() == "CLAIMED" && pubsubProxy.Waiting() > 0
	})
	slow := []byte(`{"type":"batch.succeeded","version":"v1","data":{"id":"batch_slow"}}`)
	testutil.Dribble(t, strings.TrimPrefix(base, "http://"), "/Webhook", webhooktest.Headers("msg_slow", time.Now(), slow, secret), len(slow))

	took := testutil.SIGTERMToExit(t, cmd.Process, exited)
	t.Logf("SIGTERM to exit: %v (bound %v + %v slack)", took.Round(time.Millisecond), app.StopTimeout, testutil.ExitSlack)
	if took > app.StopTimeout+testutil.ExitSlack {
		t.Errorf("the stop took %v from SIGTERM to exit; the bound is %v (+%v to exit)", took, app.StopTimeout, testutil.ExitSlack)
	}
	out := logs.String()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit status %d, want 1 (something was cut off)", code)
	}
	for _, want := range []string{"requests still running were cut off", "drain: 1 in flight", "closing the clients outlasted the stop's budget"} {
		if !strings.Contains(out, want) {
			t.Errorf("the stop's error does not say %q", want)
		}
	}
	if a := <-answered; a.Err != nil || a.Status != http.StatusServiceUnavailable || a.Reason != "stopping" || a.RetryAfter == "" {
		t.Errorf("the delivery whose publish was held was answered %+v, want 503 stopping with Retry-After", a)
	}
	if st := claimStatus(); st != "CLAIMED" {
		t.Errorf("claim %q after a stop that cut its publish off, want CLAIMED (seized after its lease)", st)
	}
}
