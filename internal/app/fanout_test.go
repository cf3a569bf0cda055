package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/fanout"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/shard"
	"github.com/lrosink/lrosink/internal/testutil"
)

// fanOutRig is an App with 4 shards whose fan-out topic is on the Pub/Sub
// emulator, served on a real HTTP server that a push subscription delivers
// the shard requests to, over a fake Gemini holding ops batches: the odd
// ones FAILED (a check settles them: one results message each), the even
// ones RUNNING.
type fanOutRig struct {
	fake   *fakegemini.Server
	app    *app.App
	srv    *httptest.Server
	client *pubsub.Client
	topic  string
	stdout *testutil.SyncBuffer
	names  []string

	mu      sync.Mutex
	pushes  map[string]shard.Range // message id -> range, as answered 200
	checked int                    // the shard passes' checked, summed
	done    chan struct{}          // one per shard request answered
}

const fanOutOps = 48

func newFanOutRig(t *testing.T, shards int) *fanOutRig {
	t.Helper()
	c, project := emutest.PubSub(t)
	r := &fanOutRig{fake: fakegemini.New(), client: c, topic: "projects/" + project + "/topics/lrosink-reconcile-fanout",
		stdout: &testutil.SyncBuffer{}, pushes: map[string]shard.Range{}, done: make(chan struct{}, 256)}
	if _, err := c.TopicAdminClient.CreateTopic(t.Context(), &pubsubpb.Topic{Name: r.topic}); err != nil {
		t.Fatal(err)
	}
	gem := r.fake.Start(t)
	clock := testutil.NewClock(now)
	cfg := testConfig(t, gem.URL, func(c *config.Config) {
		c.GeminiAPIKey, c.ReconcileDeadline = fakegemini.DefaultAPIKey, time.Minute
		c.ReconcileShards, c.FanOutTopic = shards, r.topic
	})
	a := newApp(t, cfg, nil, r.stdout, clock.Now)
	r.app = a
	h := a.Mux()
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		sr, d, err := fanout.ParsePush(body)
		if err != nil {
			h.ServeHTTP(w, req)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var a httpapi.ReconcileAnswer
		if rec.Code == http.StatusOK && json.Unmarshal(rec.Body.Bytes(), &a) == nil && a.Range == sr.Range.String() {
			r.mu.Lock()
			r.pushes[d.MessageID] = sr.Range
			r.checked += a.Checked
			r.mu.Unlock()
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		r.done <- struct{}{}
	}))
	t.Cleanup(r.srv.Close)
	if _, err := c.SubscriptionAdminClient.CreateSubscription(t.Context(), &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/lrosink-reconcile-fanout-push", Topic: r.topic, AckDeadlineSeconds: 120,
		PushConfig: &pubsubpb.PushConfig{PushEndpoint: r.srv.URL + "/Reconcile"},
	}); err != nil {
		t.Fatal(err)
	}
	for i := range fanOutOps {
		id := fmt.Sprintf("fan%02d", i)
		st := fakegemini.BatchState{State: "BATCH_STATE_RUNNING"}
		if i%2 == 1 {
			st = fakegemini.BatchState{State: "BATCH_STATE_FAILED", ErrorCode: 13, ErrorMessage: "internal"}
		}
		r.fake.SetBatch(id, st)
		r.names = append(r.names, "batches/"+id)
		resp, err := http.Post(r.srv.URL+"/Register", "application/json", strings.NewReader(`{"name":"batches/`+id+`","kind":"batch"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("register %s: %d", id, resp.StatusCode)
		}
	}
	clock.Advance(2 * time.Minute) // past grace: every operation is due
	return r
}

// await waits for n shard requests answered, or fails at the test's end.
func (r *fanOutRig) await(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-r.done:
		case <-ctx.Done():
			t.Fatalf("%d of %d shard requests answered before the test ended", i, n)
		}
	}
}

// gets counts the GETs of each registered batch Gemini saw.
func (r *fanOutRig) gets() map[string]int {
	out := map[string]int{}
	for _, q := range r.fake.Requests() {
		if q.Method == http.MethodGet && strings.HasPrefix(q.Path, "/v1beta/batches/fan") {
			out[strings.TrimPrefix(q.Path, "/v1beta/")]++
		}
	}
	return out
}

// results counts the results messages written per operation.
func (r *fanOutRig) results(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout.String()), "\n") {
		if l == "" {
			continue
		}
		var m struct {
			Operation string `json:"operation"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("results line %q: %v", l, err)
		}
		out[m.Operation]++
	}
	return out
}

