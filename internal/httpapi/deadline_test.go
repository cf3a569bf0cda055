package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/metrics"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// frozenStore is a ledger that hangs while frozen, as a frozen Firestore
// emulator did: reads and commits wait until thawed (or their context
// ends). Fault injection: the real stores cannot hang on demand.
type frozenStore struct {
	*claims.Ledger
	thaw     chan struct{}
	thawOnce sync.Once
	blocked  atomic.Int32 // calls waiting now
	entered  chan struct{}
}

func newFrozenStore(l ledger.Ledger) *frozenStore {
	return &frozenStore{Ledger: claims.New(l), thaw: make(chan struct{}), entered: make(chan struct{}, 1)}
}

func (f *frozenStore) unfreeze() { f.thawOnce.Do(func() { close(f.thaw) }) }

func (f *frozenStore) wait(ctx context.Context) error {
	f.blocked.Add(1)
	defer f.blocked.Add(-1)
	select {
	case f.entered <- struct{}{}:
	default:
	}
	select {
	case <-f.thaw:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *frozenStore) GetOperation(ctx context.Context, id string) (ledger.Operation, error) {
	if err := f.wait(ctx); err != nil {
		return ledger.Operation{}, err
	}
	return f.Ledger.GetOperation(ctx, id)
}

func (f *frozenStore) CommitOperation(ctx context.Context, op ledger.Operation, c *ledger.Claim) (ledger.Revision, *ledger.Lease, error) {
	if err := f.wait(ctx); err != nil {
		return ledger.Revision{}, nil, err
	}
	return f.Ledger.CommitOperation(ctx, op, c)
}

type answered struct {
	status     int
	retryAfter string
	a          httpapi.Answer
	err        error
}

// TestWebhookDeadlineWhileTheStoreHangs: with the store frozen, a delivery
// is answered 503 deadline-exceeded with Retry-After once the webhook
// deadline has passed, while the door's work still waits on the store. Once
// the store answers again, the redelivery is answered 200, and the
// operation is published exactly once: the detached work and the
// redelivery do not both publish.
func TestWebhookDeadlineWhileTheStoreHangs(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		frozen := newFrozenStore(s)
		rec := &testutil.Recorder{}
		door, err := ingest.New(ingest.Config{Store: frozen, Sink: rec, Log: logging.Discard(), Now: time.Now})
		if err != nil {
			t.Fatal(err)
		}
		secret := webhooktest.NewSecret()
		v, err := webhook.NewVerifier(webhook.Config{Secrets: []string{secret}, Now: time.Now})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(httpapi.Webhook(door, v, logging.Discard(), 32<<10, httpapi.WithDeadline(200*time.Millisecond)))
		t.Cleanup(srv.Close)
		t.Cleanup(frozen.unfreeze) // runs first: srv.Close waits for the handlers

		body := []byte(`{"type":"batch.succeeded","version":"v1","timestamp":"2026-12-29T09:20:00Z","data":{"id":"batches/frozen","output_file_uri":"gs://b/frozen.jsonl"}}`)
		deliver := func() answered {
			req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
			if err != nil {
				return answered{err: err}
			}
			req.Header = webhooktest.Headers("msg_frozen", time.Now(), body, secret)
			resp, err := srv.Client().Do(req)
			if err != nil {
				return answered{err: err}
			}
			defer resp.Body.Close()
			got := answered{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
			got.err = json.NewDecoder(resp.Body).Decode(&got.a)
			return got
		}

		first := make(chan answered, 1)
		go func() { first <- deliver() }()
		var got answered
		select {
		case got = <-first:
		case <-time.After(30 * time.Second): // a bound on waiting, not a timing assertion
			t.Fatal("no answer while the store is frozen: the webhook waits as long as the store hangs")
		}
		// The answer came while the store was frozen: the door's read is
		// still waiting on it.
		<-frozen.entered
		if n := frozen.blocked.Load(); n == 0 {
			t.Fatal("no store call is waiting: the deadline was not what ended the request")
		}
		if got.err != nil || got.status != http.StatusServiceUnavailable || got.a.Reason != "deadline-exceeded" ||
			got.a.Outcome != "error" || got.retryAfter == "" {
			t.Fatalf("answer while frozen: %d %+v Retry-After %q (%v); want 503 deadline-exceeded with Retry-After",
				got.status, got.a, got.retryAfter, got.err)
		}
		if got.a.Operation != "batches/frozen" {
			t.Errorf("answer names operation %q, want batches/frozen", got.a.Operation)
		}
		if n := len(rec.All()); n != 0 {
			t.Fatalf("%d messages published while the store was frozen", n)
		}

		// Gemini redelivers until answered 2xx; the work from the first
		// delivery goes on meanwhile, so a redelivery may still find it
		// running (it then waits on it, or answers 503 again).
		frozen.unfreeze()
		for attempt := 1; ; attempt++ {
			got = deliver()
			if got.err == nil && got.status == http.StatusOK {
				break
			}
			if got.err != nil || got.status != http.StatusServiceUnavailable || got.a.Reason != "deadline-exceeded" || attempt == 100 {
				t.Fatalf("redelivery %d after the thaw: %d %+v (%v)", attempt, got.status, got.a, got.err)
			}
		}
		if got.a.Outcome != string(ingest.OutcomeCompleted) && got.a.Outcome != string(ingest.OutcomeDuplicate) {
			t.Fatalf("redelivery answered %+v, want completed or duplicate", got.a)
		}
		// Whatever still runs detached finishes before counting.
		if err := door.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if per := rec.PerKey(); len(rec.All()) != 1 || per["gemini:batches/frozen"] != 1 {
			t.Fatalf("published %d messages (%v), want exactly one for batches/frozen", len(rec.All()), per)
		}
	})
}

