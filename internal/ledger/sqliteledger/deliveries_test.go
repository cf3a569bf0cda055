package sqliteledger

import (
	"fmt"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
)

// TestDeliveryBatchIsOneTransaction: a batch of 100 operations' appends is
// one write of one transaction; every operation's log holds
// its entries, one with a stored log merges by Merge's rules (newest first,
// at most Keep), and an expired log is deleted by the batch.
func TestDeliveryBatchIsOneTransaction(t *testing.T) {
	const n = 100
	ctx := t.Context()
	s := openTemp(t)
	at := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	r := deliverylog.Retention{Keep: 5, TTL: time.Hour}
	entry := func(id string, sec int) deliverylog.Entry {
		return deliverylog.Entry{At: at.Add(time.Duration(sec) * time.Second), Source: deliverylog.SourceWebhook,
			DeliveryID: id, Outcome: "duplicate", Answer: 200}
	}
	// op0 has a log already; "stale" has one whose newest entry is older
	// than the TTL before the batch's.
	if err := s.AppendDeliveries(ctx, "op0", []deliverylog.Entry{entry("s1", 1), entry("s3", 3), entry("s5", 5)}, r); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendDeliveries(ctx, "stale", []deliverylog.Entry{{At: at.Add(-2 * time.Hour), Outcome: "applied"}}, r); err != nil {
		t.Fatal(err)
	}
	batch := []deliverylog.Append{{OpID: "op0", Entries: []deliverylog.Entry{entry("a2", 2), entry("a4", 4), entry("a6", 6), entry("a0", 0)}}}
	for i := 1; i < n; i++ {
		batch = append(batch, deliverylog.Append{OpID: fmt.Sprint("op", i), Entries: []deliverylog.Entry{entry("x", i), entry("y", i+1)}})
	}
	before := s.Stats()
	if err := s.AppendDeliveryBatch(ctx, batch, r); err != nil {
		t.Fatal(err)
	}
	after := s.Stats()
	if tx, w := after.Transactions-before.Transactions, after.Writes-before.Writes; tx != 1 || w != 1 {
		t.Errorf("a batch of %d operations took %d transactions and %d writes, want 1 and 1", n, tx, w)
	}
	if ids := ledgertest.DeliveryIDs(t, s, "op0"); fmt.Sprint(ids) != "[a6 s5 a4 s3 a2]" {
		t.Errorf("op0's merged log %v, want [a6 s5 a4 s3 a2] (newest first, Keep 5)", ids)
	}
	for i := 1; i < n; i++ {
		got, err := s.ListDeliveries(ctx, fmt.Sprint("op", i))
		if err != nil || len(got) != 2 || got[0].DeliveryID != "y" {
			t.Fatalf("op%d's log %+v, %v; want y then x", i, got, err)
		}
	}
	if got, err := s.ListDeliveries(ctx, "stale"); err != nil || len(got) != 0 {
		t.Errorf("the expired log is still there: %+v, %v", got, err)
	}
}
