package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/fsledger"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestRetention: with a retention of 8 days, an operation settled (and its
// message published) is deleted once 8 days have passed: by the pass on
// SQLite and memory, by the TTL policy on Firestore, which needs the
// document's expire_at = settled_at + 8 d. A pending operation is kept, and
// has no expire_at. So with 400 days, longer than its claim is kept (30
// days): SQLite and memory used to prune only operations whose claim was
// there and DONE, so once the claim had expired every pass pruned 0.
func TestRetention(t *testing.T) {
	for _, days := range []int{8, 400} {
		t.Run(fmt.Sprintf("%dd", days), func(t *testing.T) { testRetention(t, time.Duration(days)*24*time.Hour) })
	}
}

func testRetention(t *testing.T, retention time.Duration) {
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

// downSink fails every publish while down.
type downSink struct {
	down atomic.Bool
	testutil.Recorder
}

func (d *downSink) Publish(ctx context.Context, m results.Message) error {
	if d.down.Load() {
		return errors.New("sink down")
	}
	return d.Recorder.Publish(ctx, m)
}

// TestRetentionWaitsForThePublish: an operation whose results message is
// still owed is kept past the retention, whatever its age, on every store.
// Its sink is down for 9 days of an 8-day retention; once it is back, the
// next claim retry publishes the message. Firestore's TTL policy (which the
// emulator does not run) is played by deleting what expire_at says it
// deletes; Firestore used to give an owed operation its expire_at too, and
// the completion was lost once the TTL policy deleted it.
func TestRetentionWaitsForThePublish(t *testing.T) {
	const retention = 8 * 24 * time.Hour
	run := func(t *testing.T, s ledger.Ledger, ttl func(now time.Time)) {
		sink := &downSink{}
		sink.down.Store(true)
		fake, clk, door, rec := retentionRig(t, s, sink, retention, 0)
		fake.SetBatch("owed", succeeded("owed"))
		mustRegister(t, door, "batches/owed")
		clk.Advance(2 * time.Minute)
		mustPass(t, rec) // settles; the publish fails; the claim is released
		for range 9 {    // the claim is retried every pass; one a day here
			clk.Advance(24 * time.Hour)
			ttl(clk.Now())
			if s := mustPass(t, rec); s.Pruned != 0 {
				t.Fatalf("pass %+v pruned an operation owing its message", s)
			}
		}
		sink.down.Store(false)
		clk.Advance(time.Hour)
		ttl(clk.Now())
		if s := mustPass(t, rec); s.ClaimsRetried != 1 || s.Errors != 0 {
			t.Errorf("pass after the sink recovered: %+v, want the claim retried without error", s)
		}
		if n := sink.PerKey()["gemini:batches/owed"]; n != 1 {
			t.Fatalf("%d results messages, want 1", n)
		}
		// Published now, settled 9 days ago: past the retention, it goes.
		clk.Advance(time.Minute)
		ttl(clk.Now())
		mustPass(t, rec)
		if _, err := s.GetOperation(t.Context(), "gemini:batches%2Fowed"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("published operation past its retention: %v, want it deleted", err)
		}
	}
	eachRetentionStore(t, retention, []string{fsledger.Operations}, run)
}

// TestAdoptionLeavesPrunedJobsAlone: a settled, published batch job stays
// on Gemini's listing, which adoption reads every pass. Once retention has
// deleted its operation, adoption used to take it for a new job: an error
// every pass while its DONE claim was kept, then, once the claim had
// expired (30 days), a second results message. Adoption now leaves alone
// the jobs that settled longer ago than the retention, on every store.
func TestAdoptionLeavesPrunedJobsAlone(t *testing.T) {
	const retention = 8 * 24 * time.Hour
	run := func(t *testing.T, s ledger.Ledger, ttl func(now time.Time)) {
		sink := &testutil.Recorder{}
		fake, clk, door, rec := retentionRig(t, s, sink, retention, 50)
		fake.SetBatch("done", succeeded("done"))
		mustRegister(t, door, "batches/done")
		clk.Advance(2 * time.Minute)
		if s := mustPass(t, rec); s.Settled != 1 {
			t.Fatalf("first pass %+v: want 1 settled", s)
		}
		// Day by day past the retention (the operation goes) and past the
		// claim's 30 days (the claim goes too).
		for day := 1; day <= 40; day++ {
			clk.Advance(24 * time.Hour)
			ttl(clk.Now())
			if s := mustPass(t, rec); s.Errors != 0 || s.Adopted != 0 {
				t.Fatalf("pass on day %d: %+v, want no adoption and no error", day, s)
			}
		}
		if _, err := s.GetOperation(t.Context(), "gemini:batches%2Fdone"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("operation after 40 days: %v, want it deleted by the retention", err)
		}
		if n := sink.PerKey()["gemini:batches/done"]; n != 1 {
			t.Fatalf("%d results messages, want 1", n)
		}
		// An orphan that settled within the retention is still adopted.
		fake.SetBatch("orphan", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: clk.Now().Add(-time.Hour), ResponsesFile: "files/out-orphan"})
		if s := mustPass(t, rec); s.Adopted != 1 || s.Settled != 1 {
			t.Fatalf("pass with a recent orphan: %+v, want it adopted and settled", s)
		}
	}
	eachRetentionStore(t, retention, []string{fsledger.Operations, fsledger.Claims}, run)
}

