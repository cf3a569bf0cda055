package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/metrics"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/shard"
)

type publisher struct{ err error }

func (p publisher) Publish(context.Context, results.Message) error { return p.err }

// TestPublishFailuresCounted: only refused publishes count.
func TestPublishFailuresCounted(t *testing.T) {
	m := metrics.New()
	ok, bad := m.Sink(publisher{}), m.Sink(publisher{err: errors.New("topic gone")})
	_ = ok.Publish(t.Context(), results.Message{})
	if err := bad.Publish(t.Context(), results.Message{}); err == nil {
		t.Fatal("the wrapper swallowed the error")
	}
	_ = bad.Publish(t.Context(), results.Message{})
	if n, err := testutil.GatherAndCount(m.Registry(), "lrosink_publish_failures_total"); err != nil || n != 1 {
		t.Fatalf("%d series, %v", n, err)
	}
	if got := gathered(t, m, "lrosink_publish_failures_total"); got != 2 {
		t.Fatalf("publish failures %v, want 2", got)
	}
}

// TestDecisionErrorsHaveBoundedReasons: a failed decision counts as outcome
// "error" with a reason class, never the error text.
func TestDecisionErrorsHaveBoundedReasons(t *testing.T) {
	m := metrics.New()
	m.ObserveDecision(event.SourceWebhook, ingest.Result{Outcome: ingest.OutcomeCompleted, Reason: "first-sighting"},
		fmt.Errorf("%w: publish batches/x: %w", ingest.ErrSideEffect, errors.New("boom")))
	m.ObserveDecision(event.SourceReconcile, ingest.Result{}, fmt.Errorf("%w: read: eof", ingest.ErrUnavailable))
	m.ObserveDecision(event.SourceWebhook, ingest.Result{Outcome: ingest.OutcomeDuplicate, Reason: "duplicate"}, nil)
	m.ObserveDecision(event.SourceWebhook, ingest.Result{},
		fmt.Errorf("%w: %w: operations/v1: 404", ingest.ErrNotConfirmed, ingest.ErrVideoModelUnknown))
	want := `
# HELP lrosink_ingest_decisions_total Decisions of the ingest door, as logged in "ingest decision" lines (outcome "error" when it failed).
# TYPE lrosink_ingest_decisions_total counter
lrosink_ingest_decisions_total{outcome="duplicate",reason="duplicate",source="webhook"} 1
lrosink_ingest_decisions_total{outcome="error",reason="ledger-unavailable",source="reconcile"} 1
lrosink_ingest_decisions_total{outcome="error",reason="side-effect-failed",source="webhook"} 1
lrosink_ingest_decisions_total{outcome="error",reason="video-model-unknown",source="webhook"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "lrosink_ingest_decisions_total"); err != nil {
		t.Fatal(err)
	}
}

// TestFailedPassLeavesGauges: a failed pass counts as "error" and does not
// overwrite the gauges with its partial summary.
func TestFailedPassLeavesGauges(t *testing.T) {
	m := metrics.New()
	m.ObservePass(time.Time{}, reconcile.Summary{StillPending: 4, Stuck: 2, Counted: reconcile.FigureStillPending | reconcile.FigureStuck}, nil)
	m.ObservePass(time.Time{}, reconcile.Summary{}, errors.New("reconcile: due operations: unavailable"))
	for name, want := range map[string]float64{"lrosink_operations_pending": 4, "lrosink_operations_stuck": 2} {
		if got := gathered(t, m, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	want := `
# HELP lrosink_reconcile_passes_total Reconcile passes by result: "ok", or "error" when the ledger could not be queried.
# TYPE lrosink_reconcile_passes_total counter
lrosink_reconcile_passes_total{result="error"} 1
lrosink_reconcile_passes_total{result="ok"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "lrosink_reconcile_passes_total"); err != nil {
		t.Fatal(err)
	}
}

type fetcher struct{ err error }

func (f fetcher) Fetch(context.Context, opname.Kind, string) (event.Event, error) {
	return event.Event{}, f.err
}

func (f fetcher) ListBatches(context.Context, int, string) ([]event.ListedBatch, string, error) {
	return nil, "", f.err
}

