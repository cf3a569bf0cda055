package ingest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/testutil"
)

// lateSink's first publish hangs for two seconds and then delivers anyway,
// unless its context ends first (as the file sinks' do: a line not yet
// written when the context ends is not written); later publishes deliver
// at once.
type lateSink struct {
	rec  *testutil.Recorder
	mu   sync.Mutex
	seen int
}

func (s *lateSink) Publish(ctx context.Context, m results.Message) error {
	s.mu.Lock()
	s.seen++
	first := s.seen == 1
	s.mu.Unlock()
	if first {
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.rec.Publish(ctx, m)
}

// TestPublishEndsWithinTheLease: a holder's publish may not outlive its
// lease, or a second holder that seized the claim after the lease publishes
// too and the message goes out twice without any crash. Before, the door
// bounded a publish only by its own 60 s timeout: with the lease (300 ms
// here, real time) run out while the first publish hung, a reconcile retry
// seized the claim and published, then the first publish delivered: two
// messages.
func TestPublishEndsWithinTheLease(t *testing.T) {
	t.Parallel()
	rec := &testutil.Recorder{}
	d, err := ingest.New(ingest.Config{Store: claims.New(testutil.MemLedger(t)), Sink: &lateSink{rec: rec}, Log: logging.Discard(),
		Now: time.Now, Lease: 300 * time.Millisecond, Grace: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := d.Ingest(context.WithoutCancel(t.Context()), event.Event{Name: "batches/lease1", State: lifecycle.Succeeded,
			GeminiStatus: "batch.succeeded", UpdateTime: time.Now(), Source: event.SourceWebhook})
		first <- err
	}()
	time.Sleep(500 * time.Millisecond) // past the lease
	if _, err := d.RetryClaim(t.Context(), "gemini:batches%2Flease1"); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if err := <-first; err == nil {
		t.Fatal("the first holder's publish outlived its lease and succeeded")
	}
	time.Sleep(2 * time.Second) // what a late first publish would have needed
	if n := len(rec.All()); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
}

// slowSuccessSink publishes successfully but only once the publish's context has
// ended: a publish that returns just after the door's work Timeout.
type slowSuccessSink struct{ inner ingest.Sink }

func (s slowSuccessSink) Publish(ctx context.Context, m results.Message) error {
	<-ctx.Done()
	return s.inner.Publish(context.WithoutCancel(ctx), m)
}

// TestDoneAfterALatePublish: a publish that succeeds as the door's work
// Timeout runs out is still committed DONE, on every store. (The Timeout
// leaves the read and the commit before the publish ample time, also on a
// loaded emulator: the publish alone waits it out.) DONE once ran on
// the expired work context: the SQLite writer refused it unqueued, the
// webhook was answered 503 although the message was out, and the claim,
// left CLAIMED, was published again after its lease.
func TestDoneAfterALatePublish(t *testing.T) {
	t.Parallel()
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		t.Parallel()
		rec := &testutil.Recorder{}
		d, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: slowSuccessSink{inner: rec}, Log: logging.Discard(),
			Now: newClock().Now, Timeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		res, err := d.Ingest(t.Context(), ev("batches/late-publish", lifecycle.Succeeded, tDone, event.SourceWebhook))
		if err != nil || !res.Published {
			t.Fatalf("ingest = %+v, %v; want published and no error", res, err)
		}
		if c := mustClaim(t, s, "gemini:batches%2Flate-publish"); c.Status != ledger.ClaimDone {
			t.Fatalf("claim %s after a publish that succeeded, want DONE", c.Status)
		}
		if n := len(rec.All()); n != 1 {
			t.Fatalf("%d messages, want 1", n)
		}
	})
}
