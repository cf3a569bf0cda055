package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lrosink/lrosink/internal/reconcile"
)

// Publisher hands shard requests to the queue; it returns once each was
// accepted, or with what failed.
type Publisher interface {
	Publish(ctx context.Context, reqs []Request) (published int, err error)
}

// SharedPasser runs the duties of a pass that concern the whole ledger
// (*reconcile.Reconciler's PassShared): claim retries, webhook health,
// adoption, pruning and the ledger's counts, with no due check and no stuck
// alert, which the shard passes do for their ranges.
type SharedPasser interface {
	PassShared(ctx context.Context) (reconcile.Summary, error)
}

// Result is a coordinator's answer: its shared pass's summary and how many
// shard passes it handed out (CONTRACT.md §4).
type Result struct {
	reconcile.Summary
	ShardPasses int `json:"shard_passes"`
}

// Coordinator is the Scheduler-triggered pass of a sharded deployment: it
// hands out one shard pass per range of shard.Split(Shards), then runs the
// shared duties itself.
type Coordinator struct {
	Shared    SharedPasser
	Publisher Publisher
	Shards    int
	Now       func() time.Time
	Log       *slog.Logger
}

// NewCoordinator checks c: shards in 2..shard.Buckets (one shard needs no
// fan-out: the plain pass is it), and every part set.
func NewCoordinator(c Coordinator) (*Coordinator, error) {
	if c.Shared == nil || c.Publisher == nil || c.Now == nil || c.Log == nil {
		return nil, errors.New("fanout: Shared, Publisher, Now and Log are required")
	}
	if _, err := Requests(c.Shards, time.Time{}); err != nil || c.Shards < 2 {
		return nil, fmt.Errorf("fanout: %d shards: want 2 to 64 (1 runs the plain pass)", c.Shards)
	}
	return &c, nil
}

// Coordinate publishes the tick's shard requests first, so the shard passes
// start while the shared duties run here, then runs them. A publish that
// failed is an error (the caller answers 503 and the Scheduler retries the
// tick; the shard requests published twice are two overlapping passes of
// a range, which is safe); the shared pass runs either way.
func (c *Coordinator) Coordinate(ctx context.Context) (Result, error) {
	tick := c.Now()
	reqs, err := Requests(c.Shards, tick)
	if err != nil {
		return Result{}, fmt.Errorf("fanout: %w", err)
	}
	n, pubErr := c.Publisher.Publish(ctx, reqs)
	attrs := []any{"shards", c.Shards, "shard_passes", n, "tick", tick.UTC().Format(time.RFC3339Nano)}
	if pubErr != nil {
		c.Log.ErrorContext(ctx, "reconcile fan-out: shard requests not all published; their ranges are not checked this tick",
			append(attrs, "error", pubErr.Error())...)
	} else {
		c.Log.InfoContext(ctx, "reconcile fan-out", attrs...)
	}
	s, err := c.Shared.PassShared(ctx)
	res := Result{Summary: s, ShardPasses: n}
	if pubErr != nil {
		return res, errors.Join(fmt.Errorf("fanout: publish shard requests: %w", pubErr), err)
	}
	return res, err
}
