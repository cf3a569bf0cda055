package memledger

import (
	"testing"

	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
)

func TestPruneSettled(t *testing.T) {
	ledgertest.RunPrune(t, func(*testing.T) ledgertest.Pruner { return New() })
}
