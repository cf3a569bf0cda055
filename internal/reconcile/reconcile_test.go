package reconcile_test

import (
	"context"
	"fmt"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/testutil"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/fsledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
)

// clock is the shared fake clock: time moves only when the test says so.
type clock = testutil.Clock

type world struct {
	t     testing.TB
	store ledger.Ledger
	// reads is the store's tally of billed reads (the cost benchmarks).
	reads  func() int64
	door   *ingest.Door
	fake   *fakegemini.Server
	rec    *reconcile.Reconciler
	sink   *testutil.Recorder
	clock  *clock
	logs   *testutil.SyncBuffer
	sleeps int
}

func newWorld(t testing.TB, adopt int) *world {
	t.Helper()
	s := testutil.MemLedger(t)
	return newWorldOn(t, adopt, s, func() int64 { r, _, _ := s.Counts().Snapshot(); return r })
}

// newWorldOn is newWorld on a given store; reads tallies its billed reads.
func newWorldOn(t testing.TB, adopt int, store ledger.Ledger, reads func() int64) *world {
	t.Helper()
	w := &world{t: t, store: store, reads: reads, sink: &testutil.Recorder{}, logs: &testutil.SyncBuffer{},
		clock: testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)), fake: fakegemini.New()}
	log := logging.New(w.logs, slog.LevelInfo, "")
	var err error
	if w.door, err = ingest.New(ingest.Config{Store: claims.New(w.store), Sink: w.sink, Log: log, Now: w.clock.Now, Grace: 90 * time.Second}); err != nil {
		t.Fatal(err)
	}
	srv := w.fake.Start(t)
	var mu sync.Mutex
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: srv.URL, HTTPClient: srv.Client(),
		Sleep: func(ctx context.Context, _ time.Duration) error { mu.Lock(); w.sleeps++; mu.Unlock(); return ctx.Err() }, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if w.rec, err = reconcile.New(reconcile.Config{Ledger: claims.New(w.store), Door: w.door, Gemini: f, Log: log, Now: w.clock.Now,
		StuckAfter: 6 * time.Hour, AdoptPageSize: adopt}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) register(name string)    { w.t.Helper(); mustRegister(w.t, w.door, name) }
func (w *world) pass() reconcile.Summary { w.t.Helper(); return mustPass(w.t, w.rec) }

// fakeFetcher is the Gemini fetcher (the real genai SDK) pointed at srv,
// whose retry waits end at once.
func fakeFetcher(t testing.TB, srv *httptest.Server, log *slog.Logger) *gemini.Fetcher {
	t.Helper()
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: srv.URL, HTTPClient: srv.Client(),
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// mustRegister registers name through the door, as POST /Register does.
func mustRegister(t testing.TB, door *ingest.Door, name string) {
	t.Helper()
	if _, err := door.Ingest(t.Context(), event.Event{Name: name, State: lifecycle.Pending, Source: event.SourceRegister}); err != nil {
		t.Fatal(err)
	}
}

// mustPass runs one reconcile pass, which must not fail.
func mustPass(t testing.TB, rec *reconcile.Reconciler) reconcile.Summary {
	t.Helper()
	s, err := rec.Pass(t.Context())
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	return s
}

func (w *world) op(name string) ledger.Operation {
	w.t.Helper()
	op, err := w.store.GetOperation(w.t.Context(), "gemini:"+strings.ReplaceAll(name, "/", "%2F"))
	if err != nil {
		w.t.Fatal(err)
	}
	return op
}

var tDone = time.Date(2026, 11, 21, 11, 59, 0, 0, time.UTC)

func succeeded(id string) fakegemini.BatchState {
	return fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: tDone, ResponsesFile: "files/out-" + id}
}

func TestDroppedWebhookIsRecovered(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 0)
	w.register("batches/lost")
	w.fake.SetBatch("lost", succeeded("lost"))
	if s := w.pass(); s.Checked != 0 {
		t.Fatalf("checked %d operations within the grace period", s.Checked)
	}
	w.clock.Advance(2 * time.Minute)
	s := w.pass()
	if s.Checked != 1 || s.Settled != 1 || s.StillPending != 0 || s.Errors != 0 {
		t.Fatalf("summary %+v", s)
	}
	op := w.op("batches/lost")
	if op.State != lifecycle.Succeeded || op.SettledBy != "reconcile" || !op.NextCheckAt.IsZero() {
		t.Fatalf("operation %s settled by %q next %v", op.State, op.SettledBy, op.NextCheckAt)
	}
	if n := w.sink.PerKey(); len(n) != 1 || n["gemini:batches/lost"] != 1 {
		t.Fatalf("messages %v", n)
	}
	if m := w.sink.All()[0]; m.SettledBy != "reconcile" || m.Output["responses_file"] != "files/out-lost" || !m.UpdateTime.Equal(tDone) {
		t.Fatalf("message %+v", m)
	}
	// Settled: later passes never ask Gemini about it again.
	calls := w.fake.Calls("/v1beta/batches/lost")
	w.clock.Advance(time.Hour)
	if s := w.pass(); s.Checked != 0 || w.fake.Calls("/v1beta/batches/lost") != calls {
		t.Fatalf("settled operation checked again: %+v", s)
	}
}

