package reconcile_test

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/fsledger"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestRetention: with a retention of 8 days, an operation settled (and its
// message published) is deleted once 8 days have passed: by the pass on
// SQLite and memory, by the TTL policy on Firestore, which needs the
// document's expire_at = settled_at + 8 d. A pending operation is kept, and
// has no expire_at.
func TestRetention(t *testing.T) {
	const retention = 8 * 24 * time.Hour
	run := func(t *testing.T, s ledger.Ledger, client *firestore.Client) {
		fake := fakegemini.New()
		srv := fake.Start(t)
		clk := testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
		log := logging.New(&testutil.SyncBuffer{}, slog.LevelInfo, "")
		door, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: &testutil.Recorder{}, Log: log, Now: clk.Now, Grace: 90 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		cfg := reconcile.Config{Ledger: claims.New(s), Door: door, Gemini: fakeFetcher(t, srv, log), Log: log, Now: clk.Now,
			StuckAfter: 30 * 24 * time.Hour, BackoffMax: time.Hour, Retention: retention}
		if p, ok := s.(reconcile.Pruner); ok {
			cfg.Pruner = p
		}
		rec, err := reconcile.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		fake.SetBatch("done", succeeded("done"))
		fake.SetBatch("slow", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
		mustRegister(t, door, "batches/done")
		mustRegister(t, door, "batches/slow")
		clk.Advance(2 * time.Minute)
		if s := mustPass(t, rec); s.Settled != 1 || s.Pruned != 0 {
			t.Fatalf("first pass %+v: want 1 settled, none pruned", s)
		}
		settledAt := clk.Now()
		doneID, slowID := "gemini:batches%2Fdone", "gemini:batches%2Fslow"
		if client != nil {
			for id, want := range map[string]time.Time{doneID: settledAt.Add(retention), slowID: {}} {
				snap, err := client.Collection(fsledger.Operations).Doc(id).Get(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				got, _ := snap.Data()["expire_at"].(time.Time)
				if !got.Equal(want) {
					t.Errorf("%s: expire_at %v, want %v", id, got, want)
				}
			}
			return
		}
		clk.Advance(retention - time.Minute)
		if s := mustPass(t, rec); s.Pruned != 0 {
			t.Fatalf("pass before the retention ends pruned %d", s.Pruned)
		}
		clk.Advance(time.Minute)
		if s := mustPass(t, rec); s.Pruned != 1 || s.Errors != 0 {
			t.Fatalf("pass at the end of the retention %+v: want 1 pruned", s)
		}
		if _, err := s.GetOperation(t.Context(), doneID); err == nil {
			t.Error("the settled operation is still there")
		}
		if _, err := s.GetOperation(t.Context(), slowID); err != nil {
			t.Errorf("the pending operation: %v", err)
		}
	}
	t.Run("memory", func(t *testing.T) { run(t, testutil.MemLedger(t), nil) })
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqliteledger.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		run(t, s, nil)
	})
	t.Run("firestore", func(t *testing.T) {
		client := testutil.Firestore(t)
		run(t, fsledger.New(client, nil).WithRetention(retention), client)
	})
}
