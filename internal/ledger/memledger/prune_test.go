package memledger

import (
	"testing"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
)

func TestPruneSettled(t *testing.T) {
	ledgertest.RunPrune(t, func(*testing.T) ledgertest.Pruner { return New() })
}

// TestRetentionRule: the port's retention rule, by a prune: nothing owing
// its message is deleted, however old.
func TestRetentionRule(t *testing.T) {
	ledgertest.RunRetention(t, func(*testing.T) ledger.Ledger { return New() }, ledgertest.PrunedBy)
}

// TestRetentionBeyondClaimTTL: with LROSINK_RETENTION=400d a published
// operation is pruned 400 days after its settlement, its claim long gone.
func TestRetentionBeyondClaimTTL(t *testing.T) {
	ledgertest.RunRetentionBeyondClaimTTL(t, func(*testing.T) ledger.Ledger { return New() }, ledgertest.PruneExpiry)
}

// TestIntentRetention: a prune deletes a bound intent IntentKeep past the
// retention after its binding, never an unbound one.
func TestIntentRetention(t *testing.T) {
	ledgertest.RunIntentRetention(t, func(*testing.T) ledger.Ledger { return New() }, ledgertest.PruneExpiry)
}
