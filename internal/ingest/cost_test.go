package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/fsledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

type cost struct{ reads, writes, commits int64 }

func measure(t testing.TB, s *fsledger.Store, f func()) cost {
	r0, w0, c0 := s.Counts().Snapshot()
	f()
	r1, w1, c1 := s.Counts().Snapshot()
	return cost{r1 - r0, w1 - w0, c1 - c0}
}

func costDoor(t testing.TB) (*ingest.Door, *fsledger.Store, *clock) {
	s := testutil.FirestoreLedger(t)
	c := newClock()
	d, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: &countingSink{}, Log: logging.Discard(), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return d, s, c
}

// TestFirestoreCostPerPath pins the Firestore cost of each path (counted by
// the instrumented adapter): a completion is one read and four writes (the
// operation and the claim in one commit, then DONE and its mirror on the
// operation in another); a duplicate or a stale
// event is one read, no write, no commit; a register of a known operation
// writes only when it adds metadata.
func TestFirestoreCostPerPath(t *testing.T) {
	t.Parallel()
	d, s, _ := costDoor(t)
	ctx := t.Context()
	run := func(e event.Event) func() {
		return func() {
			if _, err := d.Ingest(ctx, e); err != nil {
				t.Fatalf("ingest: %v", err)
			}
		}
	}
	name := "batches/cost"
	register := measure(t, s, run(ev(name, lifecycle.Pending, time.Time{}, event.SourceRegister)))
	running := measure(t, s, run(ev(name, lifecycle.Running, tRun, event.SourceWebhook)))
	completion := measure(t, s, run(ev(name, lifecycle.Succeeded, tDone, event.SourceWebhook)))
	duplicate := measure(t, s, run(ev(name, lifecycle.Succeeded, tDone, event.SourceWebhook)))
	stale := measure(t, s, run(ev(name, lifecycle.Running, tRun, event.SourceReconcile)))
	registerKnown := measure(t, s, run(ev(name, lifecycle.Pending, time.Time{}, event.SourceRegister)))
	lateMetadata := ev(name, lifecycle.Pending, time.Time{}, event.SourceRegister)
	lateMetadata.UserMetadata = map[string]any{"team": "t1"}
	registerMetadata := measure(t, s, run(lateMetadata))
	for _, c := range []struct {
		path      string
		got, want cost
	}{
		{"register", register, cost{1, 1, 1}},
		{"running", running, cost{1, 1, 1}},
		{"completion", completion, cost{1, 4, 2}},
		{"duplicate", duplicate, cost{1, 0, 0}},
		{"stale", stale, cost{1, 0, 0}},
		{"register adding nothing", registerKnown, cost{1, 0, 0}},
		{"register adding metadata", registerMetadata, cost{1, 1, 1}},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d reads %d writes %d commits, want %d/%d/%d", c.path,
				c.got.reads, c.got.writes, c.got.commits, c.want.reads, c.want.writes, c.want.commits)
		}
	}
}

