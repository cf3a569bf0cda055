// Package action carries out an operator's actions on one operation, the
// console's buttons (CONTRACT.md §4, "Actions"): Replay (publish the results
// message again with a new replay_id, the door's Replay, as `lrosink
// replay`), Check now (ask Gemini now and apply the answer through the door,
// the reconciler's CheckNow) and Publish now (the claim recovery the next
// pass would do, the door's RetryClaim). Each is recorded in the operation's
// delivery log (source console) with who asked, what, when and the outcome,
// and the entry is written before the answer.
//
// Runner does the work where the ledger may be written: in `serve`, in
// process; on Cloud Run, in the Reconcile function, which the read-only
// Console service calls over HTTP with its own OIDC identity (HTTP,
// IDTokenTransport).
package action

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/fetcherr"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/reconcile"
)

// Kind names an action.
type Kind string

// The actions.
const (
	Replay     Kind = "replay"
	CheckNow   Kind = "check-now"
	PublishNow Kind = "publish-now"
)

// Kinds are the actions, in the order the console offers them.
func Kinds() []Kind { return []Kind{Replay, CheckNow, PublishNow} }

// Request is one action asked for: the Reconcile function's body
// {"action":…,"operation":…,"actor":…} (CONTRACT.md §4).
type Request struct {
	Action Kind `json:"action"`
	// Operation is its name in any spelling the name normalizer accepts.
	Operation string `json:"operation"`
	// Actor is who asked: the console's signed-in session or IAM
	// principal (required; recorded as it is given).
	Actor string `json:"actor"`
}

