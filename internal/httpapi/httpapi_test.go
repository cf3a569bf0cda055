package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

var now = time.Unix(1767000000, 0).UTC()

type countingSink struct{ n atomic.Int64 }

func (c *countingSink) Publish(context.Context, results.Message) error { c.n.Add(1); return nil }

// registerServer serves the Register function on a door over store; the
// server closes when the test ends.
func registerServer(t *testing.T, store ledger.Ledger) (*ingest.Door, *httptest.Server) {
	t.Helper()
	door, err := ingest.New(ingest.Config{Store: claims.New(store), Sink: &countingSink{}, Log: logging.Discard(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.Register(door, logging.Discard()))
	t.Cleanup(srv.Close)
	return door, srv
}

// rig is a Webhook function over a memory ledger with a JWKS server.
type rig struct {
	store   *memledger.Store
	sink    *countingSink
	srv     *httptest.Server
	secret  string
	key     *rsa.PrivateKey
	jwksURL string
}

func newRig(t *testing.T, verifierCfg func(*webhook.Config)) *rig {
	t.Helper()
	return newRigWith(t, verifierCfg, nil, logging.Discard())
}

// newRigWith is newRig with the door's config adjusted and a log for the
// door and the handler.
func newRigWith(t *testing.T, verifierCfg func(*webhook.Config), doorCfg func(*ingest.Config), log *slog.Logger) *rig {
	t.Helper()
	r := &rig{store: testutil.MemLedger(t), sink: &countingSink{}, secret: webhooktest.NewSecret()}
	var err error
	if r.key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	jwks := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &r.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}}
	js := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(jwks) }))
	t.Cleanup(js.Close)
	r.jwksURL = js.URL
	cfg := webhook.Config{Secrets: []string{r.secret}, JWKSURL: js.URL, Audience: "https://hook.example/Webhook",
		HTTPClient: js.Client(), Now: func() time.Time { return now }}
	if verifierCfg != nil {
		verifierCfg(&cfg)
	}
	v, err := webhook.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc := ingest.Config{Store: claims.New(r.store), Sink: r.sink, Log: log, Now: func() time.Time { return now }}
	if doorCfg != nil {
		doorCfg(&dc)
	}
	door, err := ingest.New(dc)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(httpapi.Webhook(door, v, log, 32<<10))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *rig) token(t *testing.T, mutate func(*jwt.Claims, *string)) string {
	t.Helper()
	claims := jwt.Claims{Audience: jwt.Audience{"https://hook.example/Webhook"}, Expiry: jwt.NewNumericDate(now.Add(5 * time.Minute)),
		IssuedAt: jwt.NewNumericDate(now), ID: "tok-1"}
	kid := "k1"
	if mutate != nil {
		mutate(&claims, &kid)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: r.key}, (&jose.SignerOptions{}).WithHeader("kid", kid).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type request struct {
	name   string
	method string
	body   []byte
	header http.Header
	chunk  bool // send without Content-Length
	status int
	reason string
}

func (r *rig) do(t *testing.T, q request) (int, httpapi.Answer) {
	t.Helper()
	var body io.Reader = bytes.NewReader(q.body)
	if q.chunk {
		body = io.MultiReader(bytes.NewReader(q.body)) // unknown length → chunked
	}
	req, err := http.NewRequest(q.method, r.srv.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range q.header {
		req.Header[k] = v
	}
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s: %v", q.name, err)
	}
	defer resp.Body.Close()
	var a httpapi.Answer
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%s: answer is not JSON: %q", q.name, raw)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		t.Errorf("%s: 503 without Retry-After", q.name)
	}
	return resp.StatusCode, a
}

func envelope(typ, id string) []byte {
	return []byte(fmt.Sprintf(`{"type":%q,"version":"v1","timestamp":"2026-12-29T09:20:00Z","data":{"id":%q}}`, typ, id))
}

func hmacHeaders(secret, id string, ts time.Time, body []byte) http.Header {
	return webhooktest.Headers(id, ts, body, secret)
}

func jwtHeaders(tok string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", "msg_jwt")
	h.Set("webhook-signature", tok)
	return h
}

