package httpapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/testutil"
)

// reconcileRig is a real reconciler over a memory ledger, polling the fake
// Gemini through the real genai SDK, and the Reconcile function on top.
type reconcileRig struct {
	door *ingest.Door
	fake *fakegemini.Server
	rec  *reconcile.Reconciler
	h    http.Handler
}

// newReconcileRig registers nothing; the reconciler's clock runs
// afterGrace past the door's, so what the door registers is due at once.
func newReconcileRig(t *testing.T, log *slog.Logger) *reconcileRig {
	t.Helper()
	const afterGrace = 2 * time.Minute
	store := testutil.MemLedger(t)
	r := &reconcileRig{fake: fakegemini.New()}
	var err error
	if r.door, err = ingest.New(ingest.Config{Store: claims.New(store), Sink: &testutil.Recorder{}, Log: log,
		Now: func() time.Time { return now }, Grace: 90 * time.Second}); err != nil {
		t.Fatal(err)
	}
	srv := r.fake.Start(t)
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: srv.URL, HTTPClient: srv.Client(),
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(reconcile.Config{Ledger: claims.New(store), Door: r.door, Gemini: f, Log: log,
		Now: func() time.Time { return now.Add(afterGrace) }, StuckAfter: 6 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r.rec = rec
	r.h = httpapi.Reconcile(rec, log, 0, nil)
	return r
}

// TestReconcileAnswersSummary: POST runs a pass and answers its summary;
// any other method is 405.
func TestReconcileAnswersSummary(t *testing.T) {
	t.Parallel()
	r := newReconcileRig(t, logging.Discard())
	if _, err := r.door.Ingest(t.Context(), event.Event{Name: "batches/h", State: lifecycle.Pending, Source: event.SourceRegister}); err != nil {
		t.Fatal(err)
	}
	r.fake.SetBatch("h", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: now, ResponsesFile: "files/out-h"})
	rr := httptest.NewRecorder()
	r.h.ServeHTTP(rr, httptest.NewRequest(http.MethodPost, "/Reconcile", nil))
	var s map[string]any
	if err := json.Unmarshal(rr.Body.Bytes(), &s); err != nil || rr.Code != 200 {
		t.Fatalf("%d %s", rr.Code, rr.Body.String())
	}
	for _, k := range []string{"checked", "settled", "still_pending", "claims_retried", "stuck", "stuck_alerts", "errors", "adopted", "webhooks_disabled", "partial"} {
		if _, ok := s[k]; !ok {
			t.Errorf("summary lacks %q: %s", k, rr.Body.String())
		}
	}
	if s["settled"] != float64(1) || s["partial"] != false {
		t.Fatalf("summary %v", s)
	}
	rr = httptest.NewRecorder()
	r.h.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/Reconcile", nil))
	if rr.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", rr.Code)
	}
}

// TestReconcileLedgerDownIs503: a pass that cannot query the ledger (here
// the memory ledger refuses a request whose context has ended) is answered
// 503 with Retry-After and the summary of what it did, and logged.
func TestReconcileLedgerDownIs503(t *testing.T) {
	t.Parallel()
	logs := &testutil.SyncBuffer{}
	r := newReconcileRig(t, logging.New(logs, slog.LevelInfo, ""))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rr := httptest.NewRecorder()
	r.h.ServeHTTP(rr, httptest.NewRequest(http.MethodPost, "/Reconcile", nil).WithContext(ctx))
	var s reconcile.Summary
	if err := json.Unmarshal(rr.Body.Bytes(), &s); err != nil || rr.Code != http.StatusServiceUnavailable {
		t.Fatalf("%d %s (%v)", rr.Code, rr.Body.String(), err)
	}
	if got := rr.Header().Get("Retry-After"); got != "30" {
		t.Errorf("Retry-After %q, want 30", got)
	}
	if logs.CountLines("reconcile pass failed") != 1 {
		t.Errorf("the failed pass was not logged once:\n%s", logs.String())
	}
}

// TestReconcileStoppedIsPartial: a pass ended by the process's stop is
// partial, not failed: 200 "partial":true, the operation still pending and
// nothing logged as failed, where the same pass ended by its caller
// hanging up (TestReconcileLedgerDownIs503) is a 503.
func TestReconcileStoppedIsPartial(t *testing.T) {
	t.Parallel()
	logs := &testutil.SyncBuffer{}
	log := logging.New(logs, slog.LevelInfo, "")
	r := newReconcileRig(t, log)
	if _, err := r.door.Ingest(t.Context(), event.Event{Name: "batches/s", State: lifecycle.Pending, Source: event.SourceRegister}); err != nil {
		t.Fatal(err)
	}
	r.fake.SetBatch("s", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: now, ResponsesFile: "files/out-s"})
	stopping, stop := context.WithCancel(t.Context())
	stop() // the process is stopping: the pass ends at once
	h := httpapi.Reconcile(r.rec, log, time.Hour, stopping)
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest(http.MethodPost, "/Reconcile", nil))
	var s reconcile.Summary
	if err := json.Unmarshal(rr.Body.Bytes(), &s); err != nil || rr.Code != http.StatusOK {
		t.Fatalf("%d %s (%v), want 200", rr.Code, rr.Body.String(), err)
	}
	if !s.Partial || s.Settled != 0 {
		t.Fatalf("summary %+v, want partial and nothing settled", s)
	}
	if logs.CountLines("reconcile pass failed") != 0 {
		t.Errorf("a stopped pass was logged as failed:\n%s", logs.String())
	}
}
