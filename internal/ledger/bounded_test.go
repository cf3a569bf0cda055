package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
)

// hanging is a store whose reads wait until their context ends, as the
// Firestore client does against an unreachable host.
type hanging struct{ ledger.Ledger }

func (hanging) GetOperation(ctx context.Context, _ string) (ledger.Operation, error) {
	<-ctx.Done()
	return ledger.Operation{}, ctx.Err()
}

// TestBoundedCutsOffAHangingCall: a call the store never answers fails
// with ErrNoAnswer naming the store; a call its caller gave up on is the
// caller's error, not blamed on the store.
func TestBoundedCutsOffAHangingCall(t *testing.T) {
	b := ledger.NewBounded(hanging{}, 50*time.Millisecond, "Firestore emulator at 127.0.0.1:9 (FIRESTORE_EMULATOR_HOST)")
	_, err := b.GetOperation(t.Context(), "x")
	if !errors.Is(err, ledger.ErrNoAnswer) || !strings.Contains(err.Error(), "127.0.0.1:9") {
		t.Fatalf("hanging read: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.GetOperation(ctx, "x"); errors.Is(err, ledger.ErrNoAnswer) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled read: %v", err)
	}
}

// batchLedger is a memory ledger that appends delivery batches, counting
// them; hang makes a batch wait until its context ends.
type batchLedger struct {
	*memledger.Store
	hang    bool
	batches int
}

func (l *batchLedger) AppendDeliveryBatch(ctx context.Context, batch []deliverylog.Append, r deliverylog.Retention) error {
	if l.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	l.batches++
	for _, a := range batch {
		if err := l.Store.AppendDeliveries(ctx, a.OpID, a.Entries, r); err != nil {
			return err
		}
	}
	return nil
}

// TestBoundedForwardsDeliveryBatches: over a store with batches, a batch is
// one call of the store's, cut off by the bound when it hangs; over one
// without (Firestore's case), AppendBatch appends each operation.
func TestBoundedForwardsDeliveryBatches(t *testing.T) {
	ctx := t.Context()
	batch := []deliverylog.Append{
		{OpID: "a", Entries: []deliverylog.Entry{{At: time.Now(), Outcome: "applied"}}},
		{OpID: "b", Entries: []deliverylog.Entry{{At: time.Now(), Outcome: "duplicate"}}},
	}
	inner := &batchLedger{Store: memledger.New()}
	b := ledger.NewBounded(inner, time.Minute, "test store")
	if lost, err := deliverylog.AppendBatch(ctx, b, batch, deliverylog.Retention{}); err != nil || lost != 0 {
		t.Fatalf("AppendBatch: %d lost, %v", lost, err)
	}
	if inner.batches != 1 {
		t.Errorf("the bounded store made %d batch calls, want 1", inner.batches)
	}
	for _, id := range []string{"a", "b"} {
		if got, err := b.ListDeliveries(ctx, id); err != nil || len(got) != 1 {
			t.Errorf("%s's log: %+v, %v", id, got, err)
		}
	}

	hung := ledger.NewBounded(&batchLedger{Store: memledger.New(), hang: true}, 50*time.Millisecond, "127.0.0.1:9")
	lost, err := deliverylog.AppendBatch(ctx, hung, batch, deliverylog.Retention{})
	if lost != 2 || !errors.Is(err, ledger.ErrNoAnswer) || !strings.Contains(err.Error(), "127.0.0.1:9") {
		t.Errorf("hanging batch: %d lost, %v; want 2 lost, no answer from 127.0.0.1:9", lost, err)
	}

	plain := ledger.NewBounded(memledger.New(), time.Minute, "test store")
	if err := plain.AppendDeliveryBatch(ctx, batch, deliverylog.Retention{}); !errors.Is(err, deliverylog.ErrNoBatch) {
		t.Errorf("a store without batches answered %v, want ErrNoBatch", err)
	}
	if lost, err := deliverylog.AppendBatch(ctx, plain, batch, deliverylog.Retention{}); err != nil || lost != 0 {
		t.Fatalf("AppendBatch's fallback: %d lost, %v", lost, err)
	}
	for _, id := range []string{"a", "b"} {
		if got, err := plain.ListDeliveries(ctx, id); err != nil || len(got) != 1 {
			t.Errorf("fallback: %s's log: %+v, %v", id, got, err)
		}
	}
}

// TestAsFindsTheStoreBehindWrappers: As returns the outermost ledger of
// the type asked for, looking through Bounded (and wrappers of it), and
// reports false when none is.
func TestAsFindsTheStoreBehindWrappers(t *testing.T) {
	mem := memledger.New()
	b := ledger.NewBounded(ledger.NewBounded(mem, time.Second, "inner"), time.Second, "outer")
	if got, ok := ledger.As[*memledger.Store](b); !ok || got != mem {
		t.Errorf("As[*memledger.Store] = %p, %v; want the store %p", got, ok, mem)
	}
	if got, ok := ledger.As[interface{ Where() string }](b); !ok || got.Where() != "outer" {
		t.Errorf("As[Where] found %v, %v; want the outermost wrapper", got, ok)
	}
	if _, ok := ledger.As[*hanging](b); ok {
		t.Error("As found a type nothing in the chain is")
	}
	if _, ok := ledger.As[*memledger.Store](nil); ok {
		t.Error("As found something in a nil ledger")
	}
}
