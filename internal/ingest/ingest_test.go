package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/testutil"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/fsledger"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/results"
)

// clock is the shared fake clock: time moves only when the test says so.
type clock = testutil.Clock

func newClock() *clock { return testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)) }

// env is one isolated world: a memory ledger, a results sink that keeps
// everything published, and a clock. (The Pub/Sub sink's own attributes and
// ordering key are tested in internal/sink, on the emulator.)
type env struct {
	t       *testing.T
	store   *memledger.Store
	results *testutil.Recorder
	clock   *clock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{t: t, store: testutil.MemLedger(t), results: &testutil.Recorder{}, clock: newClock()}
}

func (e *env) door(s ingest.Sink) *ingest.Door {
	e.t.Helper()
	if s == nil {
		s = e.results
	}
	d, err := ingest.New(ingest.Config{Store: claims.New(e.store), Sink: s, Log: logging.Discard(), Now: e.clock.Now,
		Lease: 10 * time.Minute, Grace: 90 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// received returns everything published so far, in publish order.
func (e *env) received() []results.Message {
	e.t.Helper()
	return e.results.All()
}

func perKey(msgs []results.Message) map[string]int {
	n := map[string]int{}
	for _, m := range msgs {
		n[m.IdempotencyKey]++
	}
	return n
}

func ev(name string, st lifecycle.State, t time.Time, src event.Source) event.Event {
	return event.Event{Name: name, State: st, UpdateTime: t, Source: src}
}

var (
	tRun  = time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC)
	tDone = time.Date(2026, 11, 21, 11, 30, 0, 0, time.UTC)
)

func mustIngest(t *testing.T, d *ingest.Door, e event.Event) ingest.Result {
	t.Helper()
	r, err := d.Ingest(t.Context(), e)
	if err != nil {
		t.Fatalf("ingest %+v: %v", e, err)
	}
	return r
}

func mustOp(t *testing.T, s ledger.Reads, id string) ledger.Operation {
	t.Helper()
	op, err := s.GetOperation(t.Context(), id)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return op
}

func mustClaim(t *testing.T, s ledger.Reads, id string) ledger.Claim {
	t.Helper()
	c, err := s.GetClaim(t.Context(), id)
	if err != nil {
		t.Fatalf("read claim %s: %v", id, err)
	}
	return c
}

func TestLateRunningAfterSucceededChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.door(nil)
	mustIngest(t, d, ev("batches/late", lifecycle.Running, tRun, event.SourceWebhook))
	r := mustIngest(t, d, ev("batches/late", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if r.Outcome != ingest.OutcomeCompleted || !r.Published {
		t.Fatalf("completion result %+v", r)
	}
	before := mustOp(t, e.store, "gemini:batches%2Flate")
	r = mustIngest(t, d, ev("batches/late", lifecycle.Running, tDone.Add(time.Hour), event.SourceReconcile))
	if r.Outcome != ingest.OutcomeDropped || r.Reason != string(lifecycle.ReasonRegressFromTerminal) || r.Published {
		t.Fatalf("late RUNNING result %+v", r)
	}
	after := mustOp(t, e.store, "gemini:batches%2Flate")
	if after.Rev != before.Rev || after.State != lifecycle.Succeeded {
		t.Fatalf("late RUNNING changed the operation: %+v → %+v", before.Rev, after.Rev)
	}
	if n := perKey(e.received()); len(n) != 1 || n["gemini:batches/late"] != 1 {
		t.Fatalf("messages per key %v, want exactly one for batches/late", n)
	}
}

func TestSucceededFiveTimesPublishesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.door(nil)
	outcomes := map[ingest.Outcome]int{}
	for range 5 {
		r := mustIngest(t, d, event.Event{Name: "batch_5x", Kind: "batch", State: lifecycle.Succeeded, UpdateTime: tDone,
			Source: event.SourceWebhook, Output: map[string]any{"output_file_uri": "gs://b/out.jsonl"},
			UserMetadata: map[string]any{"job": "j5"}})
		outcomes[r.Outcome]++
	}
	if outcomes[ingest.OutcomeCompleted] != 1 || outcomes[ingest.OutcomeDuplicate] != 4 {
		t.Fatalf("outcomes %v, want 1 completed + 4 duplicates", outcomes)
	}
	msgs := e.received()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1: %+v", len(msgs), msgs)
	}
	m := msgs[0]
	if m.Operation != "batches/batch_5x" || m.Kind != "batch" || m.State != "SUCCEEDED" || m.SettledBy != "webhook" ||
		m.IdempotencyKey != "gemini:batches/batch_5x" || !m.UpdateTime.Equal(tDone) || m.Output["output_file_uri"] != "gs://b/out.jsonl" ||
		m.UserMetadata["job"] != "j5" || m.Error != nil {
		t.Fatalf("message %+v", m)
	}
	if c := mustClaim(t, e.store, "gemini:batches%2Fbatch_5x"); c.Status != ledger.ClaimDone || c.Attempts != 1 {
		t.Fatalf("claim %+v", c)
	}
}

func TestFailedAfterSucceededRecordsConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.door(nil)
	mustIngest(t, d, ev("batches/conf", lifecycle.Succeeded, tDone, event.SourceWebhook))
	r := mustIngest(t, d, ev("batches/conf", lifecycle.Failed, tDone.Add(time.Minute), event.SourceReconcile))
	if r.Outcome != ingest.OutcomeConflict || r.Reason != string(lifecycle.ReasonTerminalConflict) || r.State != lifecycle.Succeeded {
		t.Fatalf("conflict result %+v", r)
	}
	// The same conflict again costs no write.
	before := mustOp(t, e.store, "gemini:batches%2Fconf")
	r = mustIngest(t, d, ev("batches/conf", lifecycle.Failed, tDone.Add(time.Minute), event.SourceReconcile))
	if r.Outcome != ingest.OutcomeDuplicate {
		t.Fatalf("repeated conflict result %+v", r)
	}
	op := mustOp(t, e.store, "gemini:batches%2Fconf")
	if op.Rev != before.Rev || op.State != lifecycle.Succeeded || len(op.Conflicts) != 1 || op.Conflicts[0].State != lifecycle.Failed {
		t.Fatalf("operation after conflicts: state %s conflicts %+v", op.State, op.Conflicts)
	}
	msgs := e.received()
	if len(msgs) != 1 || msgs[0].State != "SUCCEEDED" {
		t.Fatalf("messages %+v, want one SUCCEEDED", msgs)
	}
}

