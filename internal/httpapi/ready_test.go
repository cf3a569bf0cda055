package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestReadyzIgnoresAProberThatHangsUp: the answer is cached for ReadyFor,
// so a probe cut short by one impatient prober would make a healthy store
// look unreachable to every prober after it. The store read runs on its
// own bound, not the prober's.
func TestReadyzIgnoresAProberThatHangsUp(t *testing.T) {
	t.Parallel()
	probe := func(ctx context.Context) error {
		select {
		case <-time.After(50 * time.Millisecond): // a healthy store
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h := httpapi.Readyz(probe)
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/readyz", nil).WithContext(ctx))
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rr.Code != http.StatusOK {
		t.Fatalf("after an impatient prober: %d %s, want 200", rr.Code, rr.Body.String())
	}
}

// readyz asks h once and returns the status code and the body's status and
// detail.
func readyz(t *testing.T, h http.Handler) (int, string, string) {
	t.Helper()
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var body struct{ Status, Detail string }
	if err := json.Unmarshal(rr.Body.Bytes(), &body); err != nil {
		t.Fatalf("/readyz body %q: %v", rr.Body.String(), err)
	}
	if rr.Code == http.StatusServiceUnavailable && rr.Header().Get("Retry-After") == "" {
		t.Error("a 503 from /readyz without Retry-After")
	}
	return rr.Code, body.Status, body.Detail
}

// TestReadyzWhileWritesFail: not ready, with the kind of writes and the
// error, while the latest write of a kind failed; ready again on the next
// write that succeeds or, with no write for ReadyFor, on a probe write,
// tried at most once per ReadyFor. A store that does not answer reads is
// reported first.
func TestReadyzWhileWritesFail(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	var probes atomic.Int64
	var probeErr atomic.Pointer[error]
	probe := func(context.Context) error {
		probes.Add(1)
		if p := probeErr.Load(); p != nil {
			return *p
		}
		return nil
	}
	ledgerWrites := httpapi.NewWrites("ledger", "ledger-writes-failing", nil, clock.Now)
	resultsWrites := httpapi.NewWrites("results", "results-writes-failing", probe, clock.Now)
	h := httpapi.Readyz(func(context.Context) error { return nil }, ledgerWrites, resultsWrites)

	if code, status, _ := readyz(t, h); code != http.StatusOK || status != "ready" {
		t.Fatalf("nothing failed: %d %s", code, status)
	}
	full := errors.New("write results for batches/x to /r.jsonl: no space left on device")
	resultsWrites.Record(full)
	clock.Advance(time.Second)
	resultsWrites.Record(full)
	code, status, detail := readyz(t, h)
	if code != http.StatusServiceUnavailable || status != "results-writes-failing" ||
		detail != "results writes failing since 2026-12-01T12:00:00Z: "+full.Error() {
		t.Fatalf("results writes failing: %d %s %q", code, status, detail)
	}
	// Writes going on (and failing): no probe. Idle for ReadyFor: one.
	clock.Advance(httpapi.ReadyFor - time.Second)
	readyz(t, h)
	if probes.Load() != 0 {
		t.Fatalf("%d probes while writes were being made", probes.Load())
	}
	still := errors.New("no space left on device")
	probeErr.Store(&still)
	clock.Advance(time.Second)
	if code, _, detail := readyz(t, h); code != http.StatusServiceUnavailable || probes.Load() != 1 ||
		!strings.Contains(detail, "a probe write at 2026-12-01T12:00:06Z failed too: no space left on device") {
		t.Fatalf("after ReadyFor idle, a failing probe: %d %q, %d probes", code, detail, probes.Load())
	}
	readyz(t, h)
	clock.Advance(httpapi.ReadyFor - time.Millisecond)
	readyz(t, h)
	if probes.Load() != 1 {
		t.Fatalf("%d probes within ReadyFor of the last one, want 1", probes.Load())
	}
	probeErr.Store(nil) // room again
	clock.Advance(time.Millisecond)
	if code, status, _ := readyz(t, h); code != http.StatusOK || status != "ready" || probes.Load() != 2 {
		t.Fatalf("after a probe write succeeded: %d %s, %d probes", code, status, probes.Load())
	}

	// Without a probe only a write clears it.
	down := errors.New("commit batches/y: disk I/O error")
	ledgerWrites.Record(down)
	clock.Advance(time.Hour)
	if code, status, detail := readyz(t, h); code != http.StatusServiceUnavailable || status != "ledger-writes-failing" || !strings.Contains(detail, down.Error()) {
		t.Fatalf("ledger writes failing: %d %s %q", code, status, detail)
	}
	ledgerWrites.Record(nil)
	if code, _, _ := readyz(t, h); code != http.StatusOK {
		t.Fatalf("after a ledger write succeeded: %d", code)
	}

	// The store read comes first.
	ledgerWrites.Record(down)
	gone := errors.New("Firestore emulator at 127.0.0.1:9 did not answer a read")
	h = httpapi.Readyz(func(context.Context) error { return gone }, ledgerWrites, resultsWrites)
	if code, status, detail := readyz(t, h); code != http.StatusServiceUnavailable || status != "store-unreachable" || detail != gone.Error() {
		t.Fatalf("store unreachable and ledger writes failing: %d %s %q", code, status, detail)
	}
}
