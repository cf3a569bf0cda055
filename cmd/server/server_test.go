package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "server")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/server: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// start runs the binary with env and waits until it answers on port.
func start(t *testing.T, bin string, env ...string) string {
	t.Helper()
	_, base, _ := startCmd(t, bin, env...)
	return base
}

// startCmd is start, also returning the process and its output (stdout and
// stderr together); the process is killed when the test ends.
func startCmd(t *testing.T, bin string, env ...string) (*exec.Cmd, string, *testutil.SyncBuffer) {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(bin)
	// The emulator can take longer than the 5 s default store timeout to
	// answer a new process's first read while other packages load the
	// machine; a test that wants the default (or less) sets it, later
	// entries winning.
	cmd.Env = append(os.Environ(), append(append([]string{"LROSINK_STORE_TIMEOUT=30s"}, env...), "PORT="+port, "HOST=127.0.0.1")...)
	logs := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server output:\n%s", logs.String())
		}
	})
	base := "http://127.0.0.1:" + port
	for range 200 {
		if resp, err := http.Get(base + "/Webhook"); err == nil {
			resp.Body.Close()
			return cmd, base, logs
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("server did not come up:\n%s", logs.String())
	return nil, "", nil
}

// TestEndToEnd: a signed batch.succeeded sent to the container binary lands
// in Firestore and as one Pub/Sub message; five redeliveries answer 200 and
// add no message.
func TestEndToEnd(t *testing.T) {
	bin := buildServer(t)
	fs, fsProject := emutest.Firestore(t)
	ps, psProject := emutest.PubSub(t)
	ctx := t.Context()
	topic, sub := "projects/"+psProject+"/topics/results", "projects/"+psProject+"/subscriptions/worker"
	if _, err := ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic, EnableMessageOrdering: true}); err != nil {
		t.Fatal(err)
	}
	secret := webhooktest.NewSecret()
	base := start(t, bin, "GOOGLE_CLOUD_PROJECT="+fsProject, "LROSINK_RESULTS=pubsub:"+topic, "LROSINK_WEBHOOK_SECRETS="+secret)

	body := []byte(`{"type":"batch.succeeded","version":"v1","timestamp":"` + time.Now().UTC().Format(time.RFC3339) +
		`","data":{"id":"batch_e2e","output_file_uri":"gs://bucket/results.jsonl"},"user_metadata":{"job":"e2e"}}`)
	for i := range 6 {
		req, _ := http.NewRequest(http.MethodPost, base+"/Webhook", bytes.NewReader(body))
		req.Header = webhooktest.Headers("msg_e2e", time.Now(), body, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var a map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		want := "duplicate"
		if i == 0 {
			want = "completed"
		}
		if resp.StatusCode != http.StatusOK || a["outcome"] != want || a["operation"] != "batches/batch_e2e" {
			t.Fatalf("delivery %d: %d %v, want 200 %s", i+1, resp.StatusCode, a, want)
		}
	}
	snap, err := fs.Collection("operations").Doc("gemini:batches%2Fbatch_e2e").Get(ctx)
	if err != nil {
		t.Fatalf("operation not in Firestore: %v", err)
	}
	if d := snap.Data(); d["state"] != "SUCCEEDED" || d["settled_by"] != "webhook" {
		t.Fatalf("operation document %v", d)
	}
	// Publish a sentinel after the server's messages, then read up to it.
	pub := ps.Publisher(topic)
	defer pub.Stop()
	if _, err := pub.Publish(ctx, &pubsub.Message{Data: []byte("{}"), Attributes: map[string]string{"sentinel": "1"}}).Get(ctx); err != nil {
		t.Fatal(err)
	}
	var got []*pubsub.Message
	rctx, rcancel := context.WithCancel(ctx)
	err = ps.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		if m.Attributes["sentinel"] == "1" {
			time.AfterFunc(500*time.Millisecond, rcancel)
			return
		}
		got = append(got, m)
	})
	rcancel()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d results messages, want 1", len(got))
	}
	m := got[0]
	var data map[string]any
	_ = json.Unmarshal(m.Data, &data)
	if m.Attributes["idempotency_key"] != "gemini:batches/batch_e2e" || m.OrderingKey != "batches/batch_e2e" || data["state"] != "SUCCEEDED" ||
		data["user_metadata"].(map[string]any)["job"] != "e2e" {
		t.Fatalf("message %v %s", m.Attributes, m.Data)
	}
}

