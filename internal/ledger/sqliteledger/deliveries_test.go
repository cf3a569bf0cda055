package sqliteledger

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
)

// TestDeliveryBatchIsOneTransaction: a batch of 100 operations' appends is
// one write of one transaction; every operation's log holds its entries,
// one with a stored log merges by Merge's rules (newest first, at most
// Keep), and an expired entry is deleted by the batch.
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

// TestMigratesDeliveryLogs: a version-8 database's delivery logs (a row per
// operation, its entries a JSON array newest first) read back the same
// after Open moved them to one row per entry, and later appends merge with
// them by Merge's rules; the old table is gone.
func TestMigratesDeliveryLogs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v8.db")
	ctx := t.Context()
	at := time.Date(2026, 11, 25, 8, 0, 0, 123456789, time.UTC)
	logs := map[string][]deliverylog.Entry{
		"op1": {
			{At: at.Add(2 * time.Second), Source: deliverylog.SourceWebhook, DeliveryID: "msg_2", Status: "batch.succeeded",
				Auth: "v1", Outcome: "duplicate", Reason: "same-terminal", Answer: 200, Latency: 1234 * time.Microsecond},
			{At: at, Source: deliverylog.SourceWebhook, DeliveryID: "msg_1", Status: "batch.succeeded", Auth: "v1a",
				Outcome: "completed", Answer: 200, Latency: 5 * time.Millisecond},
		},
		"op2": {{At: at.Add(time.Second), Source: deliverylog.SourceReconcile, Status: "JOB_STATE_RUNNING", Outcome: "applied"}},
	}
	s := openAt(t, path)
	if _, err := s.writer.ExecContext(ctx, `DROP TABLE delivery_entries;
CREATE TABLE deliveries (op_id TEXT PRIMARY KEY, expire_at INTEGER NOT NULL, entries TEXT NOT NULL) STRICT;
CREATE INDEX deliveries_expire_at ON deliveries (expire_at);
DROP TABLE intents; ALTER TABLE operations DROP COLUMN intent;
UPDATE schema_version SET version = 8`); err != nil {
		t.Fatal(err)
	}
	for id, entries := range logs {
		js, err := ledger.EncodeDeliveries(entries)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.writer.ExecContext(ctx, `INSERT INTO deliveries (op_id, expire_at, entries) VALUES (?, 0, ?)`, id, string(js)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	for id, want := range logs {
		got, err := s.ListDeliveries(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s after migration:\n got %+v\nwant %+v", id, got, want)
		}
	}
	var n int
	if err := s.writer.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = 'deliveries'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the version-8 table is still there (%d, %v)", n, err)
	}
	r := deliverylog.Retention{Keep: 2, TTL: time.Hour}
	if err := s.AppendDeliveries(ctx, "op1", []deliverylog.Entry{{At: at.Add(time.Second), DeliveryID: "msg_new", Outcome: "duplicate"}}, r); err != nil {
		t.Fatal(err)
	}
	if ids := ledgertest.DeliveryIDs(t, s, "op1"); fmt.Sprint(ids) != "[msg_2 msg_new]" {
		t.Errorf("op1 after an append with Keep 2: %v, want [msg_2 msg_new]", ids)
	}
}

// BenchmarkAppendDeliveries: the Recorder's batches as serve's load makes
// them, 32 operations' entries per batch, 30 % of them to an operation
// logged before (a repeat delivery) and the rest to a new one; reports the
// writer's time per entry.
func BenchmarkAppendDeliveries(b *testing.B) {
	s := openTemp(b)
	ctx := b.Context()
	r := deliverylog.Retention{}
	at := time.Now()
	next := 0
	for b.Loop() {
		batch := make([]deliverylog.Append, 32)
		for j := range batch {
			id := next
			if j%10 < 3 && next > 0 {
				id = (next * 7919) % next
			} else {
				next++
			}
			at = at.Add(time.Microsecond)
			batch[j] = deliverylog.Append{OpID: fmt.Sprint("gemini:batches%2Fbench_", id), Entries: []deliverylog.Entry{{At: at,
				Source: deliverylog.SourceWebhook, DeliveryID: fmt.Sprint("msg_", next, "_", j), Status: "batch.succeeded", Auth: "v1",
				Outcome: "completed", Answer: 200, Latency: 42 * time.Millisecond}}}
		}
		if err := s.AppendDeliveryBatch(ctx, batch, r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*32), "us/entry")
}

// TestDeliveryExpiryKeepsUp: under sustained appends nothing older than the
// delivery log's TTL survives (CONTRACT.md §2).
func TestDeliveryExpiryKeepsUp(t *testing.T) {
	ledgertest.RunDeliveryExpiry(t, func(t *testing.T) ledger.Ledger { return openTemp(t) }, ledgertest.Listed)
}