// TestStaleReconcileChangesNothing: the reconciler read RUNNING from Gemini,
// but the webhook settled the operation before the reconciler's answer
// reached the door.
func TestStaleReconcileChangesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 0)
	w.register("batches/stale")
	w.fake.SetBatch("stale", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: tDone.Add(-time.Minute)})
	w.clock.Advance(2 * time.Minute)
	webhookFirst := func(r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, "/batches/stale") {
			if _, err := w.door.Ingest(t.Context(), event.Event{Name: "stale", Kind: "batch", State: lifecycle.Succeeded,
				UpdateTime: tDone, Source: event.SourceWebhook}); err != nil {
				t.Errorf("webhook ingest: %v", err)
			}
		}
		return false // do not fail the request: answer the (stale) RUNNING
	}
	w.fake.FailNextMatching(webhookFirst, 0, 1)
	s := w.pass()
	if s.Checked != 1 || s.Settled != 0 || s.Errors != 0 {
		t.Fatalf("summary %+v", s)
	}
	op := w.op("batches/stale")
	if op.State != lifecycle.Succeeded || op.SettledBy != "webhook" {
		t.Fatalf("state %s settled by %s", op.State, op.SettledBy)
	}
	if n := w.sink.PerKey(); n["gemini:batches/stale"] != 1 {
		t.Fatalf("messages %v", n)
	}
	// And a settled operation with Gemini still saying RUNNING is never polled.
	w.clock.Advance(time.Hour)
	if s := w.pass(); s.Checked != 0 {
		t.Fatalf("settled operation polled: %+v", s)
	}
	if after := w.op("batches/stale"); after.Rev != op.Rev {
		t.Fatalf("a stale answer changed the operation: %+v → %+v", op.Rev, after.Rev)
	}
}

func TestWebhookAndReconcileRacingOnHundredOperations(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 0)
	const n = 100
	for i := range n {
		id := fmt.Sprintf("race-%03d", i)
		w.register("batches/" + id)
		w.fake.SetBatch(id, succeeded(id))
	}
	w.clock.Advance(2 * time.Minute)
	// A second door, as the webhook runs in another process.
	hook, err := ingest.New(ingest.Config{Store: claims.New(w.store), Sink: w.sink, Log: logging.Discard(), Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.pass() }()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := hook.Ingest(t.Context(), event.Event{Name: fmt.Sprintf("race-%03d", i), Kind: "batch",
				State: lifecycle.Succeeded, UpdateTime: tDone.Add(time.Second), Source: event.SourceWebhook}); err != nil {
				t.Errorf("webhook: %v", err)
			}
		}()
	}
	wg.Wait()
	w.pass() // anything the first pass skipped
	counts := w.sink.PerKey()
	if len(counts) != n {
		t.Fatalf("%d operations published, want %d", len(counts), n)
	}
	for k, c := range counts {
		if c != 1 {
			t.Errorf("%s published %d times", k, c)
		}
	}
}

func TestNotFoundIsRecordedNeverSettled(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 0)
	w.register("batches/ghost")
	w.clock.Advance(2 * time.Minute)
	s := w.pass()
	if s.Checked != 1 || s.StillPending != 1 || s.Settled != 0 {
		t.Fatalf("summary %+v", s)
	}
	op := w.op("batches/ghost")
	if op.State != lifecycle.Pending || op.LastCheck != "not-found" || op.Checks != 1 || !op.NextCheckAt.After(w.clock.Now()) {
		t.Fatalf("after 404: %+v", op)
	}
	if len(w.sink.PerKey()) != 0 {
		t.Fatal("a 404 published a completion")
	}
}

