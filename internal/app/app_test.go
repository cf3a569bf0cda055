package app_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

var now = time.Unix(1767000000, 0).UTC()

// TestJWTTerminalConfirmedThroughTheWiring: the door confirms JWT terminals
// with the same Gemini fetcher the reconciler uses when GEMINI_API_KEY is
// set, and leaves them unapplied (answering why) when it is not.
func TestJWTTerminalConfirmedThroughTheWiring(t *testing.T) {
	signer, err := webhooktest.NewJWTSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(signer)
	t.Cleanup(jwks.Close)
	fake := fakegemini.New()
	fake.SetBatch("b-run", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: now.Add(-time.Minute)})
	geminiURL := fake.Start(t).URL

	for _, tc := range []struct {
		name, key, outcome, reason string
		geminiCalls                int
	}{
		{name: "with a key", key: fakegemini.DefaultAPIKey, outcome: "applied", reason: "first-sighting", geminiCalls: 1},
		{name: "without a key", outcome: "unconfirmed", reason: "no-gemini-api-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := fake.TotalCalls()
			var stdout bytes.Buffer
			logs := &testutil.SyncBuffer{}
			cfg := testConfig(t, geminiURL, func(c *config.Config) { c.JWKSURL, c.GeminiAPIKey = jwks.URL, tc.key })
			a := newApp(t, cfg, logs, &stdout, func() time.Time { return now })

			tok, err := signer.Token(jwt.Claims{Expiry: jwt.NewNumericDate(now.Add(5 * time.Minute)), IssuedAt: jwt.NewNumericDate(now)})
			if err != nil {
				t.Fatal(err)
			}
			body := `{"type":"batch.failed","data":{"id":"batches/b-run","error_message":"forged"}}`
			req := httptest.NewRequest(http.MethodPost, "/Webhook", strings.NewReader(body))
			req.Header = webhooktest.JWTHeaders("msg_1", tok)
			w := httptest.NewRecorder()
			a.Mux().ServeHTTP(w, req)
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"outcome":"`+tc.outcome+`"`) ||
				!strings.Contains(w.Body.String(), `"reason":"`+tc.reason+`"`) {
				t.Fatalf("answer %d %s, want 200 %s %s", w.Code, w.Body, tc.outcome, tc.reason)
			}
			if stdout.Len() != 0 {
				t.Fatalf("a forged FAILED was published: %s", stdout.String())
			}
			if got := fake.TotalCalls() - calls; got != tc.geminiCalls {
				t.Fatalf("Gemini saw %d requests, want %d", got, tc.geminiCalls)
			}
		})
	}
}

// TestReconcileChecksWebhookHealthThroughTheWiring: with GEMINI_API_KEY set,
// the App's reconcile pass reads the project webhooks with the same Gemini
// fetcher (wrapped for metrics), so a webhook Gemini disabled is alerted
// and counted.
func TestReconcileChecksWebhookHealthThroughTheWiring(t *testing.T) {
	fake := fakegemini.New()
	if !fake.SetWebhookState(fake.AddWebhook("lrosink", "https://example.com/Webhook"), fakegemini.WebhookDisabled) {
		t.Fatal("SetWebhookState")
	}
	logs := &testutil.SyncBuffer{}
	cfg := testConfig(t, fake.Start(t).URL, func(c *config.Config) {
		c.WebhookSecrets, c.GeminiAPIKey = []string{webhooktest.NewSecret()}, fakegemini.DefaultAPIKey
	})
	a := newApp(t, cfg, logs, &bytes.Buffer{}, func() time.Time { return now })
	w := httptest.NewRecorder()
	a.Mux().ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/Reconcile", nil))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"webhooks_disabled":1`) {
		t.Fatalf("answer %d %s, want 200 counting one disabled webhook", w.Code, w.Body)
	}
	if n := logs.CountLines(`"alert":"webhook-disabled"`); n != 1 {
		t.Fatalf("%d webhook-disabled alert lines, want 1:\n%s", n, logs.String())
	}
}
