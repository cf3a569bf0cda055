package consume_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lrosink/lrosink/consume"
	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/sink"
)

// tally records handler runs and outcomes and lets a test wait on them.
type tally struct {
	mu       sync.Mutex
	runs     map[string]int
	kinds    map[consume.Kind]int
	results  map[string]consume.Result
	failOnce map[string]bool // keys whose first run fails
	more     chan struct{}
}

func newTally(failOnce ...string) *tally {
	t := &tally{runs: map[string]int{}, kinds: map[consume.Kind]int{}, results: map[string]consume.Result{},
		failOnce: map[string]bool{}, more: make(chan struct{}, 1)}
	for _, k := range failOnce {
		t.failOnce[k] = true
	}
	return t
}

func (t *tally) handle(_ context.Context, d consume.Delivery) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failOnce[d.Key] {
		delete(t.failOnce, d.Key)
		return errors.New("downstream unavailable")
	}
	t.runs[d.Key]++
	t.results[d.Key] = d.Result
	return nil
}

func (t *tally) outcome(o consume.Outcome) {
	t.mu.Lock()
	t.kinds[o.Kind]++
	t.mu.Unlock()
	select {
	case t.more <- struct{}{}:
	default:
	}
}

func (t *tally) waitFor(tb testing.TB, what string, cond func(kinds map[consume.Kind]int) bool) {
	tb.Helper()
	deadline := time.After(90 * time.Second) // a hang, not a timing assertion
	for {
		t.mu.Lock()
		ok := cond(t.kinds)
		t.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-t.more:
		case <-deadline:
			tb.Fatalf("timed out waiting for %s; outcomes %v, runs %v", what, t.kinds, t.runs)
		}
	}
}

func (t *tally) snapshot() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for k, v := range t.runs {
		out[k] = v
	}
	return out
}

func resultMsg(op, replay string) results.Message {
	return results.Message{
		Operation: op, Kind: "batch", State: "SUCCEEDED", SettledBy: "reconcile",
		UpdateTime: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC), SettledAt: time.Date(2026, 11, 21, 9, 1, 0, 0, time.UTC),
		IdempotencyKey: "gemini:" + op, Output: map[string]any{"responses_file": "files/" + op},
		UserMetadata: map[string]any{"team": "search"}, ReplayID: replay,
	}
}

// wantRuns are the runs of the messages every source test sends: A twice
// (lrosink's crash-window duplicate), B (whose first run fails), and a
// deliberate replay of A, which runs once more.
var wantRuns = map[string]int{"gemini:batches/a": 1, "gemini:batches/b": 1, "gemini:batches/a#replay:r1": 1}

func sendAll(t *testing.T, s sink.Sink) {
	t.Helper()
	for _, m := range []results.Message{resultMsg("batches/a", ""), resultMsg("batches/a", ""), resultMsg("batches/b", ""), resultMsg("batches/a", "r1")} {
		if err := s.Publish(t.Context(), m); err != nil {
			t.Errorf("publish: %v", err) // not Fatal: may run on another goroutine
			return
		}
	}
}

func checkRuns(t *testing.T, tl *tally) {
	t.Helper()
	if got := tl.snapshot(); len(got) != len(wantRuns) || got["gemini:batches/a"] != 1 || got["gemini:batches/b"] != 1 || got["gemini:batches/a#replay:r1"] != 1 {
		t.Errorf("handler runs = %v, want %v", got, wantRuns)
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if r := tl.results["gemini:batches/b"]; r.Operation != "batches/b" || r.State != consume.StateSucceeded ||
		r.Output["responses_file"] != "files/batches/b" || r.UserMetadata["team"] != "search" || r.SettledBy != "reconcile" {
		t.Errorf("decoded result = %+v", r)
	}
}

var settled = func(k map[consume.Kind]int) bool {
	return k[consume.Processed] == 3 && k[consume.Duplicate] >= 1 && k[consume.Failed] >= 1
}

// End to end on the Pub/Sub emulator: lrosink's Pub/Sub sink publishes, a
// subscription configured like terraform/pubsub.tf's (exactly-once, ordered)
// delivers, consume processes each key once; the failed run is redelivered.
func TestPubSubSource(t *testing.T) {
	ctx := t.Context()
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
	pub := sink.NewPubSub(ps, topic)
	defer pub.Close()
	sendAll(t, pub)

	tl := newTally("gemini:batches/b")
	c := &consume.Consumer{Store: openSQLite(t), Handler: tl.handle, OnOutcome: tl.outcome}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx, consume.PubSub(ps.Subscriber(sub))) }()
	tl.waitFor(t, "3 processed, a duplicate and a failure", settled)
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	checkRuns(t, tl)
}