// TestGeminiCallsByResult: each fetch counts once by kind and result class.
func TestGeminiCallsByResult(t *testing.T) {
	m := metrics.New()
	ctx := t.Context()
	_, _ = m.Gemini(fetcher{}).Fetch(ctx, opname.KindVideo, "models/veo/operations/x")
	_, _ = m.Gemini(fetcher{err: fmt.Errorf("get: %w", gemini.ErrNotFound)}).Fetch(ctx, opname.KindBatch, "batches/x")
	_, _ = m.Gemini(fetcher{err: &gemini.TransientError{Err: errors.New("503")}}).Fetch(ctx, opname.KindInteraction, "interactions/x")
	_, _, _ = m.Gemini(fetcher{err: errors.New("401")}).ListBatches(ctx, 10, "")
	want := `
# HELP lrosink_gemini_calls_total Gemini API fetches by kind (batch, video, interaction, batch-list) and result (ok, not-found, unavailable, error).
# TYPE lrosink_gemini_calls_total counter
lrosink_gemini_calls_total{kind="batch",result="not-found"} 1
lrosink_gemini_calls_total{kind="batch-list",result="error"} 1
lrosink_gemini_calls_total{kind="interaction",result="unavailable"} 1
lrosink_gemini_calls_total{kind="video",result="ok"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "lrosink_gemini_calls_total"); err != nil {
		t.Fatal(err)
	}
}

// TestWebhookStatus: the status the client saw, 200 when nothing was
// written explicitly.
func TestWebhookStatus(t *testing.T) {
	m := metrics.New()
	for _, h := range []http.HandlerFunc{
		func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
		func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) },
		func(http.ResponseWriter, *http.Request) {},
	} {
		m.Webhook(h).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/Webhook", nil))
	}
	want := `
# HELP lrosink_webhook_requests_total Requests to the Webhook function by HTTP status answered.
# TYPE lrosink_webhook_requests_total counter
lrosink_webhook_requests_total{status="200"} 2
lrosink_webhook_requests_total{status="503"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "lrosink_webhook_requests_total"); err != nil {
		t.Fatal(err)
	}
}

// TestRegistriesAreSeparate: two Metrics never share counts.
func TestRegistriesAreSeparate(t *testing.T) {
	a, b := metrics.New(), metrics.New()
	_ = a.Sink(publisher{err: errors.New("x")}).Publish(t.Context(), results.Message{})
	if got := gathered(t, b, "lrosink_publish_failures_total"); got != 0 {
		t.Fatalf("the second registry counted %v", got)
	}
}

func gathered(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		total := 0.0
		for _, s := range f.GetMetric() {
			total += s.GetCounter().GetValue() + s.GetGauge().GetValue()
		}
		return total
	}
	t.Fatalf("%s not gathered", name)
	return 0
}

// TestLatenessGauges: the last successful pass's due backlog, oldest
// overdue age and due claims left are gauges, so falling behind can be
// graphed and alerted on.
func TestLatenessGauges(t *testing.T) {
	m := metrics.New()
	m.ObservePass(time.Time{}, reconcile.Summary{DueBacklog: 1200, OldestOverdueSeconds: 610, ClaimsDueAfter: 187,
		Counted: reconcile.FigureBacklog | reconcile.FigureClaimsLeft}, nil)
	for name, want := range map[string]float64{"lrosink_reconcile_due_backlog": 1200, "lrosink_reconcile_oldest_overdue_seconds": 610,
		"lrosink_reconcile_claims_due_after": 187} {
		if got := gathered(t, m, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

type checkpoints int64

func (c checkpoints) CheckpointFailures() int64 { return int64(c) }

// TestCheckpointFailuresCounted: the SQLite checkpointer's failures are
// read at each scrape.
func TestCheckpointFailuresCounted(t *testing.T) {
	m := metrics.New()
	m.CountCheckpointFailures(checkpoints(3))
	if got := gathered(t, m, "lrosink_sqlite_checkpoint_failures_total"); got != 3 {
		t.Errorf("lrosink_sqlite_checkpoint_failures_total = %v, want 3", got)
	}
}

// TestGaugesAbsentUntilCounted: a gauge lrosink has not established is not
// exported, rather than exported as a 0 that reads as a healthy ledger: the
// scrape-time counts before the store ever answered, and the figures a pass
// left uncounted (cut short, or polling nothing without a key), which also
// never overwrite a value a pass did count.
func TestGaugesAbsentUntilCounted(t *testing.T) {
	m := metrics.New()
	m.CountFrom(failingCounter{}, time.Now)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	scrape := func() string {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	body := scrape()
	for _, name := range []string{"lrosink_operations_pending ", "lrosink_operations_due ", "lrosink_operations_stuck ",
		"lrosink_reconcile_due_backlog ", "lrosink_reconcile_oldest_overdue_seconds ", "lrosink_reconcile_claims_due_after "} {
		if strings.Contains(body, "\n"+name) {
			t.Errorf("%s exported although never counted:\n%s", name, body)
		}
	}
	if !strings.Contains(body, "lrosink_ledger_count_errors_total 2") {
		t.Errorf("the failed counts are not counted:\n%s", body)
	}

	m.ObservePass(time.Time{}, reconcile.Summary{Stuck: 3, DueBacklog: 7, Counted: reconcile.FigureStuck | reconcile.FigureBacklog}, nil)
	m.ObservePass(time.Time{}, reconcile.Summary{Partial: true}, nil) // counted nothing
	for name, want := range map[string]float64{"lrosink_operations_stuck": 3, "lrosink_reconcile_due_backlog": 7} {
		if got := gathered(t, m, name); got != want {
			t.Errorf("%s = %v after a pass that counted nothing, want %v", name, got, want)
		}
	}
}

// failingCounter is a ledger whose counts always fail.
type failingCounter struct{}

func (failingCounter) CountPending(context.Context) (int64, error) {
	return 0, errors.New("firestore: count: connection refused")
}

func (failingCounter) CountDue(context.Context, shard.Range, time.Time) (int64, error) {
	return 0, errors.New("firestore: count: connection refused")
}
