package app_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestV1AThroughTheWiring is issue G's acceptance for v1a, through the
// real HTTP handler of the App (SQLite and the Firestore emulator), with a
// JWKS served over HTTP holding one RSA key and two OKP Ed25519 keys, and
// the genai SDK against the fake Gemini as the door's confirmer:
//   - a delivery signed by either OKP key is accepted and, Gemini agreeing,
//     publishes exactly one message (with Gemini's output);
//   - tampered body, a key not in the set, a 10-minute-old timestamp, a
//     truncated signature, an RSA key used for v1a → 401 with a stable reason;
//   - `v1,<wrong> v1a,<right>` is accepted;
//   - a genuine v1a delivery about an operation Gemini does not know (another
//     project's, replayed here) → 503 not-found-yet inside the window from
//     its first delivery (Gemini may not know its own operation yet), then
//     200 dropped/not-confirmed; nothing stored, nothing published.
func TestV1AThroughTheWiring(t *testing.T) {
	for _, store := range []string{"sqlite", "firestore"} {
		t.Run(store, func(t *testing.T) { testV1AThroughTheWiring(t, store) })
	}
}

func testV1AThroughTheWiring(t *testing.T, store string) {
	rsaSigner, err := webhooktest.NewJWTSigner("rsa-1")
	if err != nil {
		t.Fatal(err)
	}
	okp1, okp2, stranger := webhooktest.NewEd25519Key(), webhooktest.NewEd25519Key(), webhooktest.NewEd25519Key()
	jwks := httptest.NewServer(webhooktest.JWKS{rsaSigner.JWK(), okp1.JWK("ed-1"), okp2.JWK("ed-2")})
	t.Cleanup(jwks.Close)

	fake := fakegemini.New()
	for _, id := range []string{"b-one", "b-two", "b-mixed"} {
		fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: now.Add(-time.Minute), ResponsesFile: "files/" + id + "-out"})
	}
	geminiURL := fake.Start(t).URL
	secret := webhooktest.NewSecret()
	var stdout testutil.SyncBuffer
	cfg := testConfig(t, geminiURL, func(c *config.Config) {
		c.JWKSURL, c.GeminiAPIKey, c.WebhookSecrets = jwks.URL, fakegemini.DefaultAPIKey, []string{secret}
		if store == "firestore" {
			c.Store, c.Project, c.FirestoreEmulatorHost = "firestore", emutest.ProjectID(t), emutest.FirestoreHost(t)
		}
	})
	clk := testutil.NewClock(now)
	a := newApp(t, cfg, nil, &stdout, clk.Now)
	srv := httptest.NewServer(a.Mux())
	t.Cleanup(srv.Close)

	post := func(t *testing.T, h http.Header, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/Webhook", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	// A forged body: states output a forger would want published.
	body := func(id string) string {
		return `{"type":"batch.succeeded","version":"v1","timestamp":"2026-12-29T09:20:00Z","data":{"id":"batches/` + id +
			`","output_file_uri":"gs://forged/out"}}`
	}
	signedBy := func(k *webhooktest.Ed25519Key, msgID, b string, ts time.Time) http.Header {
		return webhooktest.V1AHeaders(msgID, ts, []byte(b), k)
	}

	// Accepted: either OKP key, and a wrong v1 entry beside a right v1a.
	mixed := signedBy(okp2, "msg_mixed", body("b-mixed"), now)
	wrongV1 := "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32))
	mixed.Set("webhook-signature", wrongV1+" "+mixed.Get("webhook-signature"))
	for _, tc := range []struct {
		name, op string
		h        http.Header
	}{
		{"first OKP key", "b-one", signedBy(okp1, "msg_one", body("b-one"), now)},
		{"second OKP key", "b-two", signedBy(okp2, "msg_two", body("b-two"), now)},
		{"v1,<wrong> v1a,<right>", "b-mixed", mixed},
	} {
		status, answer := post(t, tc.h, body(tc.op))
		if status != http.StatusOK || !strings.Contains(answer, `"outcome":"completed"`) {
			t.Fatalf("%s: %d %s, want 200 completed", tc.name, status, answer)
		}
		// A redelivery publishes nothing more.
		if status, answer := post(t, tc.h, body(tc.op)); status != http.StatusOK || !strings.Contains(answer, `"outcome":"duplicate"`) {
			t.Fatalf("%s redelivered: %d %s, want 200 duplicate", tc.name, status, answer)
		}
	}
	msgs := messages(t, stdout.String())
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want exactly one per operation:\n%s", len(msgs), stdout.String())
	}
	for _, m := range msgs {
		out, _ := m["output"].(map[string]any)
		if m["state"] != "SUCCEEDED" || out["responses_file"] == nil || out["output_file_uri"] != nil {
			t.Fatalf("message %v: want SUCCEEDED with Gemini's output, not the delivered one", m)
		}
	}

	// Refused with a stable reason.
	good := body("b-one")
	tampered := strings.Replace(good, "forged", "forgeD", 1)
	right := okp1.Signature("msg_bad", now, []byte(good))
	withSig := func(sig string) http.Header {
		h := signedBy(okp1, "msg_bad", good, now)
		h.Set("webhook-signature", sig)
		return h
	}
	rsaSig, err := rsaSigner.Raw([]byte("msg_bad." + strconv.FormatInt(now.Unix(), 10) + "." + good))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body, reason string
		h                  http.Header
	}{
		{"tampered body", tampered, "no-matching-signature", signedBy(okp1, "msg_bad", good, now)},
		{"a key not in the set", good, "no-matching-signature", signedBy(stranger, "msg_bad", good, now)},
		{"a 10-minute-old timestamp", good, "timestamp-too-old", signedBy(okp1, "msg_bad", good, now.Add(-10*time.Minute))},
		{"a truncated signature", good, "no-matching-signature", withSig(right[:len(right)-6])},
		{"an RSA key used for v1a", good, "no-matching-signature", withSig("v1a," + base64.StdEncoding.EncodeToString(rsaSig))},
	} {
		status, answer := post(t, tc.h, tc.body)
		if status != http.StatusUnauthorized || !strings.Contains(answer, `"reason":"`+tc.reason+`"`) {
			t.Errorf("%s: %d %s, want 401 %s", tc.name, status, answer, tc.reason)
		}
	}

	// The replay case: a genuine Google-signed delivery about an operation
	// this project's Gemini does not know.
	before := fake.TotalCalls()
	foreign := body("someone-elses")
	status, answer := post(t, signedBy(okp1, "msg_foreign", foreign, clk.Now()), foreign)
	if status != http.StatusServiceUnavailable || !strings.Contains(answer, `"reason":"not-found-yet"`) {
		t.Fatalf("replayed foreign delivery: %d %s, want 503 not-found-yet", status, answer)
	}
	clk.Advance(ingest.NotFoundWindow)
	status, answer = post(t, signedBy(okp1, "msg_foreign", foreign, clk.Now()), foreign)
	if status != http.StatusOK || !strings.Contains(answer, `"outcome":"dropped"`) || !strings.Contains(answer, `"reason":"not-confirmed"`) {
		t.Fatalf("foreign delivery after the window: %d %s, want 200 dropped not-confirmed", status, answer)
	}
	if fake.TotalCalls()-before != 2 {
		t.Fatalf("Gemini saw %d requests, want one confirmation per delivery", fake.TotalCalls()-before)
	}
	n, err := opname.Normalize("batches/someone-elses", opname.KindUnknown)
	if err != nil {
		t.Fatal(err)
	}
	id, err := opname.DocID(n.Key())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Ledger.GetOperation(t.Context(), id); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("%s: the foreign operation is in the ledger (err %v)", store, err)
	}
	if count, err := a.Ledger.CountOperations(t.Context(), ledger.Filter{}); err != nil || count != 3 {
		t.Fatalf("%s: %d operations stored (err %v), want the 3 confirmed ones", store, count, err)
	}
	if got := len(messages(t, stdout.String())); got != 3 {
		t.Fatalf("%d messages after the replay, want 3", got)
	}
}

// messages decodes the JSON lines lrosink wrote to stdout.
func messages(t *testing.T, out string) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	dec := json.NewDecoder(bytes.NewBufferString(out))
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("stdout is not JSON lines: %v\n%s", err, out)
		}
		msgs = append(msgs, m)
	}
	return msgs
}