func TestRateLimitIsRetriedThenSettles(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 0)
	w.register("batches/busy")
	w.fake.SetBatch("busy", succeeded("busy"))
	w.fake.FailNext("/v1beta/batches/busy", http.StatusTooManyRequests, 2)
	w.clock.Advance(2 * time.Minute)
	s := w.pass()
	// Three GETs (two answered 429); the third's answer carries the
	// statistics of the now terminal batch too.
	if s.Settled != 1 || s.Errors != 0 || w.fake.Calls("/v1beta/batches/busy") != 3 || w.sleeps != 2 {
		t.Fatalf("summary %+v, %d calls, %d sleeps", s, w.fake.Calls("/v1beta/batches/busy"), w.sleeps)
	}
}

func TestServerErrorsNeverBecomeAState(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 0)
	w.register("batches/down")
	w.fake.SetBatch("down", succeeded("down"))
	w.fake.FailNext("/v1beta/batches/down", http.StatusServiceUnavailable, -1)
	w.clock.Advance(2 * time.Minute)
	s := w.pass()
	if s.Errors != 1 || s.Settled != 0 || s.StillPending != 1 {
		t.Fatalf("summary %+v", s)
	}
	op := w.op("batches/down")
	if op.State != lifecycle.Pending || op.LastCheck != "gemini-unavailable" || !op.NextCheckAt.After(w.clock.Now()) {
		t.Fatalf("after 5xx: %+v", op)
	}
	w.fake.ClearFaults()
	w.clock.Advance(time.Hour)
	if s := w.pass(); s.Settled != 1 {
		t.Fatalf("after recovery %+v", s)
	}
}

// TestStuckIsAlertedOnceAndStaysPending: both stuck operations are counted
// on every pass but alerted only on the first (the repetitions follow the
// schedule of TestStuckAlertSchedule), and neither is closed.
func TestStuckIsAlertedOnceAndStaysPending(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 0)
	w.register("batches/stuck")
	w.register("batches/young")
	w.fake.SetBatch("stuck", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: tDone})
	w.fake.SetBatch("young", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: tDone})
	w.clock.Advance(7 * time.Hour)
	w.register("batches/fresh") // registered late: not stuck
	for pass := 1; pass <= 2; pass++ {
		s := w.pass()
		if wantAlerts := 2 * (2 - pass); s.Stuck != 2 || s.StuckAlerts != wantAlerts {
			t.Fatalf("pass %d: stuck %d, alerts %d, want 2 and %d (%+v)", pass, s.Stuck, s.StuckAlerts, wantAlerts, s)
		}
		if got := w.logs.CountLines(`"alert":"stuck"`); got != 2 {
			t.Fatalf("after pass %d: %d alert lines, want 2", pass, got)
		}
	}
	if got := w.logs.CountLines(`"alert":"stuck","operation":"batches/stuck"`); got != 1 {
		t.Fatalf("alert lines for batches/stuck: %d, want 1", got)
	}
	if op := w.op("batches/stuck"); op.State.Terminal() {
		t.Fatalf("stuck operation closed: %s", op.State)
	}
}

func TestOrphanIsAdoptedAndSettled(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 50)
	w.fake.SetBatch("orphan", succeeded("orphan"))
	w.fake.SetBatch("orphan-running", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: tDone})
	s := w.pass()
	if s.Adopted != 2 || s.Settled != 1 {
		t.Fatalf("summary %+v", s)
	}
	if op := w.op("batches/orphan"); op.State != lifecycle.Succeeded || op.SettledBy != "reconcile" {
		t.Fatalf("orphan %+v", op)
	}
	if op := w.op("batches/orphan-running"); op.State != lifecycle.Running || op.NextCheckAt.IsZero() {
		t.Fatalf("running orphan %+v", op)
	}
	if s := w.pass(); s.Adopted != 0 {
		t.Fatalf("adopted again: %+v", s)
	}
	if n := w.sink.PerKey(); n["gemini:batches/orphan"] != 1 || len(n) != 1 {
		t.Fatalf("messages %v", n)
	}
}

// TestBackoffSchedule: 2 min doubling to a 1 h cap.
func TestBackoffSchedule(t *testing.T) {
	r, err := reconcile.New(reconcile.Config{Ledger: claims.New(fsledger.New(nil, nil)), Door: &ingest.Door{}, Log: logging.Discard(), Now: time.Now, StuckAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}
	for i, d := range want {
		if got := r.Backoff(i); got != d {
			t.Errorf("Backoff(%d) = %v, want %v", i, got, d)
		}
	}
}
