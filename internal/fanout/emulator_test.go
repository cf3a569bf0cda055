package fanout_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/fanout"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/shard"
)

// shardLog records what the real Reconcile handler ran for each push:
// message id -> range, and every pass run, redeliveries included.
type shardLog struct {
	mu     sync.Mutex
	byMsg  map[string]shard.Range
	ran    []shard.Range
	shared int
	wake   chan struct{}
}

func newShardLog() *shardLog {
	return &shardLog{byMsg: map[string]shard.Range{}, wake: make(chan struct{}, 1024)}
}

func (l *shardLog) PassRange(_ context.Context, r shard.Range) (reconcile.Summary, error) {
	l.mu.Lock()
	l.ran = append(l.ran, r)
	l.mu.Unlock()
	l.wake <- struct{}{}
	return reconcile.Summary{}, nil
}

func (l *shardLog) PassShared(context.Context) (reconcile.Summary, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.shared++
	return reconcile.Summary{}, nil
}

func (l *shardLog) Pass(context.Context) (reconcile.Summary, error) {
	panic("a shard push ran the whole pass")
}

// server is a real HTTP server running the real Reconcile handler, as the
// push endpoint; it notes each push's message id and range.
func server(t *testing.T, l *shardLog, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if req, d, err := fanout.ParsePush(body); err == nil {
			l.mu.Lock()
			l.byMsg[d.MessageID] = req.Range
			l.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestFanOutThroughPubSubPush: the coordinator publishes a tick's ranges to
// a real topic on the emulator; a push subscription delivers each to a real
// HTTP server running the Reconcile function, which runs that range. Every
// bucket is covered by exactly one published request per tick, and each
// range ran.
func TestFanOutThroughPubSubPush(t *testing.T) {
	ctx := t.Context()
	c, project := emutest.PubSub(t)
	topic := "projects/" + project + "/topics/fanout"
	emutest.CreateTopic(t, c, topic)
	l := newShardLog()
	h := httpapi.Reconcile(l, logging.Discard(), time.Minute, nil, httpapi.WithShardPasses(l))
	srv := server(t, l, h)
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/fanout-push", Topic: topic, AckDeadlineSeconds: 60,
		PushConfig: &pubsubpb.PushConfig{PushEndpoint: srv.URL + "/Reconcile"},
	}); err != nil {
		t.Fatalf("create push subscription: %v", err)
	}
	pub := fanout.NewPubSub(c, topic)
	t.Cleanup(func() { _ = pub.Close() })
	const shards = 7
	coord, err := fanout.NewCoordinator(fanout.Coordinator{Shared: l, Publisher: pub, Shards: shards, Now: time.Now, Log: logging.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := coord.Coordinate(ctx)
	if err != nil || res.ShardPasses != shards {
		t.Fatalf("Coordinate = %+v, %v; want %d shard passes", res, err, shards)
	}
	wait(ctx, t, l, shards)

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shared != 1 {
		t.Errorf("shared duties ran %d times, want once", l.shared)
	}
	if len(l.byMsg) != shards {
		t.Fatalf("%d distinct messages pushed, want %d: %v", len(l.byMsg), shards, l.byMsg)
	}
	covered := make([]int, shard.Buckets)
	for _, r := range l.byMsg {
		for b := r.Lo; b < r.Hi; b++ {
			covered[b]++
		}
	}
	for b, n := range covered {
		if n != 1 {
			t.Errorf("bucket %d is in %d requests of the tick, want exactly 1", b, n)
		}
	}
	ran := map[shard.Range]bool{}
	for _, r := range l.ran {
		ran[r] = true
	}
	for _, r := range l.byMsg {
		if !ran[r] {
			t.Errorf("range %s was pushed but no pass ran it", r)
		}
	}
}

// wait returns once n passes ran, or fails at the test's deadline.
func wait(ctx context.Context, t *testing.T, l *shardLog, n int) {
	t.Helper()
	for range n {
		select {
		case <-l.wake:
		case <-ctx.Done():
			t.Fatalf("only some of %d shard passes ran before the test ended", n)
		}
	}
}

// TestPoisonShardRequestIsDeadLettered pins what a push that is no shard
// request costs: the Reconcile function answers 400, which Pub/Sub push
// takes as a nack; the subscription's dead-letter policy moves it to the
// dead-letter topic after max delivery attempts, so it does not loop.
func TestPoisonShardRequestIsDeadLettered(t *testing.T) {
	ctx := t.Context()
	c, project := emutest.PubSub(t)
	topic := "projects/" + project + "/topics/fanout"
	dlq := "projects/" + project + "/topics/fanout-dead-letter"
	emutest.CreateTopic(t, c, topic)
	emutest.CreateTopic(t, c, dlq)
	hold := "projects/" + project + "/subscriptions/fanout-dead-letter-hold"
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: hold, Topic: dlq, AckDeadlineSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	l := newShardLog()
	var mu sync.Mutex
	statuses := []int{}
	h := httpapi.Reconcile(l, logging.Discard(), time.Minute, nil, httpapi.WithShardPasses(l))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		mu.Lock()
		statuses = append(statuses, rec.Code)
		mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	const attempts = 5
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/fanout-push", Topic: topic, AckDeadlineSeconds: 60,
		PushConfig:       &pubsubpb.PushConfig{PushEndpoint: srv.URL},
		DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{DeadLetterTopic: dlq, MaxDeliveryAttempts: attempts},
		RetryPolicy:      &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(time.Second), MaximumBackoff: durationpb.New(time.Second)},
	}); err != nil {
		t.Fatalf("create push subscription: %v", err)
	}
	if _, err := c.Publisher(topic).Publish(ctx, &pubsub.Message{Data: []byte(`{"range":"40-99"}`)}).Get(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan *pubsub.Message, 1)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_ = c.Subscriber(hold).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
			m.Ack()
			select {
			case got <- m:
			default:
			}
			cancel()
		})
	}()
	var m *pubsub.Message
	select {
	case m = <-got:
	case <-ctx.Done():
		t.Fatal("the poison request never reached the dead-letter topic")
	}
	if string(m.Data) != `{"range":"40-99"}` {
		t.Errorf("dead letter %q", m.Data)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(statuses) != attempts {
		t.Errorf("pushed %d times, want %d (max delivery attempts): %v", len(statuses), attempts, statuses)
	}
	for _, s := range statuses {
		if s != http.StatusBadRequest {
			t.Errorf("answered %d, want 400", s)
		}
	}
	if len(l.ran) != 0 {
		t.Errorf("a poison request ran passes %v", l.ran)
	}
}
