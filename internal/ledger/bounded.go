package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/shard"
)

// DefaultCallTimeout bounds one store call when LROSINK_STORE_TIMEOUT is
// not set: far above a healthy Firestore call (milliseconds), well below
// the webhook deadline and a person's patience.
const DefaultCallTimeout = 5 * time.Second

// ErrNoAnswer marks a store call cut off by Bounded's timeout: the store
// did not answer (unreachable host, stalled connection).
var ErrNoAnswer = errors.New("no answer")

// Bounded is a Ledger whose every call ends within a timeout. A networked
// store's client retries an unreachable host until its context ends, so
// without a bound a call with a background context (a CLI command, a
// console page) hangs for ever. A call cut off by the bound fails with
// ErrNoAnswer and an error naming the store (Where), so the operator sees
// which host did not answer.
type Bounded struct {
	l       Ledger
	timeout time.Duration
	where   string
}

// NewBounded bounds every call of l by timeout (DefaultCallTimeout if not
// positive); where names the store in errors, e.g. "Firestore emulator at
// 127.0.0.1:8080 (FIRESTORE_EMULATOR_HOST)".
func NewBounded(l Ledger, timeout time.Duration, where string) *Bounded {
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	return &Bounded{l: l, timeout: timeout, where: where}
}

// Unwrap returns the bounded ledger (for adapter-specific extras such as
// Firestore's read counts).
func (b *Bounded) Unwrap() Ledger { return b.l }

// As finds the first of l and the ledgers it wraps (Unwrap, as Bounded
// does) that is a T, the way errors.As walks an error chain: an adapter's
// extras (pruning, backfills, counters) behind the wrappers every caller
// holds.
func As[T any](l Ledger) (T, bool) {
	for l != nil {
		if t, ok := l.(T); ok {
			return t, true
		}
		u, ok := l.(interface{ Unwrap() Ledger })
		if !ok {
			break
		}
		l = u.Unwrap()
	}
	var zero T
	return zero, false
}

// Where names the store, as errors do.
func (b *Bounded) Where() string { return b.where }

// call runs f under the bound; a call the bound cut off is ErrNoAnswer.
func call[T any](b *Bounded, ctx context.Context, what string, f func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	v, err := f(cctx)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return v, fmt.Errorf("%s: %w to %s within %s: %w", b.where, ErrNoAnswer, what, b.timeout, err)
	}
	return v, err
}

// GetOperation implements Reads.
func (b *Bounded) GetOperation(ctx context.Context, id string) (Operation, error) {
	return call(b, ctx, "a read", func(ctx context.Context) (Operation, error) { return b.l.GetOperation(ctx, id) })
}

// Apply implements Writes.
func (b *Bounded) Apply(ctx context.Context, writes ...Write) ([]Revision, error) {
	return call(b, ctx, "a commit", func(ctx context.Context) ([]Revision, error) { return b.l.Apply(ctx, writes...) })
}

// GetClaim implements Reads.
func (b *Bounded) GetClaim(ctx context.Context, id string) (Claim, error) {
	return call(b, ctx, "a read", func(ctx context.Context) (Claim, error) { return b.l.GetClaim(ctx, id) })
}

// DueOperations implements Queries.
func (b *Bounded) DueOperations(ctx context.Context, rg shard.Range, now time.Time, after DueCursor, limit int) ([]Operation, error) {
	return call(b, ctx, "a query", func(ctx context.Context) ([]Operation, error) {
		return b.l.DueOperations(ctx, rg, now, after, limit)
	})
}

// StuckOperations implements Queries.
func (b *Bounded) StuckOperations(ctx context.Context, rg shard.Range, cutoff time.Time, limit int) ([]Operation, error) {
	return call(b, ctx, "a query", func(ctx context.Context) ([]Operation, error) {
		return b.l.StuckOperations(ctx, rg, cutoff, limit)
	})
}

// DueClaims implements Queries.
func (b *Bounded) DueClaims(ctx context.Context, now time.Time, after ClaimCursor, limit int) ([]Claim, error) {
	return call(b, ctx, "a query", func(ctx context.Context) ([]Claim, error) { return b.l.DueClaims(ctx, now, after, limit) })
}

// CountDueClaims implements Queries.
func (b *Bounded) CountDueClaims(ctx context.Context, now time.Time, after ClaimCursor) (int64, error) {
	return call(b, ctx, "a count", func(ctx context.Context) (int64, error) { return b.l.CountDueClaims(ctx, now, after) })
}

// ListOperations implements Queries.
func (b *Bounded) ListOperations(ctx context.Context, state lifecycle.State, limit int) ([]Operation, error) {
	return call(b, ctx, "a query", func(ctx context.Context) ([]Operation, error) {
		return b.l.ListOperations(ctx, state, limit)
	})
}