func without(h http.Header, k string) http.Header {
	h = h.Clone()
	h.Del(k)
	return h
}

func with(h http.Header, k, v string) http.Header {
	h = h.Clone()
	h.Set(k, v)
	return h
}

// TestHostileRequests sends ≥ 40 hostile or malformed requests; each gets the
// contract status, and afterwards the ledger holds nothing and nothing was
// published.
func TestHostileRequests(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	good := envelope("batch.succeeded", "batches/hostile")
	sign := func(body []byte) http.Header { return hmacHeaders(r.secret, "msg_1", now, body) }
	signed := func(name string, body []byte, status int, reason string) request {
		return request{name: name, method: http.MethodPost, body: body, header: sign(body), status: status, reason: reason}
	}
	hdr := sign(good)
	other := webhooktest.NewSecret()
	deep := []byte(`{"type":"batch.succeeded","data":{"id":"batches/x","x":` + strings.Repeat("[", 12000) + strings.Repeat("]", 12000) + `}}`)
	pubPEM, _ := x509.MarshalPKIXPublicKey(&r.key.PublicKey)
	hsKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubPEM})
	hsSigner, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: hsKey}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	hsTok, _ := jwt.Signed(hsSigner).Claims(jwt.Claims{Expiry: jwt.NewNumericDate(now.Add(time.Minute))}).Serialize()
	b64 := func(s string) string {
		return strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(encodeStd(s)), "=")
	}
	noneTok := b64(`{"alg":"none","kid":"k1"}`) + "." + b64(fmt.Sprintf(`{"exp":%d}`, now.Add(time.Minute).Unix())) + "."
	const u, b = http.StatusUnauthorized, http.StatusBadRequest

	cases := []request{
		{name: "GET", method: http.MethodGet, header: hdr, status: http.StatusMethodNotAllowed, reason: "method-not-allowed"},
		{name: "PUT", method: http.MethodPut, body: good, header: hdr, status: http.StatusMethodNotAllowed, reason: "method-not-allowed"},
		{name: "DELETE", method: http.MethodDelete, header: hdr, status: http.StatusMethodNotAllowed, reason: "method-not-allowed"},
		{name: "oversized body", method: http.MethodPost, body: bytes.Repeat([]byte("a"), 40<<10), header: hdr, status: http.StatusRequestEntityTooLarge, reason: "body-too-large"},
		{name: "oversized chunked body", method: http.MethodPost, body: bytes.Repeat([]byte("a"), 40<<10), header: hdr, chunk: true, status: http.StatusRequestEntityTooLarge, reason: "body-too-large"},
		{name: "no headers", method: http.MethodPost, body: good, status: u, reason: "missing-headers"},
		{name: "missing webhook-id", method: http.MethodPost, body: good, header: without(hdr, "webhook-id"), status: u, reason: "missing-headers"},
		{name: "missing timestamp", method: http.MethodPost, body: good, header: without(hdr, "webhook-timestamp"), status: u, reason: "missing-headers"},
		{name: "missing signature", method: http.MethodPost, body: good, header: without(hdr, "webhook-signature"), status: u, reason: "missing-headers"},
		{name: "tampered body", method: http.MethodPost, body: envelope("batch.succeeded", "batches/hostilf"), header: hdr, status: u, reason: "no-matching-signature"},
		{name: "re-serialised body", method: http.MethodPost, body: []byte(strings.ReplaceAll(string(good), ":", ": ")), header: hdr, status: u, reason: "no-matching-signature"},
		{name: "wrong secret", method: http.MethodPost, body: good, header: hmacHeaders(other, "msg_1", now, good), status: u, reason: "no-matching-signature"},
		{name: "timestamp 6 min old", method: http.MethodPost, body: good, header: hmacHeaders(r.secret, "msg_1", now.Add(-6*time.Minute), good), status: u, reason: "timestamp-too-old"},
		{name: "timestamp 6 min ahead", method: http.MethodPost, body: good, header: hmacHeaders(r.secret, "msg_1", now.Add(6*time.Minute), good), status: u, reason: "timestamp-too-new"},
		{name: "timestamp not an integer", method: http.MethodPost, body: good, header: with(hdr, "webhook-timestamp", "1767000000.5"), status: u, reason: "bad-timestamp"},
		{name: "timestamp in ISO", method: http.MethodPost, body: good, header: with(hdr, "webhook-timestamp", "2026-12-29T09:20:00Z"), status: u, reason: "bad-timestamp"},
		{name: "signature for another id", method: http.MethodPost, body: good, header: with(hdr, "webhook-id", "msg_2"), status: u, reason: "no-matching-signature"},
		{name: "non-base64 signature", method: http.MethodPost, body: good, header: with(hdr, "webhook-signature", "v1,!!!not-base64!!!"), status: u, reason: "no-matching-signature"},
		{name: "empty signature", method: http.MethodPost, body: good, header: with(hdr, "webhook-signature", "   "), status: u, reason: "missing-headers"},
		{name: "v1a only", method: http.MethodPost, body: good, header: with(hdr, "webhook-signature", "v1a,"+strings.TrimPrefix(hdr.Get("webhook-signature"), "v1,")), status: u, reason: "no-matching-signature"},
		{name: "v2 only", method: http.MethodPost, body: good, header: with(hdr, "webhook-signature", "v2,"+strings.TrimPrefix(hdr.Get("webhook-signature"), "v1,")), status: u, reason: "no-matching-signature"},
		{name: "truncated signature", method: http.MethodPost, body: good, header: with(hdr, "webhook-signature", hdr.Get("webhook-signature")[:20]), status: u, reason: "no-matching-signature"},
		{name: "several wrong signatures", method: http.MethodPost, body: good, header: with(hdr, "webhook-signature", webhooktest.Signature(other, "msg_1", now, good)+" v1,AAAA "+webhooktest.Signature(other, "x", now, good)), status: u, reason: "no-matching-signature"},
		{name: "signature without version", method: http.MethodPost, body: good, header: with(hdr, "webhook-signature", strings.TrimPrefix(hdr.Get("webhook-signature"), "v1,")), status: u, reason: "no-matching-signature"},
		{name: "jwt alg none", method: http.MethodPost, body: good, header: jwtHeaders(noneTok), status: u, reason: "bad-token"},
		{name: "jwt HS256 with the public key", method: http.MethodPost, body: good, header: jwtHeaders(hsTok), status: u, reason: "bad-token"},
		{name: "jwt expired", method: http.MethodPost, body: good, header: jwtHeaders(r.token(t, func(c *jwt.Claims, _ *string) { c.Expiry = jwt.NewNumericDate(now.Add(-5 * time.Minute)) })), status: u, reason: "token-expired"},
		{name: "jwt without exp", method: http.MethodPost, body: good, header: jwtHeaders(r.token(t, func(c *jwt.Claims, _ *string) { c.Expiry = nil })), status: u, reason: "bad-token"},
		{name: "jwt not yet valid", method: http.MethodPost, body: good, header: jwtHeaders(r.token(t, func(c *jwt.Claims, _ *string) { c.NotBefore = jwt.NewNumericDate(now.Add(10 * time.Minute)) })), status: u, reason: "token-not-yet-valid"},
		{name: "jwt unknown kid", method: http.MethodPost, body: good, header: jwtHeaders(r.token(t, func(_ *jwt.Claims, k *string) { *k = "k9" })), status: u, reason: "unknown-kid"},
		{name: "jwt wrong audience", method: http.MethodPost, body: good, header: jwtHeaders(r.token(t, func(c *jwt.Claims, _ *string) { c.Audience = jwt.Audience{"https://evil.example"} })), status: u, reason: "wrong-audience"},
		{name: "jwt garbage segments", method: http.MethodPost, body: good, header: jwtHeaders("eyJhbGciOiJSUzI1NiJ9.e30.@@@@"), status: u, reason: "missing-headers"},
		{name: "jwt tampered payload", method: http.MethodPost, body: good, header: jwtHeaders(tamper(r.token(t, nil))), status: u, reason: "bad-token"},
		signed("invalid JSON", []byte(`{"type":"batch.succeeded",`), b, "bad-envelope"),
		signed("JSON array", []byte(`[{"type":"batch.succeeded"}]`), b, "bad-envelope"),
		signed("empty body", []byte{}, b, "bad-envelope"),
		signed("no type", []byte(`{"data":{"id":"batches/x"}}`), b, "bad-envelope"),
		signed("empty type", []byte(`{"type":"","data":{"id":"batches/x"}}`), b, "bad-envelope"),
		signed("type not a string", []byte(`{"type":7,"data":{"id":"batches/x"}}`), b, "bad-envelope"),
		signed("no data", []byte(`{"type":"batch.succeeded"}`), b, "bad-envelope"),
		signed("data not an object", []byte(`{"type":"batch.succeeded","data":"batches/x"}`), b, "bad-envelope"),
		signed("no data.id", []byte(`{"type":"batch.succeeded","data":{"output_file_uri":"gs://b/x"}}`), b, "bad-envelope"),
		signed("data.id not a string", []byte(`{"type":"batch.succeeded","data":{"id":42}}`), b, "bad-envelope"),
		signed("data.id empty", envelope("batch.succeeded", ""), b, "bad-envelope"),
		signed("huge data.id", envelope("batch.succeeded", "batches/"+strings.Repeat("a", 2000)), b, "bad-envelope"),
		signed("path traversal id", envelope("batch.succeeded", "batches/../operations/x"), b, "invalid-name"),
		signed("id with a slash inside", envelope("batch.succeeded", "batches/a/b"), b, "invalid-name"),
		signed("id with a space", envelope("batch.succeeded", "batches/a b"), b, "invalid-name"),
		signed("id with a control character", []byte(`{"type":"batch.succeeded","data":{"id":"batches/a\u0007b"}}`), b, "invalid-name"),
		signed("id of another family", envelope("batch.succeeded", "interactions/abc"), b, "invalid-name"),
		signed("id with an unknown prefix", envelope("batch.succeeded", "files/abc"), b, "invalid-name"),
		signed("id __reserved__", envelope("batch.succeeded", "__x__"), b, "invalid-name"),
		signed("deep nesting", deep, b, "bad-envelope"),
		signed("invalid UTF-8", []byte("{\"type\":\"batch.succeeded\",\"data\":{\"id\":\"batches/\xff\xfe\"}}"), b, "bad-envelope"),
		signed("unknown event type", envelope("batch.exploded", "batches/x"), http.StatusOK, "unknown-event-type"),
		signed("ping-like event", []byte(`{"type":"webhook.ping","data":{}}`), http.StatusOK, "unknown-event-type"),
	}
	if len(cases) < 40 {
		t.Fatalf("only %d hostile cases", len(cases))
	}
	for _, q := range cases {
		status, a := r.do(t, q)
		if status != q.status || (q.reason != "" && a.Reason != q.reason) {
			t.Errorf("%s: %d %+v, want %d reason %q", q.name, status, a, q.status, q.reason)
		}
		// A 400 names the stable label in reason and says what is wrong in
		// detail (CONTRACT.md §3), for the sender to fix.
		if status == http.StatusBadRequest && a.Detail == "" {
			t.Errorf("%s: %d %+v: want a detail saying what is wrong", q.name, status, a)
		}
	}
	// Nothing was stored, nothing published.
	ops, err := r.store.ListOperations(t.Context(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, w, c := r.store.Counts().Snapshot(); len(ops) != 0 || w != 0 || c != 0 {
		t.Fatalf("hostile requests changed the ledger: %d operations, %d writes, %d commits", len(ops), w, c)
	}
	if r.sink.n.Load() != 0 {
		t.Fatalf("hostile requests published %d messages", r.sink.n.Load())
	}
	// The control: the same rig accepts a good delivery, by HMAC and by JWT,
	// so the checks above failed for the reasons given, not for a broken rig.
	if status, a := r.do(t, request{name: "good", method: http.MethodPost, body: good, header: hdr}); status != http.StatusOK || a.Outcome != "completed" {
		t.Fatalf("good HMAC delivery: %d %+v", status, a)
	}
	jwtBody := envelope("interaction.requires_action", "v1_abc")
	if status, a := r.do(t, request{name: "good jwt", method: http.MethodPost, body: jwtBody, header: jwtHeaders(r.token(t, nil))}); status != http.StatusOK || a.Outcome != "applied" {
		t.Fatalf("good JWT delivery: %d %+v", status, a)
	}
	if ops, _ := r.store.ListOperations(t.Context(), "", 10); len(ops) != 2 || r.sink.n.Load() != 1 {
		t.Fatalf("control deliveries: %d operations, %d messages", len(ops), r.sink.n.Load())
	}
}

func encodeStd(s string) string {
	var buf bytes.Buffer
	enc := newB64(&buf)
	_, _ = enc.Write([]byte(s))
	_ = enc.Close()
	return buf.String()
}

func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	parts[1] = strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(encodeStd(`{"exp":9999999999,"aud":"https://hook.example/Webhook"}`)), "=")
	return strings.Join(parts, ".")
}

