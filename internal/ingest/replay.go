package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/opname"
)

// ErrNotSettled: replay of an operation that has no completion yet.
var ErrNotSettled = errors.New("operation has not settled")

// Replay publishes an operation's completion again on purpose (an operator
// recovering a consumer), with a fresh replay_id attribute, and records the
// replay on the operation. State is never changed.
//
// The message is the claim's. When the claim is gone (expired long after
// completion, or lost while its effect was owed: the claim-missing alert)
// the message is rebuilt from the settled operation, and the operation's
// effect mirror is set DONE with the replay, so the alert stops. When the
// operation is gone instead (its operation-missing variant), the claim is
// closed DONE, which stops that alert (a claim that changed since it was
// read fails that step, ErrFenced, and the replay says so).
func (d *Door) Replay(ctx context.Context, rawName string, kind opname.Kind) (string, error) {
	name, err := opname.Normalize(rawName, kind)
	if err != nil {
		return "", invalidName(err)
	}
	id, err := opname.DocID(name.Key())
	if err != nil {
		return "", invalidName(err)
	}
	c, err := d.cfg.Store.GetClaim(ctx, id)
	rebuilt := errors.Is(err, ledger.ErrNotFound)
	var op ledger.Operation // read for the rebuilt message; the first record attempt reuses it
	if rebuilt {
		var oerr error
		op, oerr = d.cfg.Store.GetOperation(ctx, id)
		switch {
		case errors.Is(oerr, ledger.ErrNotFound) || (oerr == nil && !op.State.Terminal()):
			return "", fmt.Errorf("replay %s: %w", name.Canonical, ErrNotSettled)
		case oerr != nil:
			return "", fmt.Errorf("%w: read %s: %w", ErrUnavailable, name.Canonical, oerr)
		}
		c.Message, err = message(op, name.Key()), nil
	}
	if err != nil {
		return "", fmt.Errorf("%w: read claim %s: %w", ErrUnavailable, name.Canonical, err)
	}
	replayID := "replay-" + d.cfg.NewToken()
	m := c.Message
	m.ReplayID = replayID
	if err := d.cfg.Sink.Publish(ctx, m); err != nil {
		return "", fmt.Errorf("%w: replay %s: %w", ErrSideEffect, name.Canonical, err)
	}
	// Record it; a concurrent writer only makes us re-read and append again,
	// on the door's conflict schedule. The first attempt reuses the read
	// the rebuilt message came from.
	read, orphan := rebuilt, false
	if _, err := d.conflictRetrier().Do(ctx, func(ctx context.Context) error {
		if !read {
			var err error
			op, err = d.cfg.Store.GetOperation(ctx, id)
			if errors.Is(err, ledger.ErrNotFound) {
				// The claim's operation is gone (the operation-missing
				// alert): nothing to record the replay on, and nobody can
				// seize the claim, so the published message settles it.
				orphan = true
				if c.Status == ledger.ClaimDone {
					return nil
				}
				return d.cfg.Store.CloseOrphanClaim(ctx, c, d.cfg.Now())
			}
			if err != nil {
				return err
			}
		}
		read = false
		op.Replays = append(op.Replays, ledger.Replay{ID: replayID, At: d.cfg.Now()})
		if len(op.Replays) > ledger.MaxHistory {
			op.Replays = op.Replays[len(op.Replays)-ledger.MaxHistory:]
		}
		if rebuilt {
			claims.MarkDone(&op)
		}
		_, _, err := d.cfg.Store.CommitOperation(ctx, op, nil)
		return err
	}); err != nil {
		return replayID, fmt.Errorf("%w: replay %s published as %s but not recorded: %w", ErrUnavailable, name.Canonical, replayID, err)
	}
	d.cfg.Log.InfoContext(ctx, "replay", "operation", name.Canonical, "replay_id", replayID, "idempotency_key", m.IdempotencyKey,
		"rebuilt_from_operation", rebuilt, "operation_missing", orphan)
	return replayID, nil
}
