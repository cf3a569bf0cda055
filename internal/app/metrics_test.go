package app_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestMetricsCountWhatHappened: after N signed completions, M duplicate
// deliveries and one badly signed delivery to the real mux, and one
// reconcile pass over a registered operation that Gemini reports running,
// GET /metrics shows exactly those counts.
func TestMetricsCountWhatHappened(t *testing.T) {
	const completions, duplicates = 3, 2
	clk := testutil.NewClock(now)
	fake := fakegemini.New(fakegemini.WithClock(clk.Now))
	fake.SetBatch("slow", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: now})
	secret := webhooktest.NewSecret()
	var stdout testutil.SyncBuffer
	cfg := testConfig(t, fake.Start(t).URL, func(c *config.Config) {
		c.WebhookSecrets, c.GeminiAPIKey = []string{secret}, fakegemini.DefaultAPIKey
	})
	a := newApp(t, cfg, nil, &stdout, clk.Now)
	srv := httptest.NewServer(a.Mux())
	t.Cleanup(srv.Close)

	deliver := func(n int, op string, secret string) int {
		t.Helper()
		body := []byte(`{"type":"batch.succeeded","version":"v1","data":{"id":"batches/` + op + `"}}`)
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/Webhook", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = webhooktest.Headers(fmt.Sprintf("msg_%d", n), clk.Now(), body, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	n := 0
	for i := range completions {
		n++
		if code := deliver(n, fmt.Sprintf("done-%d", i), secret); code != http.StatusOK {
			t.Fatalf("completion %d answered %d", i, code)
		}
	}
	for range duplicates {
		n++
		if code := deliver(n, "done-0", secret); code != http.StatusOK {
			t.Fatalf("duplicate answered %d", code)
		}
	}
	if code := deliver(n+1, "done-1", webhooktest.NewSecret()); code != http.StatusUnauthorized {
		t.Fatalf("badly signed delivery answered %d", code)
	}
	if got := strings.Count(stdout.String(), "\n"); got != completions {
		t.Fatalf("%d results lines, want %d", got, completions)
	}

	// One registered operation, running at Gemini, overdue and stuck.
	post := func(path, body string) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 300 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s answered %d %s", path, resp.StatusCode, b)
		}
	}
	post("/Register", `{"name":"batches/slow","kind":"batch"}`)
	clk.Advance(2 * time.Hour)
	post("/Reconcile", ``)

	fams := scrape(t, srv.URL+"/metrics")
	for _, c := range []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"lrosink_ingest_decisions_total", map[string]string{"outcome": "completed", "source": "webhook"}, completions},
		{"lrosink_ingest_decisions_total", map[string]string{"outcome": "duplicate", "source": "webhook"}, duplicates},
		{"lrosink_ingest_decisions_total", map[string]string{"source": "webhook"}, completions + duplicates},
		{"lrosink_ingest_decisions_total", map[string]string{"outcome": "applied", "reason": "first-sighting", "source": "register"}, 1},
		// The check applies Gemini's RUNNING; the adoption listing sees the
		// batch again and the door drops it.
		{"lrosink_ingest_decisions_total", map[string]string{"outcome": "applied", "reason": "higher-rank", "source": "reconcile"}, 1},
		{"lrosink_ingest_decisions_total", map[string]string{"outcome": "dropped", "source": "reconcile"}, 1},
		{"lrosink_webhook_requests_total", map[string]string{"status": "200"}, completions + duplicates},
		{"lrosink_webhook_requests_total", map[string]string{"status": "401"}, 1},
		{"lrosink_webhook_requests_total", nil, completions + duplicates + 1},
		{"lrosink_webhook_duration_seconds", nil, completions + duplicates + 1}, // sample count
		{"lrosink_publish_failures_total", nil, 0},
		{"lrosink_reconcile_passes_total", map[string]string{"result": "ok"}, 1},
		{"lrosink_reconcile_passes_total", nil, 1},
		{"lrosink_gemini_calls_total", map[string]string{"kind": "batch", "result": "ok"}, 1},
		{"lrosink_gemini_calls_total", map[string]string{"kind": "batch-list", "result": "ok"}, 1},
		{"lrosink_gemini_calls_total", nil, 2},
		{"lrosink_operations_pending", nil, 1},
		{"lrosink_operations_stuck", nil, 1},
	} {
		if got := sum(t, fams, c.metric, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.metric, c.labels, got, c.want)
		}
	}
}

// scrape GETs a Prometheus text exposition and parses it.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	return fams
}

// sum adds the values of metric's series whose labels include want: counter
// and gauge values, a histogram's sample count. A metric that is absent
// sums to 0 only if it is a labelled family with no series yet; an absent
// unlabelled metric fails the test.
func sum(t *testing.T, fams map[string]*dto.MetricFamily, metric string, want map[string]string) float64 {
	t.Helper()
	f, ok := fams[metric]
	if !ok {
		if want == nil {
			t.Errorf("%s is not exposed", metric)
		}
		return 0
	}
	total := 0.0
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}
