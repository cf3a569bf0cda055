package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/lrosink/lrosink/internal/action"
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
	ranges  RangePasser
	coord   Coordinator
	actions action.Doer
}

// WithActions makes a body {"action":…} an operator's action on one
// operation (CONTRACT.md §4, "Actions"), carried out by d: the console's
// Replay, Check now and Publish now. The Console service on Cloud Run
// calls them here, so that only this service writes.
func WithActions(d action.Doer) ReconcileOption {
	return func(o *reconcileOpts) { o.actions = d }
}

// isAction reports whether body is an action request: a JSON object with
// an "action" member (a push envelope has "message", a tick no body).
func isAction(body []byte) bool {
	if len(body) == 0 || body[0] != '{' {
		return false
	}
	var probe struct {
		Action json.RawMessage `json:"action"`
	}
	return json.Unmarshal(body, &probe) == nil && probe.Action != nil
}

// actionStatus is the status of an action's result: 200 when it was done,
// else its reason's, from the one table.
func actionStatus(res action.Result) int {
	if res.Outcome != action.OutcomeRefused && res.Outcome != action.OutcomeError {
		return http.StatusOK
	}
	status, _ := answerOf(kind(res.Reason), "", "")
	return status
}

// serveAction carries out one action request.
func serveAction(w http.ResponseWriter, r *http.Request, d action.Doer, log *slog.Logger, body []byte) {
	var req action.Request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		res := action.Result{Outcome: action.OutcomeRefused, Reason: action.ReasonInvalidAction,
			Detail: "the body is not an action request {\"action\",\"operation\",\"actor\"}"}
		reply(w, actionStatus(res), res)
		return
	}
	// The action's own context: an operator who closes the page does not
	// cut a replay between its publish and its record. Its deadline comes
	// before the caller's (action.CallTimeout), which so always hears how
	// it ended.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), action.Deadline)
	defer cancel()
	res, err := d.Do(ctx, req)
	if err != nil {
		log.ErrorContext(r.Context(), "reconcile: action failed", "error", err.Error())
		res = action.Result{Action: req.Action, Outcome: action.OutcomeError, Reason: action.ReasonLedgerUnavailable}
	}
	reply(w, actionStatus(res), res)
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
		if o.ranges != nil || o.actions != nil {
			body, k, _ := readBody(w, r, maxShardPush)
			if k != "" {
				status, a := bodyAnswer(k)
				reply(w, status, a)
				return
			}
			switch trimmed := bytes.TrimSpace(body); {
			case o.actions != nil && isAction(trimmed):
				serveAction(w, r, o.actions, log, trimmed)
				return
			case o.ranges == nil:
				// Actions only: any other body is a tick, as before.
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
