package sqliteledger

import (
	"testing"

	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
)

func TestPruneSettled(t *testing.T) {
	ledgertest.RunPrune(t, func(t *testing.T) ledgertest.Pruner { return openTemp(t) })
}