// TestFunctionTarget serves the one function at "/" when FUNCTION_TARGET is set.
func TestFunctionTarget(t *testing.T) {
	bin := buildServer(t)
	emutest.FirestoreHost(t)
	base := start(t, bin, "FUNCTION_TARGET=Register", "GOOGLE_CLOUD_PROJECT="+emutest.ProjectID(t), "LROSINK_RESULTS=stdout")
	resp, err := http.Post(base+"/", "application/json", strings.NewReader(`{"name":"batches/ft","kind":"batch"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST / with FUNCTION_TARGET=Register: %d, want 201", resp.StatusCode)
	}
	resp, err = http.Post(base+"/", "application/json", strings.NewReader(`{"name":"batches/ft"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("second registration: %d, want 200", resp.StatusCode)
	}
}

// TestBadConfigurationFailsAtStartUp exits with a line naming the variable.
func TestBadConfigurationFailsAtStartUp(t *testing.T) {
	bin := buildServer(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "GOOGLE_CLOUD_PROJECT=p", "LROSINK_RESULTS=stdout", "LROSINK_GRACE=soon", "PORT="+freePort(t))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("server started with LROSINK_GRACE=soon")
	}
	if !strings.Contains(string(out), "LROSINK_GRACE") {
		t.Fatalf("output does not name the variable: %s", out)
	}
}

// TestBrokenSetupExitsBeforeListening: cmd/server builds the whole app
// before it listens, so each of these exits with status 2 and one line
// naming the variable, instead of serving 503 not-configured to every
// request.
func TestBrokenSetupExitsBeforeListening(t *testing.T) {
	bin := buildServer(t)
	emutest.FirestoreHost(t)
	badSecret := "whsec_%%%not-base64%%%"
	for _, c := range []struct {
		name, variable string
		env            []string
	}{
		{"sqlite store", "LROSINK_STORE", []string{"LROSINK_STORE=sqlite:" + filepath.Join(t.TempDir(), "x.db")}},
		{"secret tail not base64", "LROSINK_WEBHOOK_SECRETS", []string{"LROSINK_WEBHOOK_SECRETS=" + badSecret}},
		{"topic id too short", "LROSINK_RESULTS", []string{"LROSINK_RESULTS=pubsub:projects/p/topics/ab"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			port := freePort(t)
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), append([]string{"GOOGLE_CLOUD_PROJECT=" + emutest.ProjectID(t),
				"LROSINK_RESULTS=stdout", "PORT=" + port, "HOST=127.0.0.1"}, c.env...)...)
			testutil.FailsBeforeListening(t, cmd, "127.0.0.1:"+port, c.variable, badSecret)
		})
	}
}

// TestConsoleTarget: FUNCTION_TARGET=Console serves the read-only console
// (the one function at "/", which sends the browser on to /ui/).
func TestConsoleTarget(t *testing.T) {
	bin := buildServer(t)
	emutest.FirestoreHost(t)
	project := emutest.ProjectID(t)
	reg := start(t, bin, "FUNCTION_TARGET=Register", "GOOGLE_CLOUD_PROJECT="+project, "LROSINK_RESULTS=stdout")
	resp, err := http.Post(reg+"/", "application/json", strings.NewReader(`{"name":"batches/console_ft","kind":"batch"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	base := start(t, bin, "FUNCTION_TARGET=Console", "GOOGLE_CLOUD_PROJECT="+project, "LROSINK_RESULTS=stdout")
	resp, err = http.Get(base + "/") // follows the redirect to /ui/
	if err != nil {
		t.Fatal(err)
	}
	body := new(bytes.Buffer)
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/" || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(body.String(), ">batches/console_ft<") {
		t.Fatalf("GET / on the Console target = %d %s at %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Request.URL, body)
	}
	// This service never runs a pass (the Reconcile service does): its
	// health page must say where the passes are, not wait for one here.
	resp, err = http.Get(base + "/ui/health")
	if err != nil {
		t.Fatal(err)
	}
	body.Reset()
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(body.String(), "on Cloud Run the Reconcile service does") {
		t.Fatalf("the Console target's health page does not point at the Reconcile service:\n%s", body)
	}
}