// retentionRig is a fake Gemini, a clock, and a door and reconciler on s
// with retention (and the store's own pruning, where it prunes in the
// pass), publishing to sink; adopt is the adoption page size (0: none).
func retentionRig(t *testing.T, s ledger.Ledger, sink ingest.Sink, retention time.Duration, adopt int) (*fakegemini.Server, *testutil.Clock, *ingest.Door, *reconcile.Reconciler) {
	t.Helper()
	fake := fakegemini.New()
	srv := fake.Start(t)
	clk := testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	log := logging.New(&testutil.SyncBuffer{}, slog.LevelInfo, "")
	door, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: sink, Log: log, Now: clk.Now, Grace: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := reconcile.Config{Ledger: claims.New(s), Door: door, Gemini: fakeFetcher(t, srv, log), Log: log, Now: clk.Now,
		StuckAfter: 60 * 24 * time.Hour, BackoffMax: time.Hour, Retention: retention, AdoptPageSize: adopt}
	if p, ok := s.(reconcile.Pruner); ok {
		cfg.Pruner = p
	}
	rec, err := reconcile.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fake, clk, door, rec
}

// eachRetentionStore runs run on the memory, SQLite and Firestore ledgers
// with retention. ttl(now) plays Firestore's TTL policies on the given
// collections (the emulator runs none): it deletes what expire_at says
// they delete by now. The other stores prune in the pass: their ttl does
// nothing.
func eachRetentionStore(t *testing.T, retention time.Duration, ttlCollections []string, run func(t *testing.T, s ledger.Ledger, ttl func(now time.Time))) {
	t.Run("memory", func(t *testing.T) { run(t, testutil.MemLedger(t), func(time.Time) {}) })
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqliteledger.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		run(t, s, func(time.Time) {})
	})
	t.Run("firestore", func(t *testing.T) {
		client := testutil.Firestore(t)
		ttl := func(now time.Time) {
			for _, coll := range ttlCollections {
				snaps, err := client.Collection(coll).Where("expire_at", "<=", now).Documents(t.Context()).GetAll()
				if err != nil {
					t.Fatal(err)
				}
				for _, snap := range snaps {
					if _, err := snap.Ref.Delete(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		run(t, fsledger.New(client, nil).WithRetention(retention), ttl)
	})
}

// goneOp is a memory ledger from which operation id has been deleted out
// of band (its claim kept), as the port shows it: reads find nothing and
// writes needing it fail their precondition.
type goneOp struct {
	*memledger.Store
	id   string
	gone atomic.Bool
}

func (g *goneOp) GetOperation(ctx context.Context, id string) (ledger.Operation, error) {
	if g.gone.Load() && id == g.id {
		return ledger.Operation{}, fmt.Errorf("operation %s: %w", id, ledger.ErrNotFound)
	}
	return g.Store.GetOperation(ctx, id)
}

func (g *goneOp) Apply(ctx context.Context, writes ...ledger.Write) ([]ledger.Revision, error) {
	for _, w := range writes {
		if g.gone.Load() && ((w.Mirror != nil && w.Mirror.OpID == g.id) || (w.Op != nil && w.Op.ID == g.id)) {
			return nil, fmt.Errorf("operation %s gone: %w", g.id, ledger.ErrConflict)
		}
	}
	return g.Store.Apply(ctx, writes...)
}

// TestClaimWithoutItsOperationIsAnError: a claim owing its message whose
// operation is gone cannot be seized (the seize patches the operation's
// mirror). Its retry used to read as in-progress-elsewhere, with no error
// and no alert, every pass: the message was lost in silence. It is now an
// error with the claim-missing alert's ERROR line, "cause":"operation-missing".
func TestClaimWithoutItsOperationIsAnError(t *testing.T) {
	t.Parallel()
	mem := memledger.New()
	store := &goneOp{Store: mem, id: "gemini:batches%2Fowed"}
	w := newWorldOn(t, 0, store, func() int64 { r, _, _ := mem.Counts().Snapshot(); return r })
	sink := &downSink{}
	sink.down.Store(true)
	door, err := ingest.New(ingest.Config{Store: claims.New(store), Sink: sink, Log: logging.New(w.logs, slog.LevelInfo, ""),
		Now: w.clock.Now, Grace: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w.fake.SetBatch("owed", succeeded("owed"))
	if _, err := door.Ingest(t.Context(), event.Event{Name: "batches/owed", State: lifecycle.Succeeded, Source: event.SourceWebhook,
		UpdateTime: tDone, Output: map[string]any{"responses_file": "files/out-owed"}}); !errors.Is(err, ingest.ErrSideEffect) {
		t.Fatalf("first delivery with the sink down: %v, want a side-effect error", err)
	}
	store.gone.Store(true)
	sink.down.Store(false)
	w.clock.Advance(time.Minute)
	if _, err := door.RetryClaim(t.Context(), "gemini:batches%2Fowed"); !errors.Is(err, ingest.ErrOperationMissing) || !errors.Is(err, ingest.ErrClaimMissing) {
		t.Fatalf("retry of a claim whose operation is gone: %v, want ErrOperationMissing (a claim-missing error)", err)
	}
	if n := w.logs.CountLines(`"alert":"claim-missing","cause":"operation-missing"`); n != 1 {
		t.Fatalf("%d operation-missing alerts, want 1", n)
	}

	// The runbook's remedy: lrosink replay publishes the claim's message and
	// closes the claim, so the alert stops (it used to repeat every pass,
	// the replay unable to record anything on the missing operation).
	if _, err := door.Replay(t.Context(), "batches/owed", opname.KindUnknown); err != nil {
		t.Fatalf("replay of a claim whose operation is gone: %v", err)
	}
	if got := sink.All(); len(got) != 1 || got[0].Operation != "batches/owed" || got[0].ReplayID == "" {
		t.Fatalf("published %+v, want the claim's message once, as a replay", got)
	}
	if c, err := store.GetClaim(t.Context(), "gemini:batches%2Fowed"); err != nil || c.Status != ledger.ClaimDone {
		t.Fatalf("claim %+v %v after the replay, want DONE", c, err)
	}
	w.clock.Advance(time.Minute)
	if _, err := door.RetryClaim(t.Context(), "gemini:batches%2Fowed"); err != nil {
		t.Fatalf("retry after the replay: %v", err)
	}
	if n := w.logs.CountLines(`"cause":"operation-missing"`); n != 1 || len(sink.All()) != 1 {
		t.Fatalf("after the replay: %d operation-missing alerts, %d messages; want 1 and 1", n, len(sink.All()))
	}
}
