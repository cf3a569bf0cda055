package consume_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/lrosink/lrosink/consume"
	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/sink"
)

// outcomes counts what a Consumer reports, by kind and message id.
type outcomes struct {
	mu    sync.Mutex
	kinds map[consume.Kind]int
	byID  map[string][]consume.Kind
	more  chan struct{}
}

func newOutcomes() *outcomes {
	return &outcomes{kinds: map[consume.Kind]int{}, byID: map[string][]consume.Kind{}, more: make(chan struct{}, 1)}
}

func (o *outcomes) add(x consume.Outcome) {
	o.mu.Lock()
	o.kinds[x.Kind]++
	o.byID[x.MessageID] = append(o.byID[x.MessageID], x.Kind)
	o.mu.Unlock()
	select {
	case o.more <- struct{}{}:
	default:
	}
}

// until waits for cond or the test's end.
func (o *outcomes) until(t *testing.T, what string, cond func(map[consume.Kind]int) bool) {
	t.Helper()
	for {
		o.mu.Lock()
		ok := cond(o.kinds)
		o.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-o.more:
		case <-t.Context().Done():
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// TestPubSubInvalidMessageIsNotRedeliveredForever: a message on the results
// subscription that is not an lrosink result (no dead-letter policy on the
// subscription) is acknowledged once, not nacked again and again: a second
// worker run that processes a later message never sees it again.
// (Before the fix the Pub/Sub source nacked it on every delivery, a poison
// loop; the lines source skipped it.)
func TestPubSubInvalidMessageIsNotRedeliveredForever(t *testing.T) {
	ctx := t.Context()
	ps, project := emutest.PubSub(t)
	topic := "projects/" + project + "/topics/results"
	sub := "projects/" + project + "/subscriptions/worker"
	if _, err := ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if _, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: sub, Topic: topic, AckDeadlineSeconds: 20}); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	raw := ps.Publisher(topic)
	defer raw.Stop()
	poison, err := raw.Publish(ctx, &pubsub.Message{Data: []byte("not a results message")}).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pub := sink.NewPubSub(ps, topic)
	defer pub.Close()

	runUntil := func(o *outcomes, what string, cond func(map[consume.Kind]int) bool) {
		t.Helper()
		c := &consume.Consumer{Store: openSQLite(t), Handler: func(context.Context, consume.Delivery) error { return nil }, OnOutcome: o.add}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.Run(rctx, consume.PubSub(ps.Subscriber(sub))) }()
		o.until(t, what, cond)
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	if err := pub.Publish(ctx, resultMsg("batches/first", "")); err != nil {
		t.Fatal(err)
	}
	first := newOutcomes()
	runUntil(first, "the invalid message and the first result", func(k map[consume.Kind]int) bool {
		return k[consume.Invalid] >= 1 && k[consume.Processed] == 1
	})

	// A later run: the next result arrives; the invalid message must not.
	if err := pub.Publish(ctx, resultMsg("batches/second", "")); err != nil {
		t.Fatal(err)
	}
	second := newOutcomes()
	runUntil(second, "the second result", func(k map[consume.Kind]int) bool { return k[consume.Processed] == 1 })
	first.mu.Lock()
	second.mu.Lock()
	defer first.mu.Unlock()
	defer second.mu.Unlock()
	if n := len(first.byID[poison]) + len(second.byID[poison]); n != 1 {
		t.Errorf("the invalid message %s was delivered %d times (%v, then %v), want once", poison, n, first.byID[poison], second.byID[poison])
	}
}

// TestResultNumbersAreExact: a worker reads numbers in user metadata and
// output as json.Number, exactly as lrosink published them.
func TestResultNumbersAreExact(t *testing.T) {
	m := resultMsg("batches/num", "")
	m.UserMetadata = map[string]any{"job_id": json.Number("1234567890123456789")}
	data, err := m.Data()
	if err != nil {
		t.Fatal(err)
	}
	var got consume.Delivery
	c := &consume.Consumer{Store: openSQLite(t), Handler: func(_ context.Context, d consume.Delivery) error {
		got = d
		return nil
	}}
	if o := c.Process(t.Context(), consume.Message{ID: "1", Data: data, Attributes: m.Attributes()}); o.Kind != consume.Processed {
		t.Fatalf("outcome %+v", o)
	}
	if v := got.Result.UserMetadata["job_id"]; v != json.Number("1234567890123456789") {
		t.Fatalf("job_id decoded as %#v (%T)", v, v)
	}
}
