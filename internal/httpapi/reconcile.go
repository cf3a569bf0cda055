package httpapi

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/lrosink/lrosink/internal/fanout"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/shard"
)

// Passer runs one reconcile pass (*reconcile.Reconciler does).
type Passer interface {
	Pass(ctx context.Context) (reconcile.Summary, error)
}

// RangePasser runs the due checks and stuck alerts of one bucket range
// (*reconcile.Reconciler's PassRange): a shard pass.
type RangePasser interface {
	PassRange(ctx context.Context, r shard.Range) (reconcile.Summary, error)
}

// Coordinator hands a tick's shard passes out and runs the shared duties
// (*fanout.Coordinator).
type Coordinator interface {
	Coordinate(ctx context.Context) (fanout.Result, error)
}

// ReconcileAnswer is the Reconcile function's answer (CONTRACT.md §4): the
// pass's summary, plus, for a coordinator, the shard passes it handed out,
// and for a shard pass, its range. Both are left out of a plain pass's
// answer, which is the summary alone.
type ReconcileAnswer struct {
	reconcile.Summary
	ShardPasses int    `json:"shard_passes,omitempty"`
	Range       string `json:"range,omitempty"`
}

// ReconcileOption adds fan-out to the Reconcile function.
type ReconcileOption func(*reconcileOpts)

type reconcileOpts struct {
	ranges RangePasser
	coord  Coordinator
}

// WithShardPasses makes a Pub/Sub push of a shard request run that range's
// pass (rp) instead of a whole pass.
func WithShardPasses(rp RangePasser) ReconcileOption {
	return func(o *reconcileOpts) { o.ranges = rp }
}

// WithCoordinator makes a plain POST (the Scheduler's) run c: hand the
// shard passes out, then the shared duties (LROSINK_RECONCILE_SHARDS > 1).
func WithCoordinator(c Coordinator) ReconcileOption {
	return func(o *reconcileOpts) { o.coord = c }
}

// maxShardPush bounds a push request's body: a shard request's envelope is
// a few hundred bytes.
const maxShardPush = 64 << 10

// Reconcile returns the Reconcile function (CONTRACT.md §4): POST runs one
// pass and answers its summary. A pass that could not query the ledger is
// answered 503, with Retry-After and the summary of what it did, so that
// the scheduler retries.
//
// With WithShardPasses, a body that is a Pub/Sub push envelope is a shard
// request: the pass covers its range only. It is answered 2xx (Pub/Sub acks)
// when the pass ran, partial or not; 503 (a nack: Pub/Sub redelivers with
// backoff) only when the ledger could not be queried; 400 bad-shard-request
// when the envelope or its range is not one (also a nack: Pub/Sub gives up
// after the subscription's max delivery attempts and dead-letters it).
// Any other body (the Scheduler sends none) runs the plain pass, or, with
// WithCoordinator, the coordinator.
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
func Reconcile(p Passer, log *slog.Logger, budget time.Duration, stopping context.Context, opts ...ReconcileOption) http.Handler {
	var o reconcileOpts
	for _, f := range opts {
		f(&o)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !methodPOST(w, r) {
			replyKind(w, kindMethodNotAllowed, "")
			return
		}
		var push []byte
		if o.ranges != nil {
			body, k, _ := readBody(w, r, maxShardPush)
			if k != "" {
				status, a := bodyAnswer(k)
				reply(w, status, a)
				return
			}
			switch trimmed := bytes.TrimSpace(body); {
			case fanout.IsPush(trimmed):
				push = body
			case len(trimmed) > 0 && o.coord != nil:
				// Sharded, a tick (Cloud Scheduler, a person) has an empty
				// body; anything else is a push gone wrong (a truncated
				// envelope, an unwrapped message). Run as a tick, it would
				// hand the ranges out again and be acked; a 400 is a nack,
				// and the subscription's dead-letter policy ends it.
				// Unsharded, there is nothing to hand out: a body is
				// ignored, as before sharding.
				log.ErrorContext(r.Context(), "reconcile: not a shard request", "error", "the body is neither empty (a tick) nor a Pub/Sub push envelope")
				replyKind(w, kindBadShardRequest, "the body is neither empty (a tick) nor a Pub/Sub push envelope")
				return
			}
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
		var a ReconcileAnswer
		var err error
		plog := log // this request's: log is every request's
		switch {
		case push != nil:
			req, d, perr := fanout.ParsePush(push)
			if perr != nil {
				// Never a pass: a nack, so the subscription's dead-letter
				// policy ends its redeliveries.
				log.ErrorContext(ctx, "reconcile: not a shard request", "error", perr.Error(),
					"message_id", d.MessageID, "subscription", d.Subscription, "delivery_attempt", d.Attempt)
				replyKind(w, kindBadShardRequest, perr.Error())
				return
			}
			a.Range = req.Range.String()
			plog = log.With("range", a.Range, "message_id", d.MessageID, "delivery_attempt", d.Attempt)
			if !req.Tick.IsZero() {
				plog = plog.With("tick", req.Tick.UTC().Format(time.RFC3339Nano))
			}
			// The pass's own line says what it did; this one ties it to
			// its tick and delivery.
			plog.InfoContext(ctx, "reconcile shard request")
			a.Summary, err = o.ranges.PassRange(ctx, req.Range)
		case o.coord != nil:
			var res fanout.Result
			res, err = o.coord.Coordinate(ctx)
			a.Summary, a.ShardPasses = res.Summary, res.ShardPasses
		default:
			a.Summary, err = p.Pass(ctx)
		}
		status := http.StatusOK
		if err != nil {
			plog.ErrorContext(ctx, "reconcile pass failed", "error", err.Error())
			status = http.StatusServiceUnavailable
		}
		reply(w, status, a)
	})
}
