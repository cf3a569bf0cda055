package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/httpapi"
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
