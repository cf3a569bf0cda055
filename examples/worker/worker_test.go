package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/lrosink/lrosink/internal/results/resultstest"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lrosink/lrosink/internal/emutest"
)

// counter counts handler runs per dedupe key.
type counter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *counter) handle(_ context.Context, _ Result, m Meta) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]int{}
	}
	c.runs[m.DedupeKey]++
	return nil
}

func (c *counter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.runs {
		out[k] = v
	}
	return out
}

// outcomes collects Worker outcomes and lets a test wait for them.
type outcomes struct {
	mu   sync.Mutex
	all  []Outcome
	more chan struct{}
}

func newOutcomes() *outcomes { return &outcomes{more: make(chan struct{}, 1000)} }

func (o *outcomes) add(x Outcome) {
	o.mu.Lock()
	o.all = append(o.all, x)
	o.mu.Unlock()
	o.more <- struct{}{}
}

func (o *outcomes) list() []Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Outcome(nil), o.all...)
}

func (o *outcomes) count(k Kind) int {
	n := 0
	for _, x := range o.list() {
		if x.Kind == k {
			n++
		}
	}
	return n
}

// waitFor waits until cond holds over the outcomes, failing after d.
func (o *outcomes) waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(d)
	for !cond() {
		select {
		case <-o.more:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; outcomes: %+v", what, o.list())
		}
	}
}

func resultData(t *testing.T, op, key string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"operation": op, "kind": "batch", "state": "SUCCEEDED",
		"update_time": "2026-11-21T10:00:00Z", "settled_by": "webhook", "settled_at": "2026-11-21T10:00:01Z",
		"idempotency_key": key, "output": map[string]any{"responses_file": "files/out"}, "error": nil, "user_metadata": nil,
	})
	if err != nil {
		t.Fatal(err)
	}
	resultstest.Check(t, b) // the worker is tested on messages lrosink can really send
	return b
}

func resultMessage(t *testing.T, op, key string) *pubsub.Message {
	return &pubsub.Message{
		Data:        resultData(t, op, key),
		Attributes:  map[string]string{"idempotency_key": key, "operation": op, "state": "SUCCEEDED", "kind": "batch"},
		OrderingKey: op,
	}
}

// subscription creates a topic and a subscription configured like
// terraform/pubsub.tf's (exactly-once, ordered), on a fresh emulator project.
func subscription(t *testing.T, ctx context.Context) (*pubsub.Client, *pubsub.Publisher, string) {
	t.Helper()
	ps, project := emutest.PubSub(t)
	topic := "projects/" + project + "/topics/results"
	sub := "projects/" + project + "/subscriptions/worker"
	if _, err := ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if _, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: sub, Topic: topic, AckDeadlineSeconds: 20,
		EnableExactlyOnceDelivery: true, EnableMessageOrdering: true,
		RetryPolicy: &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(time.Second), MaximumBackoff: durationpb.New(2 * time.Second)},
	}); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	pub := ps.Publisher(topic)
	pub.EnableMessageOrdering = true
	t.Cleanup(pub.Stop)
	return ps, pub, sub
}