// TestJWKSUnreachableIs503 answers 503 (Gemini retries) rather than 401
// when the key set cannot be fetched, and stores nothing.
func TestJWKSUnreachableIs503(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	r := newRig(t, func(c *webhook.Config) { c.JWKSURL = deadURL; c.HTTPClient = &http.Client{Timeout: 2 * time.Second} })
	status, a := r.do(t, request{name: "jwks down", method: http.MethodPost, body: envelope("batch.succeeded", "batches/x"), header: jwtHeaders(r.token(t, nil))})
	if status != http.StatusServiceUnavailable || a.Reason != "jwks-unavailable" {
		t.Fatalf("JWKS unreachable: %d %+v", status, a)
	}
	if _, w, _ := r.store.Counts().Snapshot(); w != 0 {
		t.Fatalf("%d writes", w)
	}
}

// TestSenderGoneWhileTheJWKSIsFetched: a sender that hangs up while its
// token waits for the key set is answered (and logged, at WARNING) 499
// sender-gone, not 503 jwks-unavailable at ERROR: the JWKS did not fail.
func TestSenderGoneWhileTheJWKSIsFetched(t *testing.T) {
	t.Parallel()
	fetching, release := make(chan struct{}, 1), make(chan struct{})
	js := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case fetching <- struct{}{}:
		default:
		}
		<-release // a JWKS slow to answer; what it answers then does not matter
		_, _ = io.WriteString(w, `{"keys":[]}`)
	}))
	t.Cleanup(js.Close)
	t.Cleanup(func() { close(release) }) // runs first: js.Close waits for the fetch
	logs := &testutil.SyncBuffer{}
	r := newRigWith(t, func(c *webhook.Config) { c.JWKSURL, c.HTTPClient = js.URL, js.Client() }, nil, logging.New(logs, slog.LevelDebug, ""))

	ctx, hangUp := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.srv.URL, bytes.NewReader(envelope("batch.succeeded", "batches/x")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = jwtHeaders(r.token(t, nil))
	sent := make(chan error, 1)
	go func() {
		resp, err := r.srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		sent <- err
	}()
	<-fetching
	hangUp()
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Fatalf("the sender's request ended with %v, want its own cancellation", err)
	}
	r.srv.Close() // waits for the handler's answer and log line
	if n := countLines(logs.String(), `"message":"webhook answer"`, `"severity":"WARNING"`, `"status":499`, `"reason":"sender-gone"`); n != 1 {
		t.Errorf("%d WARNING webhook answer lines 499 sender-gone, want 1:\n%s", n, logs)
	}
	if strings.Contains(logs.String(), `"reason":"jwks-unavailable"`) || strings.Contains(logs.String(), `"severity":"ERROR"`) {
		t.Errorf("a sender that hung up is logged as a JWKS failure:\n%s", logs)
	}
}

