package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// gate holds door work at the after-commit boundary (state and claim
// committed, nothing published) until released: in-flight work a test can
// see and let go.
type gate struct {
	entered, release chan struct{}
	once             sync.Once
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) At(_ context.Context, p ingest.FaultPoint, _ string) error {
	if p == ingest.FaultAfterCommit {
		g.once.Do(func() { close(g.entered) })
		<-g.release
	}
	return nil
}

// await receives from c, failing (not hanging the package's tests until
// their timeout) if nothing comes within 30 s.
func await[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(30 * time.Second): // bounds a hang
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// eachServeStore runs f with a serve environment on each store.
func eachServeStore(t *testing.T, f func(t *testing.T, vars map[string]string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, storeEnv(t)) })
	t.Run("firestore", func(t *testing.T) {
		emutest.FirestoreHost(t)
		f(t, map[string]string{"LROSINK_STORE": "firestore", "GOOGLE_CLOUD_PROJECT": emutest.ProjectID(t)})
	})
}

// openTestLedger opens the ledger serve used, once serve has stopped.
func openTestLedger(t *testing.T, vars map[string]string) ledger.Ledger {
	t.Helper()
	e := &env{getenv: mapEnv(vars)}
	l, _, closeFn, err := e.openReadLedger(t.Context(), command.NewFlagSet("test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeFn)
	return l
}

const drainOpID = "gemini:batches%2Fdrain1"

// stopWithWorkInFlight starts serve with g on its door and results in a
// file, delivers a completion whose work g holds, hangs up (as a sender that
// times out does: the work goes on detached) and asks serve to stop. It
// returns the server, a channel with serve's exit code, and the results file.
func stopWithWorkInFlight(t *testing.T, vars map[string]string, g *gate, opts []Option) (*server, chan int, string) {
	t.Helper()
	secret := webhooktest.NewSecret()
	results := filepath.Join(t.TempDir(), "results.jsonl")
	vars["LROSINK_WEBHOOK_SECRETS"], vars["LROSINK_RESULTS"] = secret, "file:"+results
	s := startServeWith(t, vars, append([]Option{WithFaults(g)}, opts...))
	ctx, hangUp := context.WithCancel(t.Context())
	answered := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(delivery(t, s.base, secret, "drain1", "msg_drain1").WithContext(ctx))
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	await(t, "the delivery's work to reach the door's after-commit point", g.entered)
	hangUp()
	if err := <-answered; err == nil {
		t.Fatal("the delivery was answered although its work is held")
	}
	exited := make(chan int, 1)
	go func() { exited <- s.stop() }()
	return s, exited, results
}

// TestServeDrainsTheDoorBeforeClosing: door work in flight when serve is
// asked to stop completes (publish, then DONE) before the sink and the
// ledger are closed.
func TestServeDrainsTheDoorBeforeClosing(t *testing.T) {
	eachServeStore(t, func(t *testing.T, vars map[string]string) {
		g := newGate()
		s, exited, results := stopWithWorkInFlight(t, vars, g, nil)
		waitFor(t, "serve to drain the door (or exit)", func() bool {
			return len(exited) > 0 || strings.Contains(s.stderr.String(), `"message":"draining the ingest door"`)
		})
		close(g.release)
		if code := <-exited; code != command.ExitOK {
			t.Fatalf("serve exit %d:\n%s", code, s.stderr.String())
		}
		b, err := os.ReadFile(results)
		if err != nil {
			t.Fatal(err)
		}
		if lines := resultLines(t, string(b)); len(lines) != 1 || lines[0].Operation != "batches/drain1" {
			t.Fatalf("results %+v, want the one held completion", lines)
		}
		c, err := openTestLedger(t, vars).GetClaim(t.Context(), drainOpID)
		if err != nil || c.Status != ledger.ClaimDone {
			t.Fatalf("claim %+v %v, want DONE", c, err)
		}
		for _, l := range strings.Split(s.stderr.String(), "\n") {
			if strings.Contains(l, `"message":"ingest decision"`) && strings.Contains(l, `"severity":"ERROR"`) || strings.Contains(l, "closed") {
				t.Errorf("stderr: %s", l)
			}
		}
	})
}

// TestServeDrainIsBounded: work still held when the shutdown budget runs
// out does not keep serve from stopping; serve closes anyway, says so, and
// the claim is seized after its lease.
func TestServeDrainIsBounded(t *testing.T) {
	eachServeStore(t, func(t *testing.T, vars map[string]string) {
		g := newGate()
		// The held work wakes when the test ends and fails on closed clients.
		t.Cleanup(func() { close(g.release) })
		budget := func(e *env) { e.shutdownTimeout = 2 * time.Second }
		s, exited, _ := stopWithWorkInFlight(t, vars, g, []Option{budget})
		if code := <-exited; code != command.ExitError || !strings.Contains(s.stderr.String(), "drain: 1 in flight") {
			t.Fatalf("serve exit %d, want %d naming the work cut off:\n%s", code, command.ExitError, s.stderr.String())
		}
		l := openTestLedger(t, vars)
		ctx := t.Context()
		if c, err := l.GetClaim(ctx, drainOpID); err != nil || c.Status != ledger.ClaimHeld {
			t.Fatalf("claim %+v %v, want CLAIMED", c, err)
		}
		rec := &recorder{}
		afterLease := func() time.Time { return time.Now().Add(11 * time.Minute) }
		d, err := ingest.New(ingest.Config{Store: claims.New(l), Sink: rec, Log: logging.Discard(), Now: afterLease})
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.RetryClaim(ctx, drainOpID)
		if err != nil || r.Outcome != ingest.OutcomeRecovered || !r.Published || len(rec.All()) != 1 {
			t.Fatalf("retry after the lease: %+v %v", r, err)
		}
		if c, err := l.GetClaim(ctx, drainOpID); err != nil || c.Status != ledger.ClaimDone {
			t.Fatalf("claim %+v %v, want DONE", c, err)
		}
	})
}

// TestServeStopEndsAPassInFlight: SIGTERM while serve's reconcile pass waits
// on a Gemini that does not answer. The pass ends at once, partial (as the
// Reconcile function's does), leaving the stop's budget to drain the door
// and close, and serve exits 0. The loop's pass once ignored the stop: it
// held the whole budget, was then cancelled and logged as failed, the drain
// found its budget spent, and serve exited 1.
func TestServeStopEndsAPassInFlight(t *testing.T) {
	var asked sync.Once
	askedCh, release := make(chan struct{}), make(chan struct{})
	gemini := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Do(func() { close(askedCh) })
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(gemini.Close)
	t.Cleanup(func() { close(release) }) // runs first
	vars := storeEnv(t)
	vars["GEMINI_API_KEY"] = "test-key"
	vars["GOOGLE_GEMINI_BASE_URL"] = gemini.URL
	// A budget shorter than the default, so that the pass holding it
	// (the defect) fails fast, yet ample for a stop with nothing to drain.
	budget := func(e *env) { e.shutdownTimeout = 4 * time.Second }
	s := startServeWith(t, vars, []Option{budget})
	await(t, "the start-up pass to call Gemini", askedCh)

	if code := s.stop(); code != 0 {
		t.Fatalf("serve exit %d, want 0:\n%s", code, s.stderr.String())
	}
	var partial bool
	for _, l := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(l, "reconcile pass failed") {
			t.Errorf("a pass ended by the stop was logged as failed: %s", l)
		}
		partial = partial || strings.Contains(l, `"message":"reconcile pass"`) && strings.Contains(l, `"partial":true`)
	}
	if !partial {
		t.Errorf("no partial reconcile pass line:\n%s", s.stderr.String())
	}
}

// TestServeStopAnswersWaitingDeliveries: a delivery whose work is still in
// flight halfway through serve's stop is answered then, 503 stopping with
// Retry-After, instead of holding the server's shutdown for up to the
// webhook deadline (10 s, past the 8 s budget); its work goes on, the drain
// waits for it (one results line, claim DONE), and serve exits 0.
func TestServeStopAnswersWaitingDeliveries(t *testing.T) {
	g := newGate()
	vars := storeEnv(t)
	secret := webhooktest.NewSecret()
	results := filepath.Join(t.TempDir(), "results.jsonl")
	vars["LROSINK_WEBHOOK_SECRETS"], vars["LROSINK_RESULTS"] = secret, "file:"+results
	// The default budget (8 s): the answer comes at 3.75 s, and the drain
	// then has until 7.5 s for a publish and a commit, also on a loaded
	// machine.
	s := startServeWith(t, vars, []Option{WithFaults(g)})
	type answer struct {
		status            int
		reason, op, retry string
		err               error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(delivery(t, s.base, secret, "drain1", "msg_drain1"))
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var a struct{ Reason, Operation string }
		err = json.NewDecoder(resp.Body).Decode(&a)
		answered <- answer{resp.StatusCode, a.Reason, a.Operation, resp.Header.Get("Retry-After"), err}
	}()
	await(t, "the delivery's work to reach the door's after-commit point", g.entered)
	exited := make(chan int, 1)
	go func() { exited <- s.stop() }()
	a := await(t, "the answer to the delivery whose work is held", answered)
	if a.err != nil || a.status != http.StatusServiceUnavailable || a.reason != "stopping" || a.op != "batches/drain1" || a.retry == "" {
		t.Fatalf("answer while stopping: %+v; want 503 stopping with Retry-After", a)
	}
	close(g.release)
	if code := <-exited; code != command.ExitOK {
		t.Fatalf("serve exit %d:\n%s", code, s.stderr.String())
	}
	b, err := os.ReadFile(results)
	if err != nil {
		t.Fatal(err)
	}
	if lines := resultLines(t, string(b)); len(lines) != 1 {
		t.Fatalf("results %+v, want the one completion drained", lines)
	}
	if c, err := openTestLedger(t, vars).GetClaim(t.Context(), drainOpID); err != nil || c.Status != ledger.ClaimDone {
		t.Fatalf("claim %+v %v, want DONE", c, err)
	}
}
