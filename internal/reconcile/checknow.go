package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/lrosink/lrosink/internal/lifecycle"
)

// ErrNoGemini: a check was asked for with no GEMINI_API_KEY, so there is
// nobody to ask.
var ErrNoGemini = errors.New("reconcile: no GEMINI_API_KEY: Gemini cannot be asked")

// ErrSettled: a check was asked for an operation already settled; Gemini
// is not asked again (a settled state is final).
var ErrSettled = errors.New("reconcile: the operation has settled")

// Checked is what a check asked for now (CheckNow) found.
type Checked struct {
	// Outcome is "settled" (the answer settled the operation),
	// "still-pending" (rescheduled), "not-found" (Gemini does not know it:
	// recorded, as a pass records it) or "error" (Gemini or the door
	// failed; rescheduled with backoff).
	Outcome string
	// Note is the check's label, as the operation's last_check records it
	// (ok, not-found, gemini-unavailable, fetch-error, ingest-error).
	Note  string
	State lifecycle.State
}

// CheckNow asks Gemini for the state of one pending operation now, whether
// or not its check is due, and applies the answer through the door, exactly
// as a pass checks a due operation (check): the same fetch, the same door,
// the same delivery log entry (source reconcile) and the same rescheduling.
// It is the console's "Check now". ErrSettled for a terminal operation,
// ErrNoGemini without a key, ledger.ErrNotFound for an unknown id.
func (r *Reconciler) CheckNow(ctx context.Context, id string) (Checked, error) {
	if r.cfg.Gemini == nil {
		return Checked{}, ErrNoGemini
	}
	op, err := r.cfg.Ledger.GetOperation(ctx, id)
	if err != nil {
		return Checked{}, fmt.Errorf("reconcile: check %s: %w", id, err)
	}
	if op.State.Terminal() {
		return Checked{State: op.State}, ErrSettled
	}
	var t tally
	r.check(ctx, ctx, op, r.cfg.Now(), false, &t)
	after, err := r.cfg.Ledger.GetOperation(ctx, id)
	if err != nil {
		return Checked{}, fmt.Errorf("reconcile: check %s: read it back: %w", id, err)
	}
	c := Checked{State: after.State, Note: after.LastCheck}
	switch {
	case after.State.Terminal():
		c.Outcome, c.Note = "settled", "ok"
	case t.s.Errors > 0:
		c.Outcome = "error"
	case after.LastCheck == "not-found":
		c.Outcome = "not-found"
	default:
		c.Outcome = "still-pending"
	}
	return c, nil
}
