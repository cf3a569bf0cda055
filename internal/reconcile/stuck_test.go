package reconcile_test

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/shard"
	"github.com/lrosink/lrosink/internal/testutil"
)

// storeWorld is a door and a reconciler on the given ledger, the real genai
// SDK against the fake Gemini, and a fake clock.
type storeWorld struct {
	t     *testing.T
	door  *ingest.Door
	fake  *fakegemini.Server
	rec   *reconcile.Reconciler
	clock *clock
	logs  *testutil.SyncBuffer
}

func newStoreWorld(t *testing.T, s ledger.Ledger, tune func(*reconcile.Config)) *storeWorld {
	t.Helper()
	w := &storeWorld{t: t, fake: fakegemini.New(), logs: &testutil.SyncBuffer{},
		clock: testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))}
	log := logging.New(w.logs, slog.LevelInfo, "")
	// A fault-injecting wrapper already has the protocol: keep its steps.
	var p interface {
		ingest.Store
		reconcile.Ledger
	} = claims.New(s)
	if wrapped, ok := s.(interface {
		ingest.Store
		reconcile.Ledger
	}); ok {
		p = wrapped
	}
	var err error
	if w.door, err = ingest.New(ingest.Config{Store: p, Sink: &testutil.Recorder{}, Log: log, Now: w.clock.Now, Grace: 90 * time.Second}); err != nil {
		t.Fatal(err)
	}
	srv := w.fake.Start(t)
	cfg := reconcile.Config{Ledger: p, Door: w.door, Gemini: fakeFetcher(t, srv, log), Log: log, Now: w.clock.Now, StuckAfter: 6 * time.Hour}
	if tune != nil {
		tune(&cfg)
	}
	if w.rec, err = reconcile.New(cfg); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *storeWorld) register(name string)    { w.t.Helper(); mustRegister(w.t, w.door, name) }
func (w *storeWorld) pass() reconcile.Summary { w.t.Helper(); return mustPass(w.t, w.rec) }

// TestStuckAlertSchedule: an operation that never finishes is alerted once
// when it becomes stuck and then 1 h, 6 h, 24 h and every 24 h after that,
// not on every pass; each pass summary counts it as stuck.
func TestStuckAlertSchedule(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		w := newStoreWorld(t, s, nil)
		w.fake.SetBatch("forever", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
		w.register("batches/forever")
		start := w.clock.Now()
		var alertsAt []time.Duration
		passes := 0
		for w.clock.Now().Sub(start) <= 55*time.Hour {
			before := w.logs.CountLines(`"alert":"stuck"`)
			sum := w.pass()
			passes++
			elapsed := w.clock.Now().Sub(start)
			if n := w.logs.CountLines(`"alert":"stuck"`) - before; n > 0 {
				alertsAt = append(alertsAt, elapsed)
			}
			if wantStuck := elapsed >= 6*time.Hour; (sum.Stuck == 1) != wantStuck {
				t.Fatalf("at +%v: summary stuck %d, want stuck=%v (%+v)", elapsed, sum.Stuck, wantStuck, sum)
			}
			w.clock.Advance(10 * time.Minute)
		}
		want := []time.Duration{6 * time.Hour, 7 * time.Hour, 12 * time.Hour, 30 * time.Hour, 54 * time.Hour}
		if len(alertsAt) != len(want) {
			t.Fatalf("%d stuck alert lines over %d passes, first at %v, want %d at %v", len(alertsAt), passes, alertsAt[:min(len(alertsAt), 8)], len(want), want)
		}
		for i := range want {
			if alertsAt[i] != want[i] {
				t.Fatalf("stuck alerts at %v, want %v", alertsAt, want)
			}
		}
		if n := w.logs.CountLines(`"message":"reconcile pass"`); n != passes || w.logs.CountLines(`"stuck":1`) == 0 {
			t.Fatalf("%d pass lines for %d passes, or none counts the stuck operation", n, passes)
		}
	})
}