func TestSixteenConcurrentDeliveriesPublishOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.door(nil)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := d.Ingest(t.Context(), ev("batches/burst", lifecycle.Succeeded, tDone, event.SourceWebhook))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a concurrent delivery failed: %v", err)
		}
	}
	if n := perKey(e.received()); n["gemini:batches/burst"] != 1 || len(n) != 1 {
		t.Fatalf("messages per key %v, want exactly 1", n)
	}
}

// TestTwoPathsTwoHundredOperations feeds every operation from two doors at
// once (two processes: the webhook and the reconciler), with different server
// times and sources, so nothing is coalesced in memory: only the store's
// fencing keeps it to one message each.
func TestTwoPathsTwoHundredOperations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	webhook, reconcile := e.door(nil), e.door(nil)
	const ops = 200
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var failures atomic.Int64
	for i := range ops {
		for _, p := range []struct {
			d   *ingest.Door
			src event.Source
			at  time.Time
		}{{webhook, event.SourceWebhook, tDone}, {reconcile, event.SourceReconcile, tDone.Add(-time.Second)}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				if _, err := p.d.Ingest(t.Context(), ev(fmt.Sprintf("batches/two-%03d", i), lifecycle.Succeeded, p.at, p.src)); err != nil {
					failures.Add(1)
					t.Errorf("ingest two-%03d from %s: %v", i, p.src, err)
				}
			}()
		}
	}
	wg.Wait()
	n := perKey(e.received())
	if len(n) != ops {
		t.Fatalf("%d operations published, want %d", len(n), ops)
	}
	for k, c := range n {
		if c != 1 {
			t.Errorf("%s published %d times, want 1", k, c)
		}
	}
}

// flakySink fails its first n publishes: a real Pub/Sub cannot be made to
// fail on demand for one message, so the fault is injected around it.
type flakySink struct {
	inner ingest.Sink
	fail  atomic.Int64
	calls atomic.Int64
}

func (f *flakySink) Publish(ctx context.Context, m results.Message) error {
	f.calls.Add(1)
	if f.fail.Add(-1) >= 0 {
		return errors.New("injected publish failure")
	}
	return f.inner.Publish(ctx, m)
}