// TestSenderGoneIsNotALedgerFailure: a sender that hangs up while the door
// waits on the store is no store outage. Its delivery is logged at WARNING
// as 499 sender-gone and counted under status 499, never as 503
// ledger-unavailable at ERROR (which pages no one, but reads as an outage
// in the logs and lrosink_webhook_requests_total). The door's work goes on
// detached and completes once the store answers.
func TestSenderGoneIsNotALedgerFailure(t *testing.T) {
	t.Parallel()
	frozen := newFrozenStore(testutil.MemLedger(t))
	rec := &testutil.Recorder{}
	door, err := ingest.New(ingest.Config{Store: frozen, Sink: rec, Log: logging.Discard(), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	secret := webhooktest.NewSecret()
	v, err := webhook.NewVerifier(webhook.Config{Secrets: []string{secret}, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	m := metrics.New()
	// A deadline no test reaches: only the sender can end this request.
	srv := httptest.NewServer(m.Webhook(httpapi.Webhook(door, v, logging.New(logs, slog.LevelDebug, ""), 32<<10,
		httpapi.WithDeadline(time.Hour))))
	t.Cleanup(srv.Close)
	t.Cleanup(frozen.unfreeze) // runs first: srv.Close waits for the handlers

	body := []byte(`{"type":"batch.succeeded","version":"v1","timestamp":"2026-12-29T09:20:00Z","data":{"id":"batches/gone"}}`)
	ctx, hangUp := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = webhooktest.Headers("msg_gone", time.Now(), body, secret)
	sent := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		sent <- err
	}()
	<-frozen.entered // the door waits on the store
	hangUp()
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Fatalf("the sender's request ended with %v, want its own cancellation", err)
	}
	srv.Close() // waits for the handler's answer and log line

	answers := logs.String()
	if n := countLines(answers, `"message":"webhook answer"`, `"severity":"WARNING"`, `"status":499`, `"reason":"sender-gone"`,
		`"operation":"batches/gone"`, `"delivery_id":"msg_gone"`); n != 1 {
		t.Errorf("%d WARNING webhook answer lines 499 sender-gone, want 1:\n%s", n, answers)
	}
	if strings.Contains(answers, "ledger-unavailable") || strings.Contains(answers, `"severity":"ERROR"`) {
		t.Errorf("a sender that hung up is logged as a ledger failure:\n%s", answers)
	}
	for status, want := range map[string]float64{"499": 1, "503": 0} {
		if got := webhookRequests(t, m, status); got != want {
			t.Errorf("lrosink_webhook_requests_total{status=%q} = %v, want %v", status, got, want)
		}
	}

	// The work it started was not lost with it.
	frozen.unfreeze()
	if err := door.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if per := rec.PerKey(); per["gemini:batches/gone"] != 1 {
		t.Fatalf("published %v, want one message for batches/gone", per)
	}
}

// webhookRequests is lrosink_webhook_requests_total{status} as m serves it.
func webhookRequests(t *testing.T, m *metrics.Metrics, status string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "lrosink_webhook_requests_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "status" && l.GetValue() == status {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