// TestStuckScanReachesEveryStuckOperation: stuck operations are never
// closed, so more of them than a pass reads (MaxOperations) must not hide
// the others. Two old stuck operations and one that becomes stuck later,
// MaxOperations 2, 48 h of passes every 10 minutes: each is alerted on its
// own cadence (when it became stuck, then 1 h, 6 h, 24 h later, then daily),
// one line per operation per due alert, and each pass still counts all
// three as stuck.
func TestStuckScanReachesEveryStuckOperation(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		w := newStoreWorld(t, s, func(c *reconcile.Config) { c.MaxOperations = 2 })
		names := []string{"old1", "old2", "new"}
		for _, n := range names {
			w.fake.SetBatch(n, fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
		}
		start := w.clock.Now()
		w.register("batches/old1")
		w.register("batches/old2")
		alerts := map[string][]time.Duration{}
		registeredNew, miscounted := false, false
		for w.clock.Now().Sub(start) <= 56*time.Hour {
			elapsed := w.clock.Now().Sub(start)
			if !registeredNew && elapsed >= 3*time.Hour {
				w.register("batches/new") // stuck from +9h, while old1 and old2 are
				registeredNew = true
			}
			before := w.logs.String()
			sum := w.pass()
			for _, line := range strings.Split(strings.TrimPrefix(w.logs.String(), before), "\n") {
				if !strings.Contains(line, `"alert":"stuck"`) {
					continue
				}
				for _, n := range names {
					if strings.Contains(line, `"operation":"batches/`+n+`"`) {
						alerts[n] = append(alerts[n], elapsed)
					}
				}
			}
			if elapsed >= 9*time.Hour && sum.Stuck != 3 && !miscounted {
				miscounted = true
				t.Errorf("at +%v the summary counts %d stuck, want 3 (%+v)", elapsed, sum.Stuck, sum)
			}
			w.clock.Advance(10 * time.Minute)
		}
		h := time.Hour
		want := map[string][]time.Duration{
			"old1": {6 * h, 7 * h, 12 * h, 30 * h, 54 * h},
			"old2": {6 * h, 7 * h, 12 * h, 30 * h, 54 * h},
			"new":  {9 * h, 10 * h, 15 * h, 33 * h},
		}
		for _, n := range names {
			if !slices.Equal(alerts[n], want[n]) {
				t.Errorf("%s alerted at %v, want %v", n, alerts[n], want[n])
			}
		}
	})
}

// TestStuckKeyLeftByAnEarlierVersionIsCleared: a version from before the
// stuck key settles an operation without clearing its stuck_from (a
// rollback, here its UPDATE statement on the SQLite file). The next pass
// raises no stuck line for the settled operation and takes it out of the
// scan.
func TestStuckKeyLeftByAnEarlierVersionIsCleared(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := sqliteledger.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	w := newStoreWorld(t, s, nil)
	w.fake.SetBatch("rolled", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	w.register("batches/rolled")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The earlier version's settle: every column it knows, not stuck_from.
	if _, err := db.ExecContext(t.Context(), `UPDATE operations SET state = 'SUCCEEDED', next_check_at = NULL,
		pending_since = NULL, version = version + 1 WHERE id = 'gemini:batches%2Frolled'`); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(7 * time.Hour)
	if sum := w.pass(); sum.StuckAlerts != 0 || sum.Stuck != 0 || w.logs.CountLines(`"alert":"stuck"`) != 0 {
		t.Fatalf("a settled operation was alerted as stuck: %+v\n%s", sum, w.logs.String())
	}
	if left, err := s.StuckOperations(t.Context(), shard.All(), w.clock.Now(), 10); err != nil || len(left) != 0 {
		t.Fatalf("still in the stuck scan: %v, %v", left, err)
	}
}

// barrierStuck holds each stuck scan until two have read: two passes over
// one range then read the same revisions, as a redelivered shard request
// running beside the first delivery does.
type barrierStuck struct {
	ledger.Ledger
	wg *sync.WaitGroup
}

func (b barrierStuck) StuckOperations(ctx context.Context, rg shard.Range, cutoff time.Time, limit int) ([]ledger.Operation, error) {
	ops, err := b.Ledger.StuckOperations(ctx, rg, cutoff, limit)
	b.wg.Done()
	b.wg.Wait()
	return ops, err
}

// TestOverlappingPassesAlertStuckOnce: two passes of one range at once
// raise one stuck alert for a stuck operation, not one each: the line is
// written only by the pass whose fenced record of it wins.
func TestOverlappingPassesAlertStuckOnce(t *testing.T) {
	t.Parallel()
	s := testutil.MemLedger(t)
	var wg sync.WaitGroup
	wg.Add(2)
	w := newWorldOn(t, 0, barrierStuck{s, &wg}, func() int64 { return 0 })
	w.fake.SetBatch("x1", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	w.register("batches/x1")
	w.clock.Advance(7 * time.Hour)
	var passes sync.WaitGroup
	for range 2 {
		passes.Add(1)
		go func() {
			defer passes.Done()
			if _, err := w.rec.PassRange(t.Context(), shard.All()); err != nil {
				t.Error(err)
			}
		}()
	}
	passes.Wait()
	if n := w.logs.CountLines(`"alert":"stuck"`); n != 1 {
		t.Fatalf("%d stuck alert lines for one stuck operation, want 1", n)
	}
}
