package emutest

import (
	"context"
	"testing"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

// TestFirestoreEmulatorReachable writes and reads back a document.
func TestFirestoreEmulatorReachable(t *testing.T) {
	ctx := t.Context()
	c, _ := Firestore(t)
	doc := c.Collection("smoke").Doc("one")
	if _, err := doc.Set(ctx, map[string]any{"n": 42}); err != nil {
		t.Fatalf("write to Firestore emulator: %v", err)
	}
	snap, err := doc.Get(ctx)
	if err != nil {
		t.Fatalf("read from Firestore emulator: %v", err)
	}
	if got := snap.Data()["n"]; got != int64(42) {
		t.Fatalf("read back n = %v, want 42", got)
	}
}

// TestPubSubEmulatorReachable publishes a message and pulls it back.
func TestPubSubEmulatorReachable(t *testing.T) {
	ctx := t.Context()
	c, project := PubSub(t)
	topic := "projects/" + project + "/topics/smoke"
	sub := "projects/" + project + "/subscriptions/smoke"
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic}); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	pub := c.Publisher(topic)
	defer pub.Stop()
	if _, err := pub.Publish(ctx, &pubsub.Message{Data: []byte("hello")}).Get(ctx); err != nil {
		t.Fatalf("publish: %v", err)
	}
	got := make(chan string, 1)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	err := c.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		select {
		case got <- string(m.Data):
		default:
		}
		rcancel()
	})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	select {
	case d := <-got:
		if d != "hello" {
			t.Fatalf("pulled %q, want hello", d)
		}
	default:
		t.Fatal("no message pulled before the deadline")
	}
}
