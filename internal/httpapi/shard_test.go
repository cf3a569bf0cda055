package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/lrosink/lrosink/internal/fanout"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/shard"
)

// passes records which pass the Reconcile function ran: "pass", "range
// LO-HI" or "coordinate".
type passes struct {
	mu   sync.Mutex
	ran  []string
	fail error
}

func (p *passes) note(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ran = append(p.ran, s)
}

func (p *passes) Pass(context.Context) (reconcile.Summary, error) {
	p.note("pass")
	return reconcile.Summary{Checked: 1}, p.fail
}

func (p *passes) PassRange(_ context.Context, r shard.Range) (reconcile.Summary, error) {
	p.note("range " + r.String())
	return reconcile.Summary{Checked: r.Len(), Partial: true}, p.fail
}

func (p *passes) Coordinate(context.Context) (fanout.Result, error) {
	p.note("coordinate")
	return fanout.Result{Summary: reconcile.Summary{ClaimsRetried: 2}, ShardPasses: 4}, p.fail
}

func pushBody(data string) string {
	b, _ := json.Marshal(map[string]any{
		"message":      map[string]any{"data": base64.StdEncoding.EncodeToString([]byte(data)), "messageId": "42"},
		"subscription": "projects/p/subscriptions/lrosink-reconcile-fanout",
	})
	return string(b)
}

func postReconcile(h http.Handler, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
	return w
}

// keys are the top-level fields of a JSON answer.
func keys(t *testing.T, body []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return m
}

// A push of a shard request runs that range's pass, answered 200 with the
// range (a partial pass too: Pub/Sub acks it, the next tick goes on).
func TestReconcileShardRequestRunsItsRange(t *testing.T) {
	p := &passes{}
	h := httpapi.Reconcile(p, logging.Discard(), 0, nil, httpapi.WithShardPasses(p), httpapi.WithCoordinator(p))
	w := postReconcile(h, pushBody(`{"range":"16-32","tick":"2026-11-25T04:00:00Z"}`))
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var a httpapi.ReconcileAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || a.Range != "16-32" || a.Checked != 16 || !a.Partial || a.ShardPasses != 0 {
		t.Fatalf("answer %s (%v)", w.Body, err)
	}
	if len(p.ran) != 1 || p.ran[0] != "range 16-32" {
		t.Fatalf("ran %v, want the range 16-32 only", p.ran)
	}
}

// A plain POST (the Scheduler's, no body) coordinates when fanned out, and
// says how many shard passes it handed out.
func TestReconcileSchedulerCallCoordinates(t *testing.T) {
	p := &passes{}
	h := httpapi.Reconcile(p, logging.Discard(), 0, nil, httpapi.WithShardPasses(p), httpapi.WithCoordinator(p))
	w := postReconcile(h, "")
	var a httpapi.ReconcileAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &a); w.Code != http.StatusOK || err != nil || a.ShardPasses != 4 || a.ClaimsRetried != 2 || a.Range != "" {
		t.Fatalf("%d %s (%v)", w.Code, w.Body, err)
	}
	if len(p.ran) != 1 || p.ran[0] != "coordinate" {
		t.Fatalf("ran %v, want the coordinator", p.ran)
	}
}

// One shard (no coordinator): the Scheduler's call runs today's whole pass
// and its answer is the summary alone, field for field.
func TestReconcileOneShardUnchanged(t *testing.T) {
	for _, body := range []string{"", "{}", "not json"} {
		p := &passes{}
		h := httpapi.Reconcile(p, logging.Discard(), 0, nil, httpapi.WithShardPasses(p))
		w := postReconcile(h, body)
		if w.Code != http.StatusOK || len(p.ran) != 1 || p.ran[0] != "pass" {
			t.Fatalf("body %q: %d, ran %v", body, w.Code, p.ran)
		}
		got := keys(t, w.Body.Bytes())
		want := keys(t, must(json.Marshal(reconcile.Summary{})))
		if len(got) != len(want) {
			t.Errorf("body %q: answer fields %d, want the summary's %d: %s", body, len(got), len(want), w.Body)
		}
		for k := range want {
			if _, ok := got[k]; !ok {
				t.Errorf("answer lacks %q", k)
			}
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// A push that is not a shard request is answered 400 bad-shard-request and
// runs no pass (a nack to Pub/Sub, which dead-letters it after the
// subscription's max delivery attempts).
func TestReconcileBadShardRequestIs400(t *testing.T) {
	p := &passes{}
	h := httpapi.Reconcile(p, logging.Discard(), 0, nil, httpapi.WithShardPasses(p), httpapi.WithCoordinator(p))
	for name, body := range map[string]string{
		"no data":        `{"message":{"messageId":"1"}}`,
		"null message":   `{"message":null}`,
		"not base64":     `{"message":{"data":"***"}}`,
		"range too high": pushBody(`{"range":"60-70"}`),
		"no range":       pushBody(`{"tick":"2026-11-25T04:00:00Z"}`),
		"not a request":  pushBody(`hello`),
	} {
		w := postReconcile(h, body)
		var a httpapi.Answer
		if err := json.Unmarshal(w.Body.Bytes(), &a); w.Code != http.StatusBadRequest || err != nil || a.Reason != "bad-shard-request" || a.Detail == "" {
			t.Errorf("%s: %d %s", name, w.Code, w.Body)
		}
	}
	if len(p.ran) != 0 {
		t.Fatalf("ran %v on bad requests", p.ran)
	}
}

// A shard pass that could not query the ledger is 503: a nack, so Pub/Sub
// redelivers it with backoff.
func TestReconcileShardLedgerDownIs503(t *testing.T) {
	p := &passes{fail: errors.New("ledger down")}
	h := httpapi.Reconcile(p, logging.Discard(), 0, nil, httpapi.WithShardPasses(p))
	w := postReconcile(h, pushBody(`{"range":"0-64"}`))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
}

// Sharded, a body that is neither empty (a tick) nor a push envelope is a
// push gone wrong: 400 (a nack: the subscription dead-letters it), never a
// tick. It used to run the coordinator, hand every range out again and be
// acked.
func TestReconcileMalformedPushIsNotATick(t *testing.T) {
	for name, body := range map[string]string{
		"truncated envelope":          pushBody(`{"range":"0-16"}`)[:40],
		"envelope and trailing bytes": pushBody(`{"range":"0-16"}`) + "}",
		"unwrapped message":           `{"range":"0-16","tick":"2026-11-25T04:00:00Z"}`,
	} {
		p := &passes{}
		h := httpapi.Reconcile(p, logging.Discard(), 0, nil, httpapi.WithShardPasses(p), httpapi.WithCoordinator(p))
		if w := postReconcile(h, body); w.Code != http.StatusBadRequest || len(p.ran) != 0 {
			t.Errorf("%s: answered %d, ran %v; want 400 and no pass", name, w.Code, p.ran)
		}
	}
}
