package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/lrosink/lrosink/internal/action"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fetcherr"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	reg "github.com/lrosink/lrosink/internal/register"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// Shapes of a JSON answer's body.
const (
	shapeAnswer  = "answer"  // {"outcome","reason","operation"[,"detail"]} (CONTRACT.md §3, §5)
	shapeSummary = "summary" // the reconcile summary (CONTRACT.md §4)
	shapeHealth  = "health"  // {"status":"ok"}
	shapeIntent  = "intent"  // an answer with the intent's status (CONTRACT.md §5)
	shapeAction  = "action"  // an action's result (CONTRACT.md §4, "Actions")
)

// resultDoer answers every action with its Result: the refusals and
// failures a real Runner gives only when Gemini, a lease or the door are
// in a given state (action's and app's tests go through those); here the
// answer to each is what is checked.
type resultDoer action.Result

func (d resultDoer) Do(_ context.Context, req action.Request) (action.Result, error) {
	r := action.Result(d)
	r.Action = req.Action
	return r, nil
}

// TestEveryJSONAnswer: every JSON-answering endpoint (Webhook, Register,
// Reconcile, the admin token's 401s, /healthz), in each of its status
// classes, answers Content-Type application/json with a body of its
// documented shape, and Retry-After: 30 exactly when the status is 503.
// It walks httpapi's one kind → (status, reason) table: every kind in it
// is answered to at least one request here, every answer naming a kind has
// the table's status and outcome, and every refusal names a kind of it.
func TestEveryJSONAnswer(t *testing.T) {
	t.Parallel()
	log := logging.Discard()
	clock := func() time.Time { return now }
	secret := webhooktest.NewSecret()
	newVerifier := func(cfg webhook.Config) *webhook.Verifier {
		cfg.Now = clock
		if cfg.JWKSURL != "" {
			cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
		}
		v, err := webhook.NewVerifier(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := newVerifier(webhook.Config{Secrets: []string{secret}})
	// A JWKS for the dynamic-webhook kinds: the rig's key and token maker.
	jr := newRig(t, nil)
	const aud = "https://hook.example/Webhook"
	jv := newVerifier(webhook.Config{Secrets: []string{secret}, JWKSURL: jr.jwksURL, Audience: aud})
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	deadJWKS := newVerifier(webhook.Config{Secrets: []string{secret}, JWKSURL: dead.URL, Audience: aud})
	noSecrets := newVerifier(webhook.Config{JWKSURL: jr.jwksURL, Audience: aud})
	newDoor := func(store ledger.Ledger) *ingest.Door {
		d, err := ingest.New(ingest.Config{Store: claims.New(store), Sink: &testutil.Recorder{}, Log: log, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	store := testutil.MemLedger(t)
	door := newDoor(store)
	// A drained door refuses every call as the process stopping: the real
	// 503 stopping path of Webhook and Register.
	drained := newDoor(testutil.MemLedger(t))
	if err := drained.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(reconcile.Config{Ledger: claims.New(store), Door: door, Log: log, Now: clock, StuckAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const token = "0123456789abcdef-admin-token"
	hooks := httpapi.Webhook(door, v, log, 32<<10)
	register := httpapi.Register(door, log)
	keeps, err := reg.NewIntents(door, store, clock, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	intents := httpapi.Register(door, log, httpapi.WithIntents(keeps))
	record := `{"intent":"reply-k","kind":"batch","model":"models/m","display_name":"lrosink-reply-k","metadata":{"n":12345678901234567890123}}`

	post := func(body string, h http.Header) func() *http.Request {
		return func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
			for k, vs := range h {
				r.Header[k] = vs
			}
			return r
		}
	}
	get := func() *http.Request { return httptest.NewRequest(http.MethodGet, "/", nil) }
	signed := func(body string) func() *http.Request {
		return post(body, hmacHeaders(secret, "msg_reply", now, []byte(body)))
	}
	ended := func() *http.Request {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		return post("", nil)().WithContext(ctx)
	}
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	good := string(envelope("batch.succeeded", "batches/reply"))
	tooBig := strings.Repeat("a", 40<<10)
	// The dynamic webhook's body is unsigned: any good envelope.
	tok := func(mutate func(*jwt.Claims, *string)) func() *http.Request {
		return post(good, jwtHeaders(jr.token(t, mutate)))
	}
	signedAt := func(key string, at time.Time) func() *http.Request {
		return post(good, hmacHeaders(key, "msg_reply", at, []byte(good)))
	}
	unreadable := func() *http.Request {
		return httptest.NewRequest(http.MethodPost, "/", iotest.ErrReader(errors.New("connection reset")))
	}
	// Door errors the real door gives only after Gemini, a publish or a
	// lost claim failed (hint_test, metadata_test go through those); here
	// the answer to each is what is checked.
	failing := func(err error) http.Handler { return httpapi.Webhook(failingDoor{err}, v, log, 32<<10) }
	notConfirmed := fmt.Errorf("%w: %w", ingest.ErrNotConfirmed, fetcherr.ErrTransient)
	notFoundYet := fmt.Errorf("%w: %w", ingest.ErrNotConfirmed, ingest.ErrNotFoundYet)
	budgetSpent := fmt.Errorf("%w: %w: %w", ingest.ErrNotConfirmed, fetcherr.ErrTransient, fetcherr.ErrBudgetSpent)
	recalled := fmt.Errorf("%w: %w", ingest.ErrRecalled, notFoundYet)
	stuck := httpapi.Webhook(stuckDoor{}, v, log, 32<<10, httpapi.WithDeadline(time.Millisecond))
	// A sender that hung up while the door worked.
	gone := func() *http.Request {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		return signed(good)().WithContext(ctx)
	}

	// The actions: a real Runner over the same door (no Gemini key).
	runner, err := action.NewRunner(action.Config{Door: door, Ledger: store, Log: log, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	acts := httpapi.Reconcile(rec, log, 0, nil, httpapi.WithActions(runner))
	actAs := func(r action.Result) http.Handler {
		return httpapi.Reconcile(rec, log, 0, nil, httpapi.WithActions(resultDoer(r)))
	}
	act := func(kind, name string) func() *http.Request {
		return post(`{"action":"`+kind+`","operation":"`+name+`","actor":"reply-test"}`, nil)
	}
	table := httpapi.AnswerTable()
	produced := map[string]bool{}
	for _, c := range []struct {
		name   string
		h      http.Handler
		req    func() *http.Request
		status int
		shape  string
	}{
		{"webhook applied", hooks, signed(good), 200, shapeAnswer},
		{"webhook unreadable body", hooks, unreadable, 400, shapeAnswer},
		{"webhook unknown event type", hooks, signed(string(envelope("batch.teleported", "batches/reply"))), 200, shapeAnswer},
		{"webhook invalid name", hooks, signed(string(envelope("batch.succeeded", "batches/../x"))), 400, shapeAnswer},
		{"webhook not a verifier's error", httpapi.Webhook(door, verifierFunc(func() error { return errors.New("broken") }), log, 32<<10), signed(good), 401, shapeAnswer},
		{"webhook bad timestamp", hooks, post(good, with(hmacHeaders(secret, "msg_reply", now, []byte(good)), "webhook-timestamp", "soon")), 401, shapeAnswer},
		{"webhook timestamp too old", hooks, signedAt(secret, now.Add(-time.Hour)), 401, shapeAnswer},
		{"webhook timestamp too new", hooks, signedAt(secret, now.Add(time.Hour)), 401, shapeAnswer},
		{"webhook wrong secret", hooks, signedAt(webhooktest.NewSecret(), now), 401, shapeAnswer},
		{"webhook no secrets", httpapi.Webhook(door, noSecrets, log, 32<<10), signed(good), 401, shapeAnswer},
		{"webhook no JWKS", hooks, tok(nil), 401, shapeAnswer},
		{"webhook bad token", httpapi.Webhook(door, jv, log, 32<<10), post(good, jwtHeaders(tamper(jr.token(t, nil)))), 401, shapeAnswer},
		{"webhook token expired", httpapi.Webhook(door, jv, log, 32<<10), tok(func(c *jwt.Claims, _ *string) { c.Expiry = jwt.NewNumericDate(now.Add(-5 * time.Minute)) }), 401, shapeAnswer},
		{"webhook token not yet valid", httpapi.Webhook(door, jv, log, 32<<10), tok(func(c *jwt.Claims, _ *string) { c.NotBefore = jwt.NewNumericDate(now.Add(10 * time.Minute)) }), 401, shapeAnswer},
		{"webhook wrong audience", httpapi.Webhook(door, jv, log, 32<<10), tok(func(c *jwt.Claims, _ *string) { c.Audience = jwt.Audience{"https://evil.example"} }), 401, shapeAnswer},
		{"webhook unknown kid", httpapi.Webhook(door, jv, log, 32<<10), tok(func(_ *jwt.Claims, k *string) { *k = "k9" }), 401, shapeAnswer},
		{"webhook JWKS unavailable", httpapi.Webhook(door, deadJWKS, log, 32<<10), tok(nil), 503, shapeAnswer},
		{"webhook claim missing", failing(ingest.ErrClaimMissing), signed(good), 503, shapeAnswer},
		{"webhook video model unknown", failing(ingest.ErrVideoModelUnknown), signed(good), 503, shapeAnswer},
		{"webhook Gemini error", failing(ingest.ErrNotConfirmed), signed(good), 503, shapeAnswer},
		{"webhook Gemini unavailable", failing(notConfirmed), signed(good), 503, shapeAnswer},
		{"webhook not found yet", failing(notFoundYet), signed(good), 503, shapeAnswer},
		{"webhook Gemini budget spent", failing(budgetSpent), signed(good), 503, shapeAnswer},
		{"webhook answered from memory", failing(recalled), signed(good), 503, shapeAnswer},
		{"webhook side effect failed", failing(ingest.ErrSideEffect), signed(good), 503, shapeAnswer},
		{"webhook deadline exceeded", stuck, signed(good), 503, shapeAnswer},
		{"webhook sender gone", httpapi.Webhook(stuckDoor{}, v, log, 32<<10), gone, 499, shapeAnswer},
		{"webhook bad envelope", hooks, signed(`{"type":"batch.succeeded"}`), 400, shapeAnswer},
		{"webhook unsigned", hooks, post(good, nil), 401, shapeAnswer},
		{"webhook GET", hooks, get, 405, shapeAnswer},
		{"webhook too large", hooks, signed(tooBig), 413, shapeAnswer},
		{"webhook ledger down", failing(fmt.Errorf("%w: commit: connection refused", ingest.ErrUnavailable)), signed(good), 503, shapeAnswer},
		{"webhook stopping", httpapi.Webhook(drained, v, log, 32<<10), signed(good), 503, shapeAnswer},
		{"register created", register, post(`{"name":"batches/reply-r"}`, nil), 201, shapeAnswer},
		{"register known", register, post(`{"name":"batches/reply-r"}`, nil), 200, shapeAnswer},
		{"register invalid JSON", register, post(`{"name":`, nil), 400, shapeAnswer},
		{"register invalid name", register, post(`{"name":"jobs/reply"}`, nil), 400, shapeAnswer},
		{"register invalid kind", register, post(`{"name":"batches/reply-k","kind":"film"}`, nil), 400, shapeAnswer},
		{"register invalid metadata", register, post(`{"name":"batches/reply-m","metadata":{"v":"`+strings.Repeat("x", ledger.MaxMetadataBytes)+`"}}`, nil), 400, shapeAnswer},
		{"register GET", register, get, 405, shapeAnswer},
		{"register too large", register, post(strings.Repeat(" ", 2*ledger.MaxMetadataBytes+1), nil), 413, shapeAnswer},
		{"register ledger down", httpapi.Register(failingDoor{fmt.Errorf("%w: commit: connection refused", ingest.ErrUnavailable)}, log), post(`{"name":"batches/reply-r"}`, nil), 503, shapeAnswer},
		{"register stopping", httpapi.Register(drained, log), post(`{"name":"batches/reply-r"}`, nil), 503, shapeAnswer},
		{"intent recorded", intents, post(record, nil), 201, shapeIntent},
		{"intent known", intents, post(record, nil), 200, shapeIntent},
		{"intent mismatch", intents, post(strings.Replace(record, "models/m", "models/n", 1), nil), 409, shapeAnswer},
		{"intent invalid key", intents, post(`{"intent":"a b","kind":"batch"}`, nil), 400, shapeAnswer},
		{"intent metadata of the wrong type", intents, post(`{"intent":"reply-t","kind":"batch","metadata":"x"}`, nil), 400, shapeAnswer},
		{"intent bind unknown", intents, post(`{"name":"batches/reply-b","intent":"reply-nobody"}`, nil), 404, shapeAnswer},
		{"intent bind with metadata", intents, post(`{"name":"batches/reply-b","intent":"reply-k","metadata":{}}`, nil), 400, shapeAnswer},
		{"intent bound", intents, post(`{"name":"batches/reply-b","intent":"reply-k"}`, nil), 201, shapeIntent},
		{"intent bound again", intents, post(`{"name":"batches/reply-b","intent":"reply-k"}`, nil), 200, shapeIntent},
		{"intent bound elsewhere", intents, post(`{"name":"batches/reply-c","intent":"reply-k"}`, nil), 409, shapeAnswer},
		{"reconcile pass", httpapi.Reconcile(rec, log, 0, nil), post("", nil), 200, shapeSummary},
		{"reconcile GET", httpapi.Reconcile(rec, log, 0, nil), get, 405, shapeAnswer},
		{"reconcile ledger down", httpapi.Reconcile(rec, log, 0, nil), ended, 503, shapeSummary},
		{"reconcile bad shard request", httpapi.Reconcile(rec, log, 0, nil, httpapi.WithShardPasses(&passes{})), post(`{"message":{}}`, nil), 400, shapeAnswer},
		{"action replayed", acts, act("replay", "batches/reply"), 200, shapeAction},
		{"action not an action request", acts, post(`{"action":"replay","operation":"batches/reply","actor":"a","x":1}`, nil), 400, shapeAction},
		{"action unknown", acts, act("explode", "batches/reply"), 400, shapeAction},
		{"action unknown operation", acts, act("replay", "batches/reply-nowhere"), 404, shapeAction},
		{"action replay of a pending operation", acts, act("replay", "batches/reply-r"), 409, shapeAction},
		{"action nothing owed", acts, act("publish-now", "batches/reply"), 409, shapeAction},
		{"action no Gemini key", acts, act("check-now", "batches/reply-r"), 409, shapeAction},
		{"action already settled", actAs(action.Result{Outcome: "refused", Reason: action.ReasonAlreadySettled}), act("check-now", "batches/reply"), 409, shapeAction},
		{"action claim held", actAs(action.Result{Outcome: "refused", Reason: action.ReasonClaimHeld}), act("publish-now", "batches/reply"), 409, shapeAction},
		{"action fetch error", actAs(action.Result{Outcome: "error", Reason: "fetch-error"}), act("check-now", "batches/reply-r"), 503, shapeAction},
		{"action ingest error", actAs(action.Result{Outcome: "error", Reason: "ingest-error"}), act("check-now", "batches/reply-r"), 503, shapeAction},
		{"admin token missing", httpapi.RequireBearer(token, log, register), post(`{"name":"batches/reply-a"}`, nil), 401, shapeAnswer},
		{"admin token wrong", httpapi.RequireBearer(token, log, register), post(`{"name":"batches/reply-a"}`, bearer("wrong-token-0123456789")), 401, shapeAnswer},
		{"admin token right", httpapi.RequireBearer(token, log, register), post(`{"name":"batches/reply-a"}`, bearer(token)), 201, shapeAnswer},
		{"another site's browser", httpapi.SameOrigin(log, register), post(`{"name":"batches/reply-x"}`, http.Header{"Sec-Fetch-Site": {"cross-site"}}), 403, shapeAnswer},
		{"healthz", httpapi.Healthz(), get, 200, shapeHealth},
	} {
		w := httptest.NewRecorder()
		c.h.ServeHTTP(w, c.req())
		if w.Code != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, w.Code, c.status, w.Body)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q, want application/json", c.name, ct)
		}
		wantRetry := ""
		if w.Code == http.StatusServiceUnavailable {
			wantRetry = "30"
		}
		if got := w.Header().Get("Retry-After"); got != wantRetry {
			t.Errorf("%s (%d): Retry-After %q, want %q", c.name, w.Code, got, wantRetry)
		}
		if err := checkShape(w.Body.Bytes(), c.shape); err != nil {
			t.Errorf("%s: body %q: %v", c.name, w.Body, err)
		}
		if c.shape == shapeAnswer || c.shape == shapeIntent || c.shape == shapeAction {
			var a httpapi.Answer
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			spec, ok := table[a.Reason]
			switch {
			case ok:
				produced[a.Reason] = true
				if w.Code != spec.Status || a.Outcome != spec.Outcome {
					t.Errorf("%s: %d %s %s, the table says %d %s", c.name, w.Code, a.Outcome, a.Reason, spec.Status, spec.Outcome)
				}
			case w.Code >= 400:
				t.Errorf("%s: refusal %d with reason %q, a kind not in the table", c.name, w.Code, a.Reason)
			}
		}
		switch w.Code {
		case http.StatusUnauthorized:
			if strings.HasPrefix(c.name, "admin") && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: WWW-Authenticate %q", c.name, w.Header().Get("WWW-Authenticate"))
			}
		case http.StatusMethodNotAllowed:
			if got := w.Header().Get("Allow"); got != http.MethodPost {
				t.Errorf("%s: Allow %q, want POST", c.name, got)
			}
		}
	}
	for k := range table {
		if !produced[k] {
			t.Errorf("kind %q is in the table but no request here was answered with it", k)
		}
	}
}

// verifierFunc is a Verifier that fails every delivery with err(): one
// whose error is not a *webhook.Error.
type verifierFunc func() error

func (f verifierFunc) Verify(context.Context, http.Header, []byte) (webhook.Verified, error) {
	return webhook.Verified{}, f()
}

// stuckDoor never finishes an ingest before the request's context ends.
type stuckDoor struct{}

func (stuckDoor) Ingest(ctx context.Context, _ event.Event) (ingest.Result, error) {
	<-ctx.Done()
	return ingest.Result{}, context.Cause(ctx)
}

// checkShape decodes body as exactly one JSON object of the given shape,
// with no field the shape lacks, and, for an answer, every field the
// contract names.
func checkShape(body []byte, shape string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	switch shape {
	case shapeAnswer:
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(body, &raw); err != nil {
			return err
		}
		for _, k := range []string{"outcome", "reason", "operation"} {
			if _, ok := raw[k]; !ok {
				return fmt.Errorf("no %q field", k)
			}
		}
		var a httpapi.Answer
		return dec.Decode(&a)
	case shapeIntent:
		var a httpapi.IntentAnswer
		if err := dec.Decode(&a); err != nil {
			return err
		}
		if a.Intent == nil || a.Intent.Key == "" || a.Intent.State == "" || a.Intent.CreatedAt.IsZero() {
			return fmt.Errorf("no intent status in %+v", a)
		}
		return nil
	case shapeAction:
		var r action.Result
		if err := dec.Decode(&r); err != nil {
			return err
		}
		if r.Outcome == "" {
			return fmt.Errorf("no outcome in %+v", r)
		}
		return nil
	case shapeSummary:
		var s reconcile.Summary
		return dec.Decode(&s)
	default:
		var h struct {
			Status string `json:"status"`
		}
		if err := dec.Decode(&h); err != nil {
			return err
		}
		if h.Status != "ok" {
			return fmt.Errorf("status %q, want ok", h.Status)
		}
		return nil
	}
}
