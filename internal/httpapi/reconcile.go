package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/lrosink/lrosink/internal/reconcile"
)

// Passer runs one reconcile pass (*reconcile.Reconciler does).
type Passer interface {
	Pass(ctx context.Context) (reconcile.Summary, error)
}

// Reconcile returns the Reconcile function (CONTRACT.md §4): POST runs one
// pass within the request's deadline and answers its summary. A pass that
// could not query the ledger is answered 503, with Retry-After and the
// summary of what it did, so that the scheduler retries.
func Reconcile(p Passer, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !methodPOST(w, r) {
			return
		}
		s, err := p.Pass(r.Context())
		status := http.StatusOK
		if err != nil {
			log.ErrorContext(r.Context(), "reconcile pass failed", "error", err.Error())
			status = http.StatusServiceUnavailable
		}
		reply(w, status, s)
	})
}
