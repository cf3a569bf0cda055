package firestore

import (
	"testing"

	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
)

func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Ledger {
		c, _ := emutest.Firestore(t)
		return New(c, nil)
	})
}