// TestReplayCost pins what a replay reads and writes: the claim, then the
// operation it records the replay on (one commit). When the claim is gone
// the message is rebuilt from the operation, which is read once for both.
func TestReplayCost(t *testing.T) {
	t.Parallel()
	c := testutil.Firestore(t)
	s := fsledger.New(c, nil)
	d, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: &countingSink{}, Log: logging.Discard(), Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	replay := func(name string) func() {
		return func() {
			if _, err := d.Replay(ctx, name, ""); err != nil {
				t.Fatalf("replay %s: %v", name, err)
			}
		}
	}
	mustIngest(t, d, ev("batches/withclaim", lifecycle.Succeeded, tDone, event.SourceWebhook))
	mustIngest(t, d, ev("batches/noclaim", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if _, err := c.Collection(fsledger.Claims).Doc("gemini:batches%2Fnoclaim").Delete(ctx); err != nil {
		t.Fatalf("delete claim: %v", err)
	}
	for _, r := range []struct {
		path      string
		got, want cost
	}{
		{"with its claim", measure(t, s, replay("batches/withclaim")), cost{2, 1, 1}},
		{"claim gone", measure(t, s, replay("batches/noclaim")), cost{2, 1, 1}},
	} {
		if r.got != r.want {
			t.Errorf("replay %s: %d reads %d writes %d commits, want %d/%d/%d", r.path,
				r.got.reads, r.got.writes, r.got.commits, r.want.reads, r.want.writes, r.want.commits)
		}
	}
}

// BenchmarkIngestFirestoreCost reports reads/writes per path.
func BenchmarkIngestFirestoreCost(b *testing.B) {
	for _, path := range []string{"completion", "duplicate", "stale"} {
		b.Run(path, func(b *testing.B) {
			d, s, _ := costDoor(b)
			ctx := b.Context()
			var total cost
			for i := 0; b.Loop(); i++ {
				name := fmt.Sprintf("batches/b%d", i)
				b.StopTimer()
				if _, err := d.Ingest(ctx, ev(name, lifecycle.Running, tRun, event.SourceWebhook)); err != nil {
					b.Fatal(err)
				}
				if path != "completion" {
					if _, err := d.Ingest(ctx, ev(name, lifecycle.Succeeded, tDone, event.SourceWebhook)); err != nil {
						b.Fatal(err)
					}
				}
				e := ev(name, lifecycle.Succeeded, tDone, event.SourceWebhook)
				if path == "stale" {
					e.State = lifecycle.Running
				}
				b.StartTimer()
				c := measure(b, s, func() {
					if _, err := d.Ingest(ctx, e); err != nil {
						b.Fatal(err)
					}
				})
				total.reads, total.writes, total.commits = total.reads+c.reads, total.writes+c.writes, total.commits+c.commits
			}
			n := float64(b.N)
			b.ReportMetric(float64(total.reads)/n, "reads/op")
			b.ReportMetric(float64(total.writes)/n, "writes/op")
			b.ReportMetric(float64(total.commits)/n, "commits/op")
		})
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkIngestLatency compares a completion through the door (read,
// fenced commit of operation + claim, publish to a no-op sink, DONE) with one
// bare read-modify-write Firestore transaction, on the same emulator in the
// same run. It reports p50/p99 of both and their ratio.
func BenchmarkIngestLatency(b *testing.B) {
	d, _, _ := costDoor(b)
	fs, _ := emutest.Firestore(b)
	ctx := b.Context()
	var door, bare []time.Duration
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("batches/lat%d", i)
		b.StopTimer()
		if _, err := d.Ingest(ctx, ev(name, lifecycle.Running, tRun, event.SourceWebhook)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if _, err := d.Ingest(ctx, ev(name, lifecycle.Succeeded, tDone, event.SourceWebhook)); err != nil {
			b.Fatal(err)
		}
		door = append(door, time.Since(start))
		ref := fs.Collection("bare").Doc(fmt.Sprint(i))
		start = time.Now()
		err := fs.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
			snap, err := tx.Get(ref)
			n := int64(0)
			if err == nil {
				n, _ = snap.Data()["n"].(int64)
			}
			return tx.Set(ref, map[string]any{"n": n + 1})
		})
		if err != nil {
			b.Fatal(err)
		}
		bare = append(bare, time.Since(start))
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(percentile(door, 0.5)), "ingest-p50-ms")
	b.ReportMetric(ms(percentile(door, 0.99)), "ingest-p99-ms")
	b.ReportMetric(ms(percentile(bare, 0.5)), "tx-p50-ms")
	b.ReportMetric(ms(percentile(bare, 0.99)), "tx-p99-ms")
	b.ReportMetric(ms(percentile(door, 0.5))/ms(percentile(bare, 0.5)), "p50-ratio")
	b.ReportMetric(ms(percentile(door, 0.99))/ms(percentile(bare, 0.99)), "p99-ratio")
}

// TestDuplicateCostWithDeliveryLog re-pins P1 with the delivery log on: a
// duplicate delivery through the real Webhook handler, whose answer is
// recorded in the operation's delivery log on the same Firestore database,
// still costs the ledger one read, no write and no commit. The log's own
// write is counted apart (one append to deliveries/{id}).
func TestDuplicateCostWithDeliveryLog(t *testing.T) {
	t.Parallel()
	d, s, c := costDoor(t)
	ctx := t.Context()
	rec := deliverylog.NewRecorder(s, deliverylog.Retention{}, logging.Discard())
	t.Cleanup(func() { _ = rec.Close(context.Background()) })
	secret := webhooktest.NewSecret()
	v, err := webhook.NewVerifier(webhook.Config{Secrets: []string{secret}, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.Webhook(d, v, logging.Discard(), 1<<20,
		httpapi.WithDeliveryLog(&deliverylog.Log{Recorder: rec}, c.Now)))
	t.Cleanup(srv.Close)
	const name = "batches/p1log"
	body := []byte(`{"type":"batch.succeeded","version":"v1","data":{"id":"` + name + `"}}`)
	send := func(id string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = webhooktest.Headers(id, c.Now(), body, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s answered %d", id, resp.StatusCode)
		}
	}
	send("msg_completion")
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	logWrites := s.Counts().DeliveryWrites.Load()
	duplicate := measure(t, s, func() {
		send("msg_duplicate")
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if duplicate != (cost{1, 0, 0}) {
		t.Errorf("duplicate with the delivery log: %d reads %d writes %d commits of the ledger, want 1/0/0",
			duplicate.reads, duplicate.writes, duplicate.commits)
	}
	if got := s.Counts().DeliveryWrites.Load() - logWrites; got != 1 {
		t.Errorf("the duplicate's log entry cost %d delivery-log writes, want 1", got)
	}
	id, err := opname.DocID(opname.KeyPrefix + name)
	if err != nil {
		t.Fatal(err)
	}
	log, err := s.ListDeliveries(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || log[0].DeliveryID != "msg_duplicate" || log[0].Outcome != "duplicate" || log[1].Outcome != "completed" {
		t.Errorf("delivery log = %+v, want the duplicate then the completion", log)
	}
}
