package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
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