// Local development: `lrosink serve` with LROSINK_RESULTS=file:PATH appends
// lines; TailFile follows the file, including lines written after it started.
func TestTailFileSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.jsonl")
	f, err := sink.NewFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Publish(t.Context(), resultMsg("batches/a", "")); err != nil {
		t.Fatal(err)
	}

	tl := newTally("gemini:batches/b")
	src := consume.TailFile(path)
	src.Poll, src.RetryDelay = 10*time.Millisecond, 10*time.Millisecond
	c := &consume.Consumer{Store: openSQLite(t), Handler: tl.handle, OnOutcome: tl.outcome}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, src) }()
	tl.waitFor(t, "the first line", func(k map[consume.Kind]int) bool { return k[consume.Processed] == 1 })

	// A torn write: the tail waits for the end of the line.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(raw[:len(raw)/2]); err != nil { // half of A's line again
		t.Fatal(err)
	}
	if _, err := w.Write(append(raw[len(raw)/2:], []byte("not json\n")...)); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	for _, m := range []results.Message{resultMsg("batches/b", ""), resultMsg("batches/a", "r1")} {
		if err := f.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	tl.waitFor(t, "3 processed, a duplicate, a failure, an invalid line", func(k map[consume.Kind]int) bool {
		return settled(k) && k[consume.Invalid] == 1
	})
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	checkRuns(t, tl)
}

// `lrosink serve | worker`: Lines reads a stream (stdin) to its end.
func TestLinesSource(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		sendAll(t, sink.NewWriter(pw))
		_ = pw.Close()
	}()
	tl := newTally("gemini:batches/b")
	src := consume.Lines(pr)
	src.RetryDelay = time.Millisecond
	c := &consume.Consumer{Store: openSQLite(t), Handler: tl.handle, OnOutcome: tl.outcome}
	if err := c.Run(t.Context(), src); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !settled(tl.kinds) {
		t.Errorf("outcomes %v", tl.kinds)
	}
	checkRuns(t, tl)
}

// The typed Result reads what the schema describes, including the additions
// of CONTRACT.md §6 (gemini_status, api_name, output.batch_stats, INCOMPLETE).
func TestResultDecoding(t *testing.T) {
	line := `{"operation":"batches/x","api_name":"batches/x","kind":"batch","state":"INCOMPLETE","update_time":"2026-11-21T10:00:00Z",
"settled_by":"webhook","settled_at":"2026-11-21T10:00:01Z","gemini_status":"BATCH_STATE_SUCCEEDED",
"idempotency_key":"gemini:batches/x","output":{"batch_stats":{"request_count":10,"successful_request_count":7,
"failed_request_count":2,"pending_request_count":1}},"error":null,"user_metadata":null,"some_future_field":1,
"attributes":{"idempotency_key":"gemini:batches/x","operation":"batches/x","state":"INCOMPLETE","kind":"batch"}}`
	tl := newTally()
	c := &consume.Consumer{Store: openSQLite(t), Handler: tl.handle, OnOutcome: tl.outcome}
	if err := c.Run(t.Context(), consume.Lines(strings.NewReader(strings.ReplaceAll(line, "\n", "")+"\n"))); err != nil {
		t.Fatal(err)
	}
	r := tl.results["gemini:batches/x"]
	st, ok := r.BatchStats()
	if r.State != consume.StateIncomplete || r.GeminiStatus != "BATCH_STATE_SUCCEEDED" || r.APIName != "batches/x" || !ok ||
		st != (consume.BatchStats{RequestCount: 10, SuccessfulRequestCount: 7, FailedRequestCount: 2, PendingRequestCount: 1}) {
		t.Errorf("result %+v, batch stats %+v %v", r, st, ok)
	}
	if _, ok := (consume.Result{Output: map[string]any{}}).BatchStats(); ok {
		t.Error("BatchStats reported stats for an output without them")
	}
}