func publish(t *testing.T, ctx context.Context, pub *pubsub.Publisher, m *pubsub.Message) {
	t.Helper()
	if _, err := pub.Publish(ctx, m).Get(ctx); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// startWorker runs w on sub until the test ends.
func startWorker(t *testing.T, ps *pubsub.Client, sub string, w *Worker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, ps.Subscriber(sub)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// The same result published twice (same idempotency_key, two message IDs)
// plus another result: the handler runs exactly once per key, and every
// delivery is acknowledged.
func TestDuplicatePublishRunsOncePerKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	fs, _ := emutest.Firestore(t)
	ps, pub, sub := subscription(t, ctx)

	const k1, k2 = "gemini:batches/one", "gemini:batches/two"
	publish(t, ctx, pub, resultMessage(t, "batches/one", k1))
	publish(t, ctx, pub, resultMessage(t, "batches/one", k1)) // the crash-window duplicate
	publish(t, ctx, pub, resultMessage(t, "batches/two", k2))

	var runs counter
	got := newOutcomes()
	startWorker(t, ps, sub, &Worker{
		Dedupe: &FirestoreDeduper{Client: fs, Collection: "processed"},
		Handle: runs.handle, OnOutcome: got.add,
	})
	got.waitFor(t, 60*time.Second, "3 deliveries", func() bool { return len(got.list()) >= 3 })
	// Give a wrongly unacknowledged message time to come back.
	time.Sleep(3 * time.Second)

	if r := runs.snapshot(); len(r) != 2 || r[k1] != 1 || r[k2] != 1 {
		t.Errorf("handler runs = %v, want exactly once each for %s and %s", r, k1, k2)
	}
	if p, d := got.count(Processed), got.count(Duplicate); p != 2 || d != 1 || len(got.list()) != 3 {
		t.Errorf("outcomes = %+v, want 2 processed and 1 duplicate", got.list())
	}
	for _, o := range got.list() {
		if o.AckErr != nil {
			t.Errorf("ack of %s (%s) not confirmed: %v", o.MessageID, o.Kind, o.AckErr)
		}
	}
	for _, k := range []string{k1, k2} {
		snap, err := fs.Collection("processed").Doc(DocID(k)).Get(ctx)
		if err != nil {
			t.Fatalf("processed/%s: %v", DocID(k), err)
		}
		if snap.Data()["status"] != "done" || snap.Data()["key"] != k {
			t.Errorf("processed/%s = %v, want status done, key %s", DocID(k), snap.Data(), k)
		}
	}
}

// A lost ack after processing means Pub/Sub redelivers the message (the
// test nacks instead of acking once); the redelivery is a duplicate and the
// handler does not run again.
func TestRedeliveryAfterLostAckDoesNotRerun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	fs, _ := emutest.Firestore(t)
	ps, pub, sub := subscription(t, ctx)

	const k = "gemini:batches/lost-ack"
	publish(t, ctx, pub, resultMessage(t, "batches/lost-ack", k))

	var runs counter
	got := newOutcomes()
	var once sync.Once
	startWorker(t, ps, sub, &Worker{
		Dedupe: &FirestoreDeduper{Client: fs, Collection: "processed"},
		Handle: runs.handle, OnOutcome: got.add,
		loseAck: func(o Outcome) bool {
			lose := false
			once.Do(func() { lose = o.Kind == Processed })
			return lose
		},
	})
	got.waitFor(t, 60*time.Second, "the delivery and its redelivery", func() bool { return len(got.list()) >= 2 })

	if r := runs.snapshot(); r[k] != 1 {
		t.Errorf("handler ran %d times for %s, want 1", r[k], k)
	}
	if all := got.list(); len(all) != 2 || all[0].Kind != Processed || all[1].Kind != Duplicate || all[0].MessageID != all[1].MessageID {
		t.Errorf("outcomes = %+v, want the same message processed then duplicate", all)
	}
}

// Concurrent copies of one key (two publishes pulled by two workers at the
// same time) race on the claim: exactly one runs the handler.
func TestConcurrentCopiesRunOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fs, _ := emutest.Firestore(t)
	var runs counter
	w := &Worker{Dedupe: &FirestoreDeduper{Client: fs, Collection: "processed"}, Handle: runs.handle}

	const k, copies = "gemini:batches/racy", 12
	data := resultData(t, "batches/racy", k)
	kinds := make([]Kind, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() {
			o := w.process(ctx, Meta{MessageID: fmt.Sprint(i)}, map[string]string{"idempotency_key": k}, data)
			kinds[i] = o.Kind
			if o.Err != nil {
				t.Errorf("copy %d: %v", i, o.Err)
			}
		})
	}
	wg.Wait()
	processed := 0
	for _, kd := range kinds {
		if kd == Processed {
			processed++
		} else if kd != Duplicate {
			t.Errorf("outcome %s, want processed or duplicate", kd)
		}
	}
	if processed != 1 || runs.snapshot()[k] != 1 {
		t.Errorf("%d processed, handler ran %d times; want 1 and 1", processed, runs.snapshot()[k])
	}
}

