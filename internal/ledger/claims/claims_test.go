package claims_test

import (
	"testing"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims/claimstest"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
)

// TestProtocol runs the protocol's suite once, on the memory ledger; the
// SQLite and Firestore adapters' tests run it on theirs.
func TestProtocol(t *testing.T) {
	claimstest.Run(t, func(*testing.T) ledger.Ledger { return memledger.New() })
}
