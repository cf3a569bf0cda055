package sink_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/sink"
	"github.com/lrosink/lrosink/internal/testutil"
)

func createSub(ctx context.Context, t *testing.T, c *pubsub.Client, topic, sub string) {
	t.Helper()
	_, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: sub, Topic: topic, AckDeadlineSeconds: 60, EnableMessageOrdering: true,
	})
	if err != nil {
		t.Fatalf("create subscription %s: %v", sub, err)
	}
}

// receive pulls until it has n operations or ctx ends. It keeps the first
// message of each operation: with an ordered subscription, the first one
// published.
func receive(ctx context.Context, t *testing.T, c *pubsub.Client, sub string, n int) map[string]*pubsub.Message {
	t.Helper()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	got := map[string]*pubsub.Message{}
	err := c.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		if op := m.Attributes["operation"]; got[op] == nil {
			got[op] = m
		}
		if len(got) >= n {
			cancel()
		}
	})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Fatalf("received %d distinct operations before timeout, want %d: %v", len(got), n, slicesKeys(got))
	}
	return got
}

func slicesKeys(m map[string]*pubsub.Message) []string {
	var ks []string
	for k := range maps.Keys(m) {
		ks = append(ks, k)
	}
	return ks
}

func newPubSub(t *testing.T, c *pubsub.Client, topic string) *sink.PubSub {
	t.Helper()
	p := sink.NewPubSub(c, topic)
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return p
}

func TestPubSubPublishesDataAttributesAndOrderingKey(t *testing.T) {
	ctx := t.Context()
	c, project := emutest.PubSub(t)
	topic := "projects/" + project + "/topics/results"
	sub := "projects/" + project + "/subscriptions/worker"
	emutest.CreateTopic(t, c, topic)
	createSub(ctx, t, c, topic, sub)
	p := newPubSub(t, c, topic)

	failed := message("batches/b1")
	failed.State = "FAILED"
	failed.Output = nil
	failed.Error = &results.ErrorInfo{Code: 13, Message: "internal"}
	failed.APIName = "" // fixed before lrosink recorded it: null, no attribute
	replay := message("operations/v2")
	replay.Kind, replay.APIName = "video", "models/veo-3.0-generate-001/operations/v2"
	replay.ReplayID = "replay-7"
	msgs := []results.Message{message("interactions/i3"), failed, replay}
	for _, m := range msgs {
		if err := p.Publish(ctx, m); err != nil {
			t.Fatalf("publish %s: %v", m.Operation, err)
		}
	}

	got := receive(ctx, t, c, sub, len(msgs))
	for _, m := range msgs {
		pm := got[m.Operation]
		if pm == nil {
			t.Fatalf("no message for %s", m.Operation)
		}
		var data map[string]any
		if err := json.Unmarshal(pm.Data, &data); err != nil {
			t.Fatalf("%s: data is not JSON: %v: %s", m.Operation, err, pm.Data)
		}
		checkSchema(t, pm.Data)
		if m.Error == nil {
			checkData(t, data, m)
		} else {
			e, _ := data["error"].(map[string]any)
			if e["code"] != float64(13) || e["message"] != "internal" || data["state"] != "FAILED" {
				t.Errorf("%s: data = %s, want FAILED with error 13/internal", m.Operation, pm.Data)
			}
			if out, ok := data["output"].(map[string]any); !ok || len(out) != 0 {
				t.Errorf("%s: data.output = %v, want {}", m.Operation, data["output"])
			}
		}
		if !maps.Equal(pm.Attributes, wantAttrs(m)) {
			t.Errorf("%s: attributes = %v, want %v", m.Operation, pm.Attributes, wantAttrs(m))
		}
		_, hasReplay := pm.Attributes["replay_id"]
		if hasReplay != (m.ReplayID != "") {
			t.Errorf("%s: replay_id present = %v, want %v", m.Operation, hasReplay, m.ReplayID != "")
		}
		if pm.OrderingKey != m.Operation {
			t.Errorf("%s: ordering key = %q, want the operation name", m.Operation, pm.OrderingKey)
		}
	}
}