// Result is what became of an action (the Reconcile function's answer).
type Result struct {
	Action    Kind   `json:"action"`
	Operation string `json:"operation,omitempty"`
	// Outcome: replayed, settled, still-pending, not-found (Gemini does
	// not know the operation), published; refused (Reason says why,
	// nothing was done); error (Reason says what failed).
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	// ReplayID is a replay's new replay_id (also when it was published
	// but could not be recorded: the consumer sees it).
	ReplayID string `json:"replay_id,omitempty"`
	// State is the operation's state after the action.
	State  string `json:"state,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Outcomes and reasons (stable labels; httpapi's table gives each reason
// its status).
const (
	OutcomeReplayed     = "replayed"
	OutcomeSettled      = "settled"
	OutcomeStillPending = "still-pending"
	OutcomeNotFound     = "not-found"
	OutcomePublished    = "published"
	OutcomeRefused      = "refused"
	OutcomeError        = "error"

	// ReasonInvalidAction: the request names no action lrosink knows, an
	// invalid operation name or no actor (400).
	ReasonInvalidAction = "invalid-action"
	// ReasonUnknownOperation: no such operation in the ledger (404).
	ReasonUnknownOperation = "unknown-operation"
	// ReasonNotSettled: Replay or Publish now of a pending operation (409).
	ReasonNotSettled = "not-settled"
	// ReasonAlreadySettled: Check now of a settled operation (409).
	ReasonAlreadySettled = "already-settled"
	// ReasonNothingOwed: Publish now with no message owed: the claim is
	// DONE, or gone (Replay rebuilds it) (409).
	ReasonNothingOwed = "nothing-owed"
	// ReasonClaimHeld: Publish now while a publisher holds the claim's
	// lease: it is publishing, or is seized once the lease ends (409).
	ReasonClaimHeld = "claim-held"
	// ReasonNoGeminiKey: Check now without GEMINI_API_KEY (409).
	ReasonNoGeminiKey = "no-gemini-key"
	// The failures share the functions' labels (503).
	ReasonLedgerUnavailable = "ledger-unavailable"
	ReasonSideEffectFailed  = "side-effect-failed"
	ReasonGeminiUnavailable = "gemini-unavailable"
	ReasonStopping          = "stopping"
)

// Doer carries out an action: Runner here, HTTP through the Reconcile
// function. The error is only for an action that could not be asked for
// at all (the Reconcile function unreachable); a refusal or a failure is
// the Result's.
type Doer interface {
	Do(ctx context.Context, req Request) (Result, error)
}

// Door is the ingest door's part in the actions (*ingest.Door).
type Door interface {
	Replay(ctx context.Context, rawName string, kind opname.Kind) (string, error)
	RetryClaim(ctx context.Context, id string) (ingest.Result, error)
}

// Checker asks Gemini about one operation now (*reconcile.Reconciler); nil
// without GEMINI_API_KEY.
type Checker interface {
	CheckNow(ctx context.Context, id string) (reconcile.Checked, error)
}

// Reads are the ledger reads an action makes.
type Reads interface {
	GetOperation(ctx context.Context, id string) (ledger.Operation, error)
	GetClaim(ctx context.Context, id string) (ledger.Claim, error)
}

// Log records the action in the operation's delivery log
// (*deliverylog.Log); Flush (nil: none) writes it before the answer.
type Log interface {
	Delivery(opID string, e deliverylog.Entry)
}

// Config holds a Runner's dependencies.
type Config struct {
	Door    Door
	Checker Checker // nil: Check now is refused (no-gemini-key)
	Ledger  Reads
	Log     *slog.Logger
	Now     func() time.Time
	// Deliveries records every action (nil: not recorded); Flush, when
	// set, waits until it is written.
	Deliveries Log
	Flush      func(ctx context.Context) error
}

// Runner does the actions against the ledger, the sink and Gemini.
type Runner struct{ cfg Config }

// NewRunner checks cfg.
func NewRunner(cfg Config) (*Runner, error) {
	if cfg.Door == nil || cfg.Ledger == nil || cfg.Log == nil || cfg.Now == nil {
		return nil, errors.New("action: Door, Ledger, Log and Now are required")
	}
	return &Runner{cfg: cfg}, nil
}

// MaxActor bounds the actor a request names.
const MaxActor = 256

// Deadline bounds an action where it is carried out (the Reconcile
// function's action requests); CallTimeout, what its caller waits, is
// longer, so a caller always gets the outcome rather than a timeout after
// which a replay it cannot see may still have been published.
const (
	Deadline    = 45 * time.Second
	CallTimeout = Deadline + 15*time.Second
)

// flushTimeout bounds the wait for the action's log entry.
const flushTimeout = 5 * time.Second

// Check validates req: a known action, a valid name, an actor. It returns
// the name.
func Check(req Request) (opname.Name, error) {
	known := false
	for _, k := range Kinds() {
		known = known || req.Action == k
	}
	if !known {
		return opname.Name{}, errors.New("action: not one of replay, check-now, publish-now")
	}
	if req.Actor == "" || len(req.Actor) > MaxActor {
		return opname.Name{}, fmt.Errorf("actor: required, at most %d bytes", MaxActor)
	}
	for _, ch := range req.Actor {
		if ch < 0x20 || ch == 0x7f {
			return opname.Name{}, errors.New("actor: a control character")
		}
	}
	name, err := opname.Normalize(req.Operation, "")
	if err != nil {
		return opname.Name{}, fmt.Errorf("operation: %w", err)
	}
	return name, nil
}

// Do carries out req and records it; it never returns an error (every
// refusal and failure is the Result's).
func (r *Runner) Do(ctx context.Context, req Request) (Result, error) {
	res := Result{Action: req.Action}
	name, err := Check(req)
	if err != nil {
		res.Outcome, res.Reason, res.Detail = OutcomeRefused, ReasonInvalidAction, err.Error()
		return res, nil
	}
	res.Operation = name.Canonical
	id, err := opname.DocID(name.Key())
	if err != nil {
		res.Outcome, res.Reason, res.Detail = OutcomeRefused, ReasonInvalidAction, "operation: "+err.Error()
		return res, nil
	}
	op, err := r.cfg.Ledger.GetOperation(ctx, id)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		res.Outcome, res.Reason = OutcomeRefused, ReasonUnknownOperation
		return res, nil
	case err != nil:
		r.cfg.Log.ErrorContext(ctx, "console action: ledger read failed", "operation", name.Canonical, "error", err.Error())
		res.Outcome, res.Reason = OutcomeError, ReasonLedgerUnavailable
		return res, nil
	}
	start := r.cfg.Now()
	res.State = string(op.State)
	switch req.Action {
	case Replay:
		r.replay(ctx, op, &res)
	case CheckNow:
		r.check(ctx, op, &res)
	case PublishNow:
		r.publish(ctx, op, &res)
	}
	r.record(ctx, op.ID, req, res, start)
	return res, nil
}

func (r *Runner) replay(ctx context.Context, op ledger.Operation, res *Result) {
	id, err := r.cfg.Door.Replay(ctx, op.Name, op.Kind)
	res.ReplayID = id
	switch {
	case err == nil:
		res.Outcome = OutcomeReplayed
	case errors.Is(err, ingest.ErrNotSettled):
		res.Outcome, res.Reason = OutcomeRefused, ReasonNotSettled
	case id != "":
		// Published, not recorded on the operation: the consumer has it.
		res.Outcome, res.Reason, res.Detail = OutcomeReplayed, ReasonLedgerUnavailable, "published but not recorded on the operation"
	default:
		r.failed(ctx, res, err)
	}
}

func (r *Runner) check(ctx context.Context, op ledger.Operation, res *Result) {
	if r.cfg.Checker == nil {
		res.Outcome, res.Reason = OutcomeRefused, ReasonNoGeminiKey
		return
	}
	c, err := r.cfg.Checker.CheckNow(ctx, op.ID)
	switch {
	case errors.Is(err, reconcile.ErrNoGemini):
		res.Outcome, res.Reason = OutcomeRefused, ReasonNoGeminiKey
	case errors.Is(err, reconcile.ErrSettled):
		res.Outcome, res.Reason = OutcomeRefused, ReasonAlreadySettled
	case err != nil:
		r.failed(ctx, res, err)
	case c.Outcome == "error":
		// The check's own label: gemini-unavailable, fetch-error,
		// ingest-error (a pass records the same); else its reschedule
		// failed, which is the ledger.
		res.Outcome, res.Reason, res.State = OutcomeError, c.Note, string(c.State)
		if c.Note != ReasonGeminiUnavailable && c.Note != "fetch-error" && c.Note != "ingest-error" {
			res.Reason = ReasonLedgerUnavailable
		}
	default:
		res.Outcome, res.Reason, res.State = c.Outcome, c.Note, string(c.State)
	}
}

func (r *Runner) publish(ctx context.Context, op ledger.Operation, res *Result) {
	if !op.State.Terminal() {
		res.Outcome, res.Reason = OutcomeRefused, ReasonNotSettled
		return
	}
	c, err := r.cfg.Ledger.GetClaim(ctx, op.ID)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		res.Outcome, res.Reason, res.Detail = OutcomeRefused, ReasonNothingOwed, "no claim (expired after it was done, or lost): Replay rebuilds the message"
		return
	case err != nil:
		r.failed(ctx, res, fmt.Errorf("%w: %w", ingest.ErrUnavailable, err))
		return
	case c.Status == ledger.ClaimDone:
		res.Outcome, res.Reason = OutcomeRefused, ReasonNothingOwed
		return
	case c.Status == ledger.ClaimHeld && c.LeaseUntil.After(r.cfg.Now()):
		res.Outcome, res.Reason, res.Detail = OutcomeRefused, ReasonClaimHeld, "a publisher holds the claim until "+c.LeaseUntil.UTC().Format(time.RFC3339)
		return
	}
	d, err := r.cfg.Door.RetryClaim(ctx, op.ID)
	switch {
	case err != nil:
		r.failed(ctx, res, err)
	case d.Published:
		res.Outcome = OutcomePublished
	default:
		// Another publisher got there first (the claim changed since it
		// was read): what the door decided.
		res.Outcome, res.Reason = OutcomeRefused, ReasonNothingOwed
		if d.Reason != "" {
			res.Detail = d.Reason
		}
	}
}

// failed labels a door or reconciler error as the functions do.
func (r *Runner) failed(ctx context.Context, res *Result, err error) {
	res.Outcome = OutcomeError
	switch {
	case errors.Is(err, ingest.ErrStopping):
		res.Reason = ReasonStopping
	case errors.Is(err, ingest.ErrSideEffect):
		res.Reason = ReasonSideEffectFailed
	case errors.Is(err, fetcherr.ErrTransient):
		res.Reason = ReasonGeminiUnavailable
	default:
		res.Reason = ReasonLedgerUnavailable
	}
	r.cfg.Log.ErrorContext(ctx, "console action failed", "action", string(res.Action), "operation", res.Operation,
		"reason", res.Reason, "error", err.Error())
}

// record writes the action to the operation's delivery log and waits for
// it (bounded), then logs it.
func (r *Runner) record(ctx context.Context, opID string, req Request, res Result, start time.Time) {
	r.cfg.Log.InfoContext(ctx, "console action", "action", string(req.Action), "operation", res.Operation, "actor", req.Actor,
		"outcome", res.Outcome, "reason", res.Reason, "replay_id", res.ReplayID)
	if r.cfg.Deliveries == nil {
		return
	}
	r.cfg.Deliveries.Delivery(opID, deliverylog.Entry{At: start, Source: deliverylog.SourceConsole, Status: string(req.Action),
		Actor: req.Actor, DeliveryID: res.ReplayID, Outcome: res.Outcome, Reason: res.Reason, Latency: r.cfg.Now().Sub(start)})
	if r.cfg.Flush == nil {
		return
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	if err := r.cfg.Flush(fctx); err != nil {
		r.cfg.Log.WarnContext(ctx, "console action: its delivery log entry is not written yet", "operation", res.Operation, "error", err.Error())
	}
}