// PageOperations implements Queries.
func (b *Bounded) PageOperations(ctx context.Context, f Filter, after ListCursor, limit int) ([]Operation, error) {
	return call(b, ctx, "a query", func(ctx context.Context) ([]Operation, error) {
		return b.l.PageOperations(ctx, f, after, limit)
	})
}

// CountOperations implements Queries.
func (b *Bounded) CountOperations(ctx context.Context, f Filter) (int64, error) {
	return call(b, ctx, "a query", func(ctx context.Context) (int64, error) { return b.l.CountOperations(ctx, f) })
}

// SearchOperations implements Queries.
func (b *Bounded) SearchOperations(ctx context.Context, prefix, after string, limit int) ([]Operation, error) {
	return call(b, ctx, "a query", func(ctx context.Context) ([]Operation, error) {
		return b.l.SearchOperations(ctx, prefix, after, limit)
	})
}

// CountDue implements Queries.
func (b *Bounded) CountDue(ctx context.Context, rg shard.Range, now time.Time) (int64, error) {
	return call(b, ctx, "a query", func(ctx context.Context) (int64, error) { return b.l.CountDue(ctx, rg, now) })
}

var _ Ledger = (*Bounded)(nil)

// ErrUnsupported: the bounded store does not keep what was asked for.
var ErrUnsupported = errors.New("not supported by this store")

// CountPending implements Queries.
func (b *Bounded) CountPending(ctx context.Context) (int64, error) {
	return call(b, ctx, "a count", b.l.CountPending)
}

// AppendDeliveries implements deliverylog.Store when the bounded ledger does.
func (b *Bounded) AppendDeliveries(ctx context.Context, opID string, entries []deliverylog.Entry, r deliverylog.Retention) error {
	d, ok := b.l.(deliverylog.Store)
	if !ok {
		return fmt.Errorf("%s: delivery log: %w", b.where, ErrUnsupported)
	}
	_, err := call(b, ctx, "a write", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.AppendDeliveries(ctx, opID, entries, r)
	})
	return err
}

// AppendDeliveryBatch implements deliverylog.BatchStore: the whole batch is
// one call under the bound when the bounded ledger keeps batches (one
// request to SQLite's writer); otherwise it answers deliverylog.ErrNoBatch
// and deliverylog.AppendBatch appends operation by operation, each call
// bounded (Firestore).
func (b *Bounded) AppendDeliveryBatch(ctx context.Context, batch []deliverylog.Append, r deliverylog.Retention) error {
	d, ok := b.l.(deliverylog.BatchStore)
	if !ok {
		if _, ok := b.l.(deliverylog.Store); !ok {
			return fmt.Errorf("%s: delivery log: %w", b.where, ErrUnsupported)
		}
		return fmt.Errorf("%s: %w", b.where, deliverylog.ErrNoBatch)
	}
	_, err := call(b, ctx, "a write", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.AppendDeliveryBatch(ctx, batch, r)
	})
	return err
}

// ListDeliveries implements deliverylog.Store when the bounded ledger does.
func (b *Bounded) ListDeliveries(ctx context.Context, opID string) ([]deliverylog.Entry, error) {
	d, ok := b.l.(deliverylog.Store)
	if !ok {
		return nil, fmt.Errorf("%s: delivery log: %w", b.where, ErrUnsupported)
	}
	return call(b, ctx, "a read", func(ctx context.Context) ([]deliverylog.Entry, error) { return d.ListDeliveries(ctx, opID) })
}

// GetIntent implements Reads.
func (b *Bounded) GetIntent(ctx context.Context, key string) (Intent, error) {
	return call(b, ctx, "a read", func(ctx context.Context) (Intent, error) { return b.l.GetIntent(ctx, key) })
}

// UnboundIntents implements Queries.
func (b *Bounded) UnboundIntents(ctx context.Context, before time.Time, after IntentCursor, limit int) ([]Intent, error) {
	return call(b, ctx, "a query", func(ctx context.Context) ([]Intent, error) {
		return b.l.UnboundIntents(ctx, before, after, limit)
	})
}

// CountUnboundIntents implements Queries.
func (b *Bounded) CountUnboundIntents(ctx context.Context, before time.Time) (int64, error) {
	return call(b, ctx, "a count", func(ctx context.Context) (int64, error) { return b.l.CountUnboundIntents(ctx, before) })
}

// IntentAlertsDue implements Queries.
func (b *Bounded) IntentAlertsDue(ctx context.Context, cutoff time.Time, limit int) ([]Intent, error) {
	return call(b, ctx, "a query", func(ctx context.Context) ([]Intent, error) { return b.l.IntentAlertsDue(ctx, cutoff, limit) })
}