// The handler's error decides whether the key may run again: Retryable
// (no side effect) releases it; any other failure is final.
func TestHandlerErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fs, _ := emutest.Firestore(t)
	calls := 0
	var next error
	w := &Worker{
		Dedupe: &FirestoreDeduper{Client: fs, Collection: "processed"},
		Handle: func(context.Context, Result, Meta) error { calls++; return next },
	}
	deliver := func(key string, attrs ...string) Outcome {
		a := map[string]string{"idempotency_key": key}
		for i := 0; i+1 < len(attrs); i += 2 {
			a[attrs[i]] = attrs[i+1]
		}
		return w.process(ctx, Meta{MessageID: "m"}, a, resultData(t, "batches/x", key))
	}

	next = Retryable(errors.New("downstream unavailable, nothing written"))
	if o := deliver("gemini:batches/retry"); o.Kind != Retry {
		t.Fatalf("retryable error: outcome %s (%v), want retry", o.Kind, o.Err)
	}
	next = nil
	if o := deliver("gemini:batches/retry"); o.Kind != Processed {
		t.Fatalf("after a retryable error: outcome %s (%v), want processed", o.Kind, o.Err)
	}
	if calls != 2 {
		t.Fatalf("handler calls = %d, want 2", calls)
	}

	next = errors.New("wrote half, then failed")
	if o := deliver("gemini:batches/fail"); o.Kind != Failed {
		t.Fatalf("plain error: outcome %s, want failed", o.Kind)
	}
	next = nil
	if o := deliver("gemini:batches/fail"); o.Kind != Duplicate {
		t.Fatalf("after a failure: outcome %s, want duplicate (never run twice)", o.Kind)
	}
	snap, err := fs.Collection("processed").Doc(DocID("gemini:batches/fail")).Get(ctx)
	if err != nil || snap.Data()["status"] != "failed" || !strings.Contains(fmt.Sprint(snap.Data()["error"]), "wrote half") {
		t.Errorf("failed key document = %v (err %v), want status failed with the error", snap.Data(), err)
	}

	// A deliberate replay is processed once per replay_id.
	calls = 0
	for _, want := range []Kind{Processed, Duplicate} {
		if o := deliver("gemini:batches/retry", "replay_id", "r1"); o.Kind != want {
			t.Errorf("replay r1: outcome %s, want %s", o.Kind, want)
		}
	}
	if o := deliver("gemini:batches/retry", "replay_id", "r2"); o.Kind != Processed {
		t.Errorf("replay r2: outcome %s, want processed", o.Kind)
	}
	if calls != 2 {
		t.Errorf("replays ran the handler %d times, want 2 (r1, r2)", calls)
	}

	// Not a results message: never reaches the handler.
	calls = 0
	for name, o := range map[string]Outcome{
		"no key":   w.process(ctx, Meta{}, nil, []byte(`{"operation":"batches/x"}`)),
		"bad json": w.process(ctx, Meta{}, map[string]string{"idempotency_key": "k"}, []byte(`{`)),
		"mismatch": w.process(ctx, Meta{}, map[string]string{"idempotency_key": "gemini:batches/a"}, resultData(t, "batches/x", "gemini:batches/x")),
	} {
		if o.Kind != Invalid {
			t.Errorf("%s: outcome %s, want invalid", name, o.Kind)
		}
	}
	if calls != 0 {
		t.Errorf("invalid messages ran the handler %d times", calls)
	}
}

func TestDocIDIsAlwaysValid(t *testing.T) {
	for _, k := range []string{"gemini:batches/abc", "..", ".", "__x__", strings.Repeat("k/", 2000), "gemini:models/m/operations/x/"} {
		id := DocID(k)
		if len(id) != 64 || strings.ContainsAny(id, "/.") {
			t.Errorf("DocID(%.20q) = %q: not a 64-character id without / or .", k, id)
		}
	}
	if DocID("a") == DocID("b") {
		t.Error("DocID collides on distinct keys")
	}
}
