package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// Shapes of a JSON answer's body.
const (
	shapeAnswer  = "answer"  // {"outcome","reason","operation"[,"detail"]} (CONTRACT.md §3, §5)
	shapeSummary = "summary" // the reconcile summary (CONTRACT.md §4)
	shapeHealth  = "health"  // {"status":"ok"}
)

// TestEveryJSONAnswer: every JSON-answering endpoint (Webhook, Register,
// Reconcile, the admin token's 401s, /healthz), in each of its status
// classes, answers Content-Type application/json with a body of its
// documented shape, and Retry-After: 30 exactly when the status is 503.
func TestEveryJSONAnswer(t *testing.T) {
	t.Parallel()
	log := logging.Discard()
	clock := func() time.Time { return now }
	secret := webhooktest.NewSecret()
	v, err := webhook.NewVerifier(webhook.Config{Secrets: []string{secret}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	newDoor := func(store ledger.Ledger) *ingest.Door {
		d, err := ingest.New(ingest.Config{Store: store, Sink: &testutil.Recorder{}, Log: log, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	store := testutil.MemLedger(t)
	door := newDoor(store)
	// A drained door refuses every call as the ledger being unavailable:
	// the real 503 path of Webhook and Register.
	drained := newDoor(testutil.MemLedger(t))
	if err := drained.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(reconcile.Config{Ledger: store, Door: door, Log: log, Now: clock, StuckAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const token = "0123456789abcdef-admin-token"
	hooks := httpapi.Webhook(door, v, log, 32<<10)
	register := httpapi.Register(door, log)

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

	for _, c := range []struct {
		name   string
		h      http.Handler
		req    func() *http.Request
		status int
		shape  string
	}{
		{"webhook applied", hooks, signed(good), 200, shapeAnswer},
		{"webhook bad envelope", hooks, signed(`{"type":"batch.succeeded"}`), 400, shapeAnswer},
		{"webhook unsigned", hooks, post(good, nil), 401, shapeAnswer},
		{"webhook GET", hooks, get, 405, shapeAnswer},
		{"webhook too large", hooks, signed(tooBig), 413, shapeAnswer},
		{"webhook ledger down", httpapi.Webhook(drained, v, log, 32<<10), signed(good), 503, shapeAnswer},
		{"register created", register, post(`{"name":"batches/reply-r"}`, nil), 201, shapeAnswer},
		{"register known", register, post(`{"name":"batches/reply-r"}`, nil), 200, shapeAnswer},
		{"register invalid JSON", register, post(`{"name":`, nil), 400, shapeAnswer},
		{"register GET", register, get, 405, shapeAnswer},
		{"register too large", register, post(strings.Repeat(" ", 2*ledger.MaxMetadataBytes+1), nil), 413, shapeAnswer},
		{"register ledger down", httpapi.Register(drained, log), post(`{"name":"batches/reply-r"}`, nil), 503, shapeAnswer},
		{"reconcile pass", httpapi.Reconcile(rec, log, 0, nil), post("", nil), 200, shapeSummary},
		{"reconcile GET", httpapi.Reconcile(rec, log, 0, nil), get, 405, shapeAnswer},
		{"reconcile ledger down", httpapi.Reconcile(rec, log, 0, nil), ended, 503, shapeSummary},
		{"admin token missing", httpapi.RequireBearer(token, log, register), post(`{"name":"batches/reply-a"}`, nil), 401, shapeAnswer},
		{"admin token wrong", httpapi.RequireBearer(token, log, register), post(`{"name":"batches/reply-a"}`, bearer("wrong-token-0123456789")), 401, shapeAnswer},
		{"admin token right", httpapi.RequireBearer(token, log, register), post(`{"name":"batches/reply-a"}`, bearer(token)), 201, shapeAnswer},
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
