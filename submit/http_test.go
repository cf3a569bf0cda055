package submit

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/app/apptest"
	"github.com/lrosink/lrosink/internal/config"
)

// faults answers the next n requests 503 ledger-unavailable (Retry-After
// 1), as the Register function does while its ledger is down, and counts
// the requests: a real ledger cannot be made to fail on demand.
type faults struct {
	mu             sync.Mutex
	fail, requests int
	next           http.Handler
}

func (f *faults) failNext(n int) { f.mu.Lock(); defer f.mu.Unlock(); f.fail = n }
func (f *faults) count() int     { f.mu.Lock(); defer f.mu.Unlock(); return f.requests }

func (f *faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests++
	fail := f.fail > 0
	if fail {
		f.fail--
	}
	f.mu.Unlock()
	if fail {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"outcome":"error","reason":"ledger-unavailable","operation":""}`))
		return
	}
	f.next.ServeHTTP(w, r)
}

// httpHarness is the HTTP Intents against lrosink's own Register function
// (apptest: serve's handlers over a SQLite ledger) over real HTTP, with its
// waits recorded instead of slept; edit adjusts the configuration.
func httpHarness(t *testing.T, edit func(*config.Config), client *http.Client) (*httpIntents, *faults, *[]time.Duration) {
	t.Helper()
	f := &faults{}
	srv := apptest.Start(t, apptest.Options{Config: edit, Wrap: func(h http.Handler) http.Handler { f.next = h; return f }})
	in := HTTP(srv.RegisterURL(), client).(*httpIntents)
	var mu sync.Mutex
	var slept []time.Duration
	in.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		slept = append(slept, d)
		return ctx.Err()
	}
	return in, f, &slept
}

var testIntent = Intent{Key: "int_0123456789abcdef0123", Kind: KindVideo, Model: "models/veo-3.0-generate-001",
	Metadata: map[string]any{"job_id": json.Number("12345678901234567890"), "nested": map[string]any{"a": "b"}}}

// TestHTTPRecordAndBind walks the protocol of CONTRACT.md §5: recorded,
// known, mismatch; bind, bound again, bound elsewhere, unknown, wrong kind.
func TestHTTPRecordAndBind(t *testing.T) {
	in, _, _ := httpHarness(t, func(c *config.Config) { c.IntentGrace = 10 * time.Minute }, nil)
	ctx := t.Context()
	st, err := in.Record(ctx, testIntent)
	if err != nil || !st.Recorded || st.State != StateUnbound || st.Key != testIntent.Key || st.CreatedAt.IsZero() ||
		st.GraceUntil.Sub(st.CreatedAt) != 10*time.Minute || st.Metadata["job_id"] != json.Number("12345678901234567890") {
		t.Fatalf("record: %+v %v", st, err)
	}
	st, err = in.Record(ctx, testIntent)
	if err != nil || st.Recorded || st.State != StateUnbound {
		t.Fatalf("record again: %+v %v; want known, not recorded", st, err)
	}
	other := testIntent
	other.Model = "models/veo-2.0-generate-001"
	_, err = in.Record(ctx, other)
	var re *RegisterError
	if !errors.Is(err, ErrIntentMismatch) || !errors.As(err, &re) || re.Status != http.StatusConflict || !strings.Contains(err.Error(), testIntent.Key) {
		t.Fatalf("record with other fields: %v; want 409 intent-mismatch naming the key", err)
	}
	name := "models/veo-3.0-generate-001/operations/op1"
	st, err = in.Bind(ctx, testIntent.Key, name)
	if err != nil || st.State != StateBound || st.Name != "operations/op1" || st.APIName != name || st.BoundBy != "submit" || st.BoundAt.IsZero() {
		t.Fatalf("bind: %+v %v", st, err)
	}
	if st, err = in.Bind(ctx, testIntent.Key, name); err != nil || st.State != StateBound {
		t.Fatalf("bind again: %+v %v", st, err)
	}
	if st, err = in.Record(ctx, testIntent); err != nil || st.State != StateBound || st.APIName != name {
		t.Fatalf("record a bound intent: %+v %v", st, err)
	}
	if _, err = in.Bind(ctx, testIntent.Key, "models/veo-3.0-generate-001/operations/op2"); !errors.Is(err, ErrIntentBoundElsewhere) {
		t.Errorf("bind elsewhere: %v; want intent-bound-elsewhere", err)
	}
	if _, err = in.Bind(ctx, "int_unknown", name); !errors.Is(err, ErrIntentUnknown) || !errors.As(err, &re) || re.Status != http.StatusNotFound {
		t.Errorf("bind unknown: %v; want 404 intent-unknown", err)
	}
	if _, err = in.Bind(ctx, testIntent.Key, "batches/b1"); !errors.As(err, &re) || re.Status != http.StatusBadRequest || re.Reason != "invalid-name" {
		t.Errorf("bind another kind's name: %v; want 400 invalid-name", err)
	}
	bad := testIntent
	bad.Key = "bad key"
	if _, err = in.Record(ctx, bad); !errors.Is(err, ErrInvalidIntent) {
		t.Errorf("bad key: %v; want invalid-intent", err)
	}
}

// TestHTTPRetriesWhatMayPass: a 503 is retried after the Retry-After it
// names (capped), up to 4 tries; a refusal is not retried.
func TestHTTPRetriesWhatMayPass(t *testing.T) {
	in, reg, slept := httpHarness(t, nil, nil)
	reg.failNext(2)
	if st, err := in.Record(t.Context(), testIntent); err != nil || !st.Recorded {
		t.Fatalf("record after two 503s: %+v %v", st, err)
	}
	if reg.count() != 3 || len(*slept) != 2 || (*slept)[0] < time.Second {
		t.Errorf("%d requests, waits %v; want 3 requests and two waits of at least the Retry-After (1s)", reg.count(), *slept)
	}
	reg.failNext(10)
	_, err := in.Bind(t.Context(), testIntent.Key, "operations/x")
	var re *RegisterError
	if !errors.As(err, &re) || re.Status != http.StatusServiceUnavailable || re.Reason != "ledger-unavailable" {
		t.Fatalf("bind against a lasting 503: %v", err)
	}
	if reg.count() != 3+4 {
		t.Errorf("%d requests in all, want 4 tries of the bind", reg.count())
	}
	reg.failNext(0)
	n := reg.count()
	if _, err := in.Bind(t.Context(), "int_nothing", "operations/x"); !errors.Is(err, ErrIntentUnknown) || reg.count() != n+1 {
		t.Errorf("a 404 was retried: %v, %d requests", err, reg.count()-n)
	}
}

// TestHTTPBearer: the admin token goes as a Bearer header through
// BearerTransport; without it the 401 says what to check.
func TestHTTPBearer(t *testing.T) {
	const token = "0123456789abcdef-token"
	withToken := func(c *config.Config) { c.AdminToken = token }
	in, _, _ := httpHarness(t, withToken, nil)
	_, err := in.Record(t.Context(), testIntent)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "LROSINK_ADMIN_TOKEN") {
		t.Fatalf("without the token: %v", err)
	}
	authed, _, _ := httpHarness(t, withToken, &http.Client{Transport: BearerTransport(token, nil)})
	if st, err := authed.Record(t.Context(), testIntent); err != nil || !st.Recorded {
		t.Fatalf("with the token: %+v %v", st, err)
	}
}

// TestHTTPNotAnIntentServer: a Register function that answers 200 without
// an intent status (one that predates intents) is a clear error, not a
// silent success.
func TestHTTPNotAnIntentServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"outcome":"applied","reason":"first-sighting","operation":"x"}`))
	}))
	t.Cleanup(srv.Close)
	_, err := HTTP(srv.URL, nil).Record(t.Context(), testIntent)
	if err == nil || !strings.Contains(err.Error(), "without an intent status") {
		t.Fatalf("err %v", err)
	}
}
