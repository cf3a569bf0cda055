package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/lrosink/lrosink/internal/reconcile"
)

// Passer runs one reconcile pass (*reconcile.Reconciler does).
type Passer interface {
	Pass(ctx context.Context) (reconcile.Summary, error)
}

// Reconcile returns the Reconcile function (CONTRACT.md §4): POST runs one
// pass and answers its summary. A pass that could not query the ledger is
// answered 503, with Retry-After and the summary of what it did, so that
// the scheduler retries.
//
// budget (LROSINK_RECONCILE_DEADLINE; 0: none) is the pass's deadline.
// Cloud Run and Cloud Scheduler enforce theirs outside the handler, by
// cutting the connection, so without one of its own a slow pass would be
// cut before it answered or raised its stuck alerts. The pass stops early
// within it ("partial":true) and keeps time for stuck alerting. A caller
// that hangs up does not cut the pass short: it runs to its budget.
//
// stopping (nil: never) ends when the process stops: the pass then ends
// early too, partial (cause reconcile.ErrStopping), so that it answers
// within the stop's 8 s instead of running on against a store and a sink
// that are being closed.
func Reconcile(p Passer, log *slog.Logger, budget time.Duration, stopping context.Context) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !methodPOST(w, r) {
			return
		}
		ctx := r.Context()
		if budget > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), budget)
			defer cancel()
		}
		if stopping != nil {
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(ctx)
			defer cancel(nil)
			stop := context.AfterFunc(stopping, func() { cancel(reconcile.ErrStopping) })
			defer stop()
		}
		s, err := p.Pass(ctx)
		status := http.StatusOK
		if err != nil {
			log.ErrorContext(ctx, "reconcile pass failed", "error", err.Error())
			status = http.StatusServiceUnavailable
		}
		reply(w, status, s)
	})
}
