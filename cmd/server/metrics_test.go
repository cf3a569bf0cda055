package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestMetricsInAllFunctionsMode: without FUNCTION_TARGET the container also
// serves GET /metrics, which counts the deliveries it answered.
func TestMetricsInAllFunctionsMode(t *testing.T) {
	bin := buildServer(t)
	emutest.FirestoreHost(t)
	secret := webhooktest.NewSecret()
	base := start(t, bin, "GOOGLE_CLOUD_PROJECT="+emutest.ProjectID(t), "LROSINK_RESULTS=stdout", "LROSINK_WEBHOOK_SECRETS="+secret)
	body := []byte(`{"type":"batch.succeeded","version":"v1","data":{"id":"batches/metrics_e2e"}}`)
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, base+"/Webhook", bytes.NewReader(body))
		req.Header = webhooktest.Headers("msg_metrics", time.Now(), body, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("delivery answered %d", resp.StatusCode)
		}
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, text)
	}
	for _, want := range []string{
		`lrosink_webhook_requests_total{status="200"} 2`,
		`lrosink_ingest_decisions_total{outcome="completed",reason="first-sighting",source="webhook"} 1`,
		`lrosink_ingest_decisions_total{outcome="duplicate",reason="duplicate",source="webhook"} 1`,
	} {
		if !strings.Contains(string(text), want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, text)
		}
	}
}
