package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/retry"
)

// handler does a piece of door work: the innermost one decides, and each
// stage wraps the handler after it (the middleware shape of watermill's
// router), so the door's order is the order of one list (pipeline).
type handler func(ctx context.Context, j *job) (Result, error)

// stage wraps the rest of the door.
type stage struct {
	name string
	wrap func(next handler) handler
}

// pipeline is the door, outermost stage first. Every entry (Ingest,
// IngestRead, RetryClaim) runs all of it; a stage with nothing to do for a
// job passes it on. docs/ARCHITECTURE.md's data path lists the same names in
// the same order (a test in ./docs checks it).
func (d *Door) pipeline() []stage {
	return []stage{
		// Identical concurrent work shares one run (a burst costs one read
		// and at most one commit); a registration runs alone. Either way
		// the work runs on its own goroutine, so the caller can hang up.
		{"coalesce", d.coalesce},
		// Refuse new work once Drain has begun (ErrUnavailable, 503, no
		// log line), track the work in flight, and detach it from the
		// caller's cancellation, bounded by Timeout.
		{"drain", d.admit},
		// One "ingest decision" line and one Observer call per run, however
		// many conflicts the run re-read through.
		{"observe", d.observe},
		// A hint (Event.Hint) is confirmed: Gemini's answer replaces what
		// the delivery stated, or nothing is applied.
		{"confirm", d.confirmHints},
		// A commit lost to a concurrent writer (ErrConflict): back off,
		// re-read, decide again.
		{"retry-conflicts", d.retryConflicts},
		// A claim taken by decide: publish its results message within the
		// lease, then commit the claim DONE (release it if the publish fails).
		{"effect", d.effect},
	}
}

// innermost is the name of the handler the stages wrap (d.decide).
const innermost = "decide"

// chain builds the door from its pipeline around decide.
func (d *Door) chain() handler {
	h := handler(d.decide)
	p := d.pipeline()
	for i := len(p) - 1; i >= 0; i-- {
		h = p[i].wrap(h)
	}
	return h
}

// Stages names the door's stages in the order an event passes them,
// outermost first, ending with the handler they wrap.
func Stages() []string {
	var d Door // the wraps are never called: only the names are read
	var names []string
	for _, s := range d.pipeline() {
		names = append(names, s.name)
	}
	return append(names, innermost)
}

// job is one piece of door work on its way through the stages.
type job struct {
	// key groups identical work for coalesce; "" runs alone.
	key  string
	id   string
	name opname.Name
	// ev is the event applied (and logged): confirm replaces a hint's with
	// Gemini's answer.
	ev applied
	// read is the operation as the caller read it; the first decide uses
	// it, every later one re-reads.
	read *ledger.Operation
	// confirm: ev is a hint to confirm with Gemini before anything applies.
	confirm bool
	// recalled: confirm answered from its memory, with no Gemini call (the
	// kind of answer remembered: state, not-found, failure).
	recalled string
	// recover: RetryClaim's work, a due claim's side effect; no event.
	recover bool
	// intent is the key of the intent the event names, from a source the
	// door trusts for it (intent.go; "" none); strictIntent: a
	// registration binding it, for which an intent that cannot be bound is
	// the caller's error. bodyIntent is the one a signed hint's body
	// (v1a) names, which confirm makes intent once Gemini has confirmed
	// the operation.
	intent       string
	strictIntent bool
	bodyIntent   string
	// effect is the side effect decide took a claim for; the effect stage
	// runs it.
	effect *effect
}

// effect is a claim held by this door: publish message (the claim's, as
// the door wrote or read it: a lease need not carry it), then commit DONE
// fenced on lease, which runs until leaseUntil.
type effect struct {
	lease      *ledger.Lease
	leaseUntil time.Time
	message    results.Message
	// expired: the claim was seized from a holder whose lease ran out,
	// who may have published before it died (the crash window): the sink
	// is asked first (TailChecker).
	expired bool
}

type outcome struct {
	res Result
	err error
}

// coalesce runs the rest once for all concurrent callers with the same key,
// on a goroutine of its own; a caller whose context ends, or every caller
// once the process is stopping (LetWaitersGo), stops waiting, and the work
// goes on.
func (d *Door) coalesce(next handler) handler {
	return func(ctx context.Context, j *job) (Result, error) {
		// A hint's confirmation waits on Gemini: uncapped (flight.go).
		c := d.flight.do(j.key, j.confirm, func() outcome {
			res, err := next(ctx, j)
			return outcome{res, err}
		})
		select {
		case <-c.done:
			return c.out.res, c.out.err
		case <-ctx.Done():
			return Result{}, fmt.Errorf("ingest: %w", ctx.Err())
		case <-d.stopped:
			select {
			case <-c.done: // finished meanwhile: its answer, not a 503
				return c.out.res, c.out.err
			default:
			}
			return Result{}, fmt.Errorf("%w: %w: its work goes on and is drained", ErrUnavailable, ErrStopping)
		}
	}
}

// admit is the drain stage. The work runs detached from the caller's
// cancellation (an impatient caller must neither fail others waiting on the
// same work nor cut a side effect short), bounded by Timeout, and tracked so
// that Drain waits for it.
func (d *Door) admit(next handler) handler {
	return func(ctx context.Context, j *job) (Result, error) {
		if !d.begin() {
			return Result{}, fmt.Errorf("%w: %w: the ingest door takes no new work", ErrUnavailable, ErrStopping)
		}
		defer d.end()
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
		defer cancel()
		return next(wctx, j)
	}
}

// observe logs and reports the decision of the rest, with the event it
// applied (Gemini's answer in place of a confirmed hint).
func (d *Door) observe(next handler) handler {
	return func(ctx context.Context, j *job) (res Result, err error) {
		start := d.cfg.Now()
		defer func() { d.log(ctx, j.ev, j.recalled, j.intent, res, err, start) }()
		return next(ctx, j)
	}
}

// confirmHints sends a hint through confirm; any other job passes.
func (d *Door) confirmHints(next handler) handler {
	return func(ctx context.Context, j *job) (Result, error) {
		if !j.confirm {
			return next(ctx, j)
		}
		return d.confirm(ctx, j, next)
	}
}

// retryConflicts runs the rest until it is not lost to a concurrent writer.
func (d *Door) retryConflicts(next handler) handler {
	return func(ctx context.Context, j *job) (Result, error) {
		var res Result
		n, err := d.conflictRetrier().Do(ctx, func(ctx context.Context) (err error) {
			res, err = next(ctx, j)
			j.read = nil // what the caller read is stale now: re-read
			return err
		})
		var we *retry.WaitError
		switch {
		case errors.As(err, &we):
			return res, fmt.Errorf("%w: %w", ErrUnavailable, we.Err)
		case errors.Is(err, ledger.ErrConflict):
			return res, fmt.Errorf("%w: %d attempts lost to concurrent writers of %s: %w", ErrUnavailable, n, j.name.Canonical, err)
		}
		return res, err
	}
}

// effect runs the side effect of a claim decide took.
func (d *Door) effect(next handler) handler {
	return func(ctx context.Context, j *job) (Result, error) {
		res, err := next(ctx, j)
		e := j.effect
		j.effect = nil // a later attempt takes its own claim
		if err != nil || e == nil {
			return res, err
		}
		return d.runEffect(ctx, *e, res)
	}
}