// TestNoSecretsConfigured: static deliveries are refused when no secret is set.
func TestNoSecretsConfigured(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *webhook.Config) { c.Secrets = nil })
	body := envelope("batch.succeeded", "batches/x")
	status, a := r.do(t, request{name: "no secrets", method: http.MethodPost, body: body, header: hmacHeaders(r.secret, "m", now, body)})
	if status != http.StatusUnauthorized || a.Reason != "no-secrets-configured" {
		t.Fatalf("%d %+v", status, a)
	}
}

// TestRegister: 201 created, 200 already known with state untouched, 400 for
// invalid input, 405 for other methods; invalid input stores nothing.
func TestRegister(t *testing.T) {
	t.Parallel()
	store := testutil.MemLedger(t)
	_, srv := registerServer(t, store)
	post := func(body string) (int, httpapi.Answer) { return postRegister(t, srv.URL, body) }
	for _, c := range []struct {
		body   string
		status int
		reason string
	}{
		{`{"name":`, 400, "invalid-json"},
		{`{"name":""}`, 400, "invalid-name"},
		{`{"name":"abc"}`, 400, "invalid-name"},
		{`{"name":"files/abc"}`, 400, "invalid-name"},
		{`{"name":"batches/a","kind":"video"}`, 400, "invalid-name"},
		{`{"name":"batches/a","kind":"spaceship"}`, 400, "invalid-kind"},
		{`{"name":"batches/` + strings.Repeat("x", 2000) + `"}`, 400, "invalid-name"},
	} {
		if status, a := post(c.body); status != c.status || a.Reason != c.reason {
			t.Errorf("%.40s: %d %+v, want %d %s", c.body, status, a, c.status, c.reason)
		} else if a.Detail == "" {
			t.Errorf("%.40s: %d %+v: want a detail saying what is wrong", c.body, status, a)
		}
	}
	if _, w, _ := store.Counts().Snapshot(); w != 0 {
		t.Fatalf("invalid registrations wrote %d documents", w)
	}
	if status, a := post(`{"name":"batch_r1","kind":"batch","metadata":{"job":"j"}}`); status != 201 || a.Outcome != "created" || a.Operation != "batches/batch_r1" {
		t.Fatalf("register: %d %+v", status, a)
	}
	op, err := store.GetOperation(t.Context(), "gemini:batches%2Fbatch_r1")
	if err != nil || op.UserMetadata["job"] != "j" || op.State != "PENDING" || op.Kind != "batch" {
		t.Fatalf("registered operation %+v %v", op, err)
	}
	if status, a := post(`{"name":"batches/batch_r1","metadata":{"job":"other"}}`); status != 200 || a.Outcome != "known" {
		t.Fatalf("re-register: %d %+v", status, a)
	}
	if again, _ := store.GetOperation(t.Context(), "gemini:batches%2Fbatch_r1"); again.Rev != op.Rev {
		t.Fatal("re-registering changed the operation")
	}
	resp, _ := http.Get(srv.URL)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
}