func TestPublishFailureReleasesClaimAndNextDeliveryPublishesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fs := &flakySink{inner: e.results}
	fs.fail.Store(1)
	d := e.door(fs)
	_, err := d.Ingest(t.Context(), ev("batches/flaky", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if !errors.Is(err, ingest.ErrSideEffect) {
		t.Fatalf("ingest with a failing publish = %v, want ErrSideEffect", err)
	}
	id := "gemini:batches%2Fflaky"
	if c := mustClaim(t, e.store, id); c.Status != ledger.ClaimReleased {
		t.Fatalf("claim after failed publish %+v, want RELEASED", c)
	}
	if op := mustOp(t, e.store, id); op.State != lifecycle.Succeeded || !op.Effect.Owed(e.clock.Now()) {
		t.Fatalf("operation after failed publish: %s %+v", op.State, op.Effect)
	}
	// Gemini redelivers at once: no lease to wait out.
	r := mustIngest(t, d, ev("batches/flaky", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if r.Outcome != ingest.OutcomeRecovered || !r.Published {
		t.Fatalf("redelivery result %+v", r)
	}
	r = mustIngest(t, d, ev("batches/flaky", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if r.Outcome != ingest.OutcomeDuplicate || r.Published {
		t.Fatalf("third delivery result %+v", r)
	}
	if c := mustClaim(t, e.store, id); c.Status != ledger.ClaimDone || c.Attempts != 2 {
		t.Fatalf("claim %+v, want DONE after 2 attempts", c)
	}
	if n := perKey(e.received()); n["gemini:batches/flaky"] != 1 {
		t.Fatalf("messages per key %v, want exactly 1", n)
	}
}

// stuckSink models a holder that crashed mid side effect: the first publish
// never returns until the test lets it go (long after its lease).
type stuckSink struct {
	inner   ingest.Sink
	entered chan struct{}
	release chan struct{}
	first   atomic.Bool
}

func (s *stuckSink) Publish(ctx context.Context, m results.Message) error {
	if s.first.CompareAndSwap(false, true) {
		close(s.entered)
		<-s.release
	}
	return s.inner.Publish(ctx, m)
}

func TestCrashedHolderIsSeizedAndFencedOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stuck := &stuckSink{inner: e.results, entered: make(chan struct{}), release: make(chan struct{})}
	oldHolder, newHolder := e.door(stuck), e.door(nil)
	id := "gemini:batches%2Fcrash"
	done := make(chan error, 1)
	go func() {
		_, err := oldHolder.Ingest(t.Context(), ev("batches/crash", lifecycle.Succeeded, tDone, event.SourceWebhook))
		done <- err
	}()
	<-stuck.entered
	first := mustClaim(t, e.store, id)

	// Within the lease a redelivery leaves the live holder alone.
	r := mustIngest(t, newHolder, ev("batches/crash", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if r.Published || (r.Outcome != ingest.OutcomeDuplicate && r.Outcome != ingest.OutcomeInProgress) {
		t.Fatalf("delivery within the lease %+v", r)
	}
	if got := e.store; got != nil {
		if c := mustClaim(t, got, id); c.Holder != first.Holder {
			t.Fatalf("claim changed hands within the lease")
		}
	}

	e.clock.Advance(11 * time.Minute) // the lease runs out
	r = mustIngest(t, newHolder, ev("batches/crash", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if r.Outcome != ingest.OutcomeRecovered || !r.Published || r.Reason != "lease-expired" {
		t.Fatalf("delivery after the lease %+v", r)
	}
	seized := mustClaim(t, e.store, id)
	if seized.Holder == first.Holder || seized.Status != ledger.ClaimDone || seized.Attempts != 2 {
		t.Fatalf("claim after seizure %+v (first holder %s)", seized, first.Holder)
	}

	close(stuck.release) // the old holder wakes up and tries to commit DONE
	if err := <-done; err != nil {
		t.Fatalf("old holder: %v", err)
	}
	final := mustClaim(t, e.store, id)
	if final.Holder != seized.Holder || final.Status != ledger.ClaimDone || !final.DoneAt.Equal(seized.DoneAt) {
		t.Fatalf("the old holder's late DONE was not rejected: %+v vs %+v", final, seized)
	}
	// Both holders published (the documented crash window), with one key.
	msgs := e.received()
	if len(msgs) != 2 || msgs[0].IdempotencyKey != msgs[1].IdempotencyKey {
		t.Fatalf("messages %+v, want 2 with the same idempotency key", msgs)
	}
}

func TestLedgerUnavailableIsAnError(t *testing.T) {
	t.Parallel()
	// A client whose every call goes to a port nobody listens on.
	conn, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := firestore.NewClient(t.Context(), "unreachable", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	published := &countingSink{}
	d, err := ingest.New(ingest.Config{Store: claims.New(fsledger.New(fs, nil)), Sink: published, Log: logging.Discard(), Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []lifecycle.State{lifecycle.Pending, lifecycle.Succeeded} {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		r, err := d.Ingest(ctx, ev("batches/nowhere", st, tDone, event.SourceWebhook))
		cancel()
		if err == nil {
			t.Fatalf("ingest %s with the ledger unreachable succeeded: %+v", st, r)
		}
		var inv *event.InvalidError
		if errors.As(err, &inv) {
			t.Fatalf("unavailability reported as invalid input: %v", err)
		}
		if r.Published || r.Outcome != "" {
			t.Fatalf("result reports something done: %+v", r)
		}
	}
	if published.n.Load() != 0 {
		t.Fatalf("%d messages published without a ledger", published.n.Load())
	}
}

type countingSink struct{ n atomic.Int64 }

func (c *countingSink) Publish(context.Context, results.Message) error { c.n.Add(1); return nil }

func TestInvalidNameIsRejectedAndNothingStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.door(nil)
	for _, name := range []string{"", "   ", "files/abc", "batches/../x", "batches/a b", "bare-id-without-kind"} {
		_, err := d.Ingest(t.Context(), ev(name, lifecycle.Succeeded, tDone, event.SourceWebhook))
		var inv *event.InvalidError
		if !errors.As(err, &inv) || inv.Reason != event.ReasonInvalidName {
			t.Errorf("name %q: error %v, want an invalid-name InvalidError", name, err)
		}
	}
	if r, w, c := e.store.Counts().Snapshot(); r != 0 || w != 0 || c != 0 {
		t.Fatalf("invalid names touched the ledger: %d reads %d writes %d commits", r, w, c)
	}
}

// TestBurstIsCoalesced: sixteen identical deliveries at once cost one
// operation commit and one DONE, not sixteen contending commits.
func TestBurstIsCoalesced(t *testing.T) {
	t.Parallel()
	d, s, _ := costDoor(t)
	c := measure(t, s, func() {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := d.Ingest(t.Context(), ev("batches/coalesce", lifecycle.Succeeded, tDone, event.SourceWebhook)); err != nil {
					t.Errorf("ingest: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
	})
	if c.commits != 2 || c.writes != 4 {
		t.Fatalf("burst cost %d commits / %d writes, want 2 / 4 (one settle commit + DONE with its mirror)", c.commits, c.writes)
	}
}

// TestEveryDecisionLogsOneLine checks the structured decision lines that
// log-based metrics count.
func TestEveryDecisionLogsOneLine(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	d, err := ingest.New(ingest.Config{Store: claims.New(testutil.MemLedger(t)), Sink: &countingSink{}, Log: logging.New(&buf, slog.LevelInfo, "p"), Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ outcome, reason string }{
		{"applied", "first-sighting"}, {"completed", "higher-rank"}, {"duplicate", "duplicate"},
		{"dropped", "regress-from-terminal"}, {"conflict-recorded", "terminal-conflict"},
	}
	for _, e := range []event.Event{
		ev("batches/logs", lifecycle.Pending, time.Time{}, event.SourceRegister),
		ev("batches/logs", lifecycle.Succeeded, tDone, event.SourceWebhook),
		ev("batches/logs", lifecycle.Succeeded, tDone, event.SourceWebhook),
		ev("batches/logs", lifecycle.Running, tRun, event.SourceReconcile),
		ev("batches/logs", lifecycle.Failed, tDone, event.SourceReconcile),
	} {
		mustIngest(t, d, e)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d log lines for %d decisions:\n%s", len(lines), len(want), buf.String())
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d is not JSON: %s", i, l)
		}
		if m["message"] != "ingest decision" || m["severity"] != "INFO" || m["outcome"] != want[i].outcome ||
			m["reason"] != want[i].reason || m["operation"] != "batches/logs" {
			t.Errorf("line %d = %s, want outcome %s reason %s", i, l, want[i].outcome, want[i].reason)
		}
	}
}

type syncBuffer = testutil.SyncBuffer

// TestSettlingOutputIsTheFinalOne: an interaction polled while it waited for
// a function result already had output_text (the model's words before the
// call); the completed interaction's final output_text must be what its
// message carries. The output merge kept stored keys, so the stale text was
// published and the final answer dropped. Keys the settling event lacks
// stay; once settled, later events change nothing (first finalize wins).
func TestSettlingOutputIsTheFinalOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.door(nil)
	t0 := time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC)
	mustIngest(t, d, event.Event{Name: "interactions/chat1", State: lifecycle.RequiresAction, GeminiStatus: "requires_action",
		UpdateTime: t0, Source: event.SourceReconcile, Output: map[string]any{"output_text": "Let me look up the weather.", "step": "call"}})
	mustIngest(t, d, event.Event{Name: "interactions/chat1", State: lifecycle.Succeeded, GeminiStatus: "completed",
		UpdateTime: t0.Add(time.Minute), Source: event.SourceReconcile, Output: map[string]any{"output_text": "It is 21°C and sunny in Paris."}})
	mustIngest(t, d, event.Event{Name: "interactions/chat1", State: lifecycle.Succeeded, GeminiStatus: "completed",
		UpdateTime: t0.Add(2 * time.Minute), Source: event.SourceReconcile, Output: map[string]any{"output_text": "a later echo"}})
	msgs := e.received()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	if got := msgs[0].Output; got["output_text"] != "It is 21°C and sunny in Paris." || got["step"] != "call" {
		t.Fatalf("published output %v, want the settling event's output_text and the earlier key it lacks", got)
	}
}