// A failed publish pauses its ordering key in the client; the sink must
// resume it, or the door's retry of the same operation could never succeed.
func TestPubSubRetryAfterFailureSucceeds(t *testing.T) {
	ctx := t.Context()
	c, project := emutest.PubSub(t)
	topic := "projects/" + project + "/topics/late"
	sub := "projects/" + project + "/subscriptions/late"
	p := newPubSub(t, c, topic)
	m := message("batches/retry-me")

	err := p.Publish(ctx, m)
	if err == nil {
		t.Fatal("publish to a missing topic returned nil, want an error")
	}
	if code := status.Code(err); code != codes.NotFound {
		t.Fatalf("publish to a missing topic: %v (code %v), want NotFound", err, code)
	}

	emutest.CreateTopic(t, c, topic)
	createSub(ctx, t, c, topic, sub)
	if err := p.Publish(ctx, m); err != nil {
		t.Fatalf("retry after the topic exists: %v", err)
	}
	got := receive(ctx, t, c, sub, 1)
	if pm := got[m.Operation]; pm == nil || pm.OrderingKey != m.Operation {
		t.Fatalf("retried message not delivered with its ordering key: %v", got)
	}
}

func TestPubSubCancelledContext(t *testing.T) {
	ctx := t.Context()
	c, project := emutest.PubSub(t)
	topic := "projects/" + project + "/topics/cancel"
	sub := "projects/" + project + "/subscriptions/cancel"
	emutest.CreateTopic(t, c, topic)
	createSub(ctx, t, c, topic, sub)
	p := newPubSub(t, c, topic)
	m := message("batches/cancelled")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Publish(cctx, m); !errors.Is(err, context.Canceled) {
		t.Fatalf("publish with a cancelled context: %v, want context.Canceled", err)
	}
	// The same operation still publishes once the caller retries.
	retry := m
	retry.ReplayID = "second-try"
	if err := p.Publish(ctx, retry); err != nil {
		t.Fatalf("publish after a cancelled attempt: %v", err)
	}
	// The cancelled attempt must not have been sent: the first delivery is the retry.
	got := receive(ctx, t, c, sub, 1)
	if pm := got[m.Operation]; pm.Attributes["replay_id"] != "second-try" {
		t.Fatalf("first delivered message has attributes %v, want the retry (replay_id second-try)", pm.Attributes)
	}
}

func TestPubSubPublishAfterCloseFails(t *testing.T) {
	ctx := t.Context()
	c, project := emutest.PubSub(t)
	topic := "projects/" + project + "/topics/closed"
	emutest.CreateTopic(t, c, topic)
	p := sink.NewPubSub(c, topic)
	if err := p.Publish(ctx, message("batches/before")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := p.Publish(ctx, message("batches/after")); err == nil {
		t.Fatal("publish after Close returned nil, want an error")
	}
}

// TestPubSubSlowPublishIsNotReportedFailed: a publish Pub/Sub answers only
// after the door's publish budget (its lease's) has run out. Once handed to
// the client it goes out whatever the caller's context does, so the sink
// reports its real outcome rather than a failure at the context's end:
// told "failed", the door released the claim, its retry published again,
// and a consumer got the message twice without any crash (CONTRACT §6
// allows that only for a crash between the publish and DONE).
func TestPubSubSlowPublishIsNotReportedFailed(t *testing.T) {
	ctx := t.Context()
	direct, project := emutest.PubSub(t)
	topic := "projects/" + project + "/topics/slow"
	sub := "projects/" + project + "/subscriptions/slow"
	emutest.CreateTopic(t, direct, topic)
	createSub(ctx, t, direct, topic, sub)
	proxy := testutil.NewGatedProxy(t, emutest.PubSubHost(t))
	t.Setenv("PUBSUB_EMULATOR_HOST", proxy.Addr)
	c, err := pubsub.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	store := testutil.MemLedger(t)
	const lease = 2 * time.Second
	d, err := ingest.New(ingest.Config{Store: claims.New(store), Sink: newPubSub(t, c, topic), Log: logging.Discard(),
		Now: time.Now, Lease: lease, Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	proxy.Hold() // Pub/Sub turns slow
	done := make(chan error, 1)
	go func() {
		_, err := d.Ingest(ctx, event.Event{Name: "batches/slow", State: lifecycle.Succeeded, GeminiStatus: "batch.succeeded",
			UpdateTime: time.Now(), Source: event.SourceWebhook})
		done <- err
	}()
	for proxy.Waiting() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(lease) // past the publish budget: the door's context for it has ended
	proxy.Release()
	if err := <-done; err != nil {
		t.Fatalf("a slow publish that went out was reported: %v", err)
	}
	if _, err := d.RetryClaim(ctx, "gemini:batches%2Fslow"); err != nil { // a redelivery, a reconcile pass
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second) // bounds the wait for a second message
	defer cancel()
	var mu sync.Mutex
	n := 0
	_ = direct.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		if m.Attributes["operation"] == "batches/slow" {
			n++
		}
	})
	if n != 1 {
		t.Fatalf("%d messages for one completion without any crash, want 1", n)
	}
}