// TestShardedTickThroughPubSubPush: with LROSINK_RECONCILE_SHARDS=4 the
// Scheduler's plain POST /Reconcile coordinates: it answers that it handed
// out 4 shard passes, the emulator pushes each shard request to the same
// App's /Reconcile, and the real reconciler runs each range. Every bucket is
// in exactly one request of the tick, every operation was checked exactly
// once, and every settled one was published exactly once.
func TestShardedTickThroughPubSubPush(t *testing.T) {
	const shards = 4
	r := newFanOutRig(t, shards)
	resp, err := http.Post(r.srv.URL+"/Reconcile", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var a httpapi.ReconcileAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK || a.ShardPasses != shards {
		t.Fatalf("coordinator answered %d %+v (%v), want 200 with shard_passes %d", resp.StatusCode, a, err, shards)
	}
	resp.Body.Close()
	if a.Checked != 0 {
		t.Errorf("the coordinator checked %d operations itself; the shard passes do", a.Checked)
	}
	r.await(t.Context(), t, shards)

	r.mu.Lock()
	covered := make([]int, shard.Buckets)
	for _, rg := range r.pushes {
		for b := rg.Lo; b < rg.Hi; b++ {
			covered[b]++
		}
	}
	checked := r.checked
	r.mu.Unlock()
	// The coordinator's adoption listing may settle a FAILED batch before
	// its shard pass gets to it; the RUNNING ones only the shard passes
	// check.
	if checked < fanOutOps/2 || checked > fanOutOps {
		t.Errorf("the shard passes checked %d operations in all, want %d to %d", checked, fanOutOps/2, fanOutOps)
	}
	for b, n := range covered {
		if n != 1 {
			t.Errorf("bucket %d is in %d answered shard requests, want 1", b, n)
		}
	}
	// A RUNNING batch costs one GET; a FAILED one more (its error's
	// detail, and the adoption listing's), so only the former are counted.
	gets := r.gets()
	for i, name := range r.names {
		if i%2 == 0 && gets[name] != 1 {
			t.Errorf("%s: Gemini asked %d times this tick, want once", name, gets[name])
		}
	}
	res := r.results(t)
	for i, name := range r.names {
		if want := i % 2; res[name] != want {
			t.Errorf("%s: %d results messages, want %d", name, res[name], want)
		}
	}

	// The ledger-wide gauges follow the coordinator's whole-ledger count,
	// never a shard pass's, which counts its own buckets only (a range
	// with nothing due now would read 0 pending).
	if _, err := r.app.Reconciler.PassRange(t.Context(), shard.Range{Lo: 0, Hi: 16}); err != nil {
		t.Fatal(err)
	}
	if a.StillPending == 0 {
		t.Fatal("the coordinator counted no pending operation: the gauge check would prove nothing")
	}
	if got := gauge(t, r.app, "lrosink_operations_pending"); got != float64(a.StillPending) {
		t.Errorf("pending gauge %v after a shard pass, want the coordinator's still_pending %d", got, a.StillPending)
	}
}

// gauge reads one gauge of a's metrics registry.
func gauge(t *testing.T, a *app.App, name string) float64 {
	t.Helper()
	fams, err := a.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("gauge %s not gathered", name)
	return 0
}

// TestOverlappingShardPassesAreSafe: two shard requests for the same range
// (a redelivery, or a slow pass meeting the next tick) run at once; every
// write is fenced, so the settled operations are published exactly once
// and none is lost.
func TestOverlappingShardPassesAreSafe(t *testing.T) {
	r := newFanOutRig(t, 2)
	pub := r.client.Publisher(r.topic)
	t.Cleanup(pub.Stop)
	all := shard.All()
	for range 2 {
		if _, err := pub.Publish(t.Context(), &pubsub.Message{Data: fanout.Request{Range: all}.Data()}).Get(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	r.await(t.Context(), t, 2)
	res := r.results(t)
	for i, name := range r.names {
		if want := i % 2; res[name] != want {
			t.Errorf("%s: %d results messages after two overlapping passes, want %d", name, res[name], want)
		}
	}
	for _, name := range r.names {
		if r.gets()[name] == 0 {
			t.Errorf("%s: never checked", name)
		}
	}
}