// downSink refuses every publish.
type downSink struct{}

func (downSink) Publish(context.Context, results.Message) error { return errors.New("sink down") }

// TestRegisterLeavesAnOwedMessage: registering a settled operation whose
// results message is owed (its publish failed) answers 200 known and
// publishes nothing: the message is the next reconcile pass's. Register
// used to take the publish over, which the Register service may not do on
// Cloud Run (terraform/iam.tf grants it no publisher role): every retry
// failed until Reconcile published.
func TestRegisterLeavesAnOwedMessage(t *testing.T) {
	store := testutil.MemLedger(t)
	clock := func() time.Time { return now }
	failed, err := ingest.New(ingest.Config{Store: claims.New(store), Sink: downSink{}, Log: logging.Discard(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := failed.Ingest(t.Context(), event.Event{Name: "batches/owed", State: lifecycle.Succeeded, UpdateTime: now,
		Source: event.SourceWebhook}); !errors.Is(err, ingest.ErrSideEffect) {
		t.Fatalf("first delivery with the sink down: %v", err)
	}
	sink := &countingSink{}
	door, err := ingest.New(ingest.Config{Store: claims.New(store), Sink: sink, Log: logging.Discard(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.Register(door, logging.Discard()))
	t.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"name":"batches/owed"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || sink.n.Load() != 0 {
		t.Fatalf("register of an owed operation: %d, %d publishes; want 200 and none", resp.StatusCode, sink.n.Load())
	}
	if c, err := store.GetClaim(t.Context(), "gemini:batches%2Fowed"); err != nil || c.Status != ledger.ClaimReleased {
		t.Fatalf("claim %+v %v, want it still RELEASED (owed)", c, err)
	}
}
