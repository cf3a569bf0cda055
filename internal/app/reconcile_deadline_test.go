package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestReconcileStopsWithinItsDeadline: Cloud Scheduler and Cloud Run cut a
// Reconcile request off from outside; nothing gives the pass a deadline of
// its own unless the handler derives one from LROSINK_RECONCILE_DEADLINE.
// Gemini answers every call in 150 ms, and 429 (with Retry-After, which the
// SDK adapter honours), 30 operations are due and stuck, and the caller
// gives up after 3 s. The pass must answer 200 within its 2.5 s budget, say
// it stopped early ("partial":true), and still have raised the stuck
// alerts, which are its last step.
func TestReconcileStopsWithinItsDeadline(t *testing.T) {
	fake := fakegemini.New()
	const ops = 30
	for i := range ops {
		fake.SetBatch(fmt.Sprintf("slow%02d", i), fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(150 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		fake.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	logs := &testutil.SyncBuffer{}
	clock := testutil.NewClock(now)
	cfg := testConfig(t, slow.URL, func(c *config.Config) {
		c.GeminiAPIKey, c.ReconcileDeadline = fakegemini.DefaultAPIKey, 2500*time.Millisecond
	})
	a := newApp(t, cfg, logs, io.Discard, clock.Now)
	srv := httptest.NewServer(a.Mux())
	t.Cleanup(srv.Close)
	for i := range ops {
		resp, err := http.Post(srv.URL+"/Register", "application/json",
			strings.NewReader(fmt.Sprintf(`{"name":"batches/slow%02d","kind":"batch"}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("register: %d", resp.StatusCode)
		}
	}
	clock.Advance(2 * time.Hour) // past grace (1 min) and StuckAfter (1 h)
	fake.FailNext("", http.StatusTooManyRequests, -1)

	// The caller's own deadline bounds a hang; it is not the assertion.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/Reconcile", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no answer before the caller gave up (3 s): %v; stuck alert lines: %d", err, logs.CountLines(`"alert":"stuck"`))
	}
	defer resp.Body.Close()
	var sum struct {
		Partial     *bool `json:"partial"`
		Stuck       int   `json:"stuck"`
		StuckAlerts int   `json:"stuck_alerts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&sum); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || sum.Partial == nil || !*sum.Partial {
		t.Fatalf("answer %d %+v, want 200 with \"partial\":true", resp.StatusCode, sum)
	}
	if n := logs.CountLines(`"alert":"stuck"`); sum.Stuck != ops || sum.StuckAlerts != ops || n != ops {
		t.Fatalf("stuck %d, stuck_alerts %d, %d alert lines; want %d each", sum.Stuck, sum.StuckAlerts, n, ops)
	}
}

// TestHealthPageShowsTheReconcileDeadline: the console's health page lists
// the pass budget with the rest of the configuration, and serve's pass
// interval, which the operation page's overdue hint refers to.
func TestHealthPageShowsTheReconcileDeadline(t *testing.T) {
	cfg := testConfig(t, "http://127.0.0.1:9", func(c *config.Config) {
		c.ReconcileDeadline, c.ReconcileEvery = 2*time.Minute, 45*time.Second
	})
	a := newApp(t, cfg, nil, io.Discard, func() time.Time { return now })
	w := httptest.NewRecorder()
	a.Mux().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ui/health", nil))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "LROSINK_RECONCILE_DEADLINE") || !strings.Contains(w.Body.String(), `<td class="mono">2m</td>`) {
		t.Fatalf("GET /ui/health: %d, no LROSINK_RECONCILE_DEADLINE 2m:\n%s", w.Code, w.Body.String())
	}
	if !strings.Contains(w.Body.String(), "LROSINK_RECONCILE_EVERY") || !strings.Contains(w.Body.String(), "45s (serve") {
		t.Fatalf("GET /ui/health: no LROSINK_RECONCILE_EVERY 45s:\n%s", w.Body.String())
	}
}
