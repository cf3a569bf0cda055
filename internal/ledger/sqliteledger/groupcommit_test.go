package sqliteledger

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
	"github.com/lrosink/lrosink/internal/lifecycle"
)

// holdWriter makes the Store's writer run a write that blocks until release
// is called, so that the writes started meanwhile queue up and form one
// group. release waits for the held write's result.
func holdWriter(t testing.TB, s *Store) (release func()) {
	t.Helper()
	started, rel := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var once sync.Once
		// Once: a write may run again when its transaction was lost.
		done <- s.write(context.Background(), label("hold"), func(context.Context, *wtx) error {
			once.Do(func() { close(started) })
			<-rel
			return nil
		})
	}()
	<-started
	return func() {
		close(rel)
		if err := <-done; err != nil {
			t.Errorf("held write: %v", err)
		}
	}
}

// waitQueued waits until n writes are queued behind the held one.
func waitQueued(s *Store, n int) {
	for s.group.queued() < n {
		runtime.Gosched()
	}
}

// staleRead creates operation id and returns it as read at version 1,
// after it has moved on to version 2 (RUNNING): a put of it is fenced out.
func staleRead(t *testing.T, s *Store, id string) ledger.Operation {
	t.Helper()
	ctx := t.Context()
	if _, _, err := claims.New(s).CommitOperation(ctx, ledgertest.Op(id), nil); err != nil {
		t.Fatal(err)
	}
	stale, err := s.GetOperation(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	moved := stale
	moved.State, moved.UpdateTime = lifecycle.Running, t0
	if _, _, err := claims.New(s).CommitOperation(ctx, moved, nil); err != nil {
		t.Fatal(err)
	}
	return stale
}

// TestGroupConflictFailsAlone: writes queued behind a busy writer commit as
// one group; the one fenced out (a stale read) and the one fenced out after
// it had already written its operation (its claim exists) fail alone, with
// nothing of theirs written, and all the others commit.
func TestGroupConflictFailsAlone(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	stale := staleRead(t, s, "x")
	// p: a claim left without its operation, so re-creating p with a claim
	// writes the operation, then conflicts on the claim.
	settle(t, s, "p", "h", far)
	if _, err := s.writer.ExecContext(ctx, `DELETE FROM operations WHERE id = 'p'`); err != nil {
		t.Fatal(err)
	}

	const clean = 8
	before := s.Stats()
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	errs := make([]error, clean)
	for i := range clean {
		wg.Go(func() {
			_, _, errs[i] = claims.New(s).CommitOperation(ctx, ledgertest.Op(fmt.Sprint("c", i)), nil)
		})
	}
	var staleErr, partialErr error
	wg.Go(func() {
		op := stale
		op.State, op.UpdateTime, op.SettledAt, op.SettledBy, op.NextCheckAt = lifecycle.Succeeded, t0, t0, "stale", t0
		_, _, staleErr = claims.New(s).CommitOperation(ctx, op, nil)
	})
	wg.Go(func() {
		_, _, partialErr = claims.New(s).CommitOperation(ctx, ledgertest.Op("p"), ledgertest.Claim("p", "h2", far))
	})
	waitQueued(s, clean+2)
	release()
	wg.Wait()

	for i, err := range errs {
		if err != nil {
			t.Errorf("clean write c%d in the group: %v", i, err)
		}
		if _, err := s.GetOperation(ctx, fmt.Sprint("c", i)); err != nil {
			t.Errorf("clean write c%d not committed: %v", i, err)
		}
	}
	if !errors.Is(staleErr, ledger.ErrConflict) {
		t.Errorf("stale write = %v, want ErrConflict", staleErr)
	}
	if op, err := s.GetOperation(ctx, "x"); err != nil || op.Rev.Version != 2 || op.State != lifecycle.Running {
		t.Errorf("x after the stale write: %+v, %v; want version 2 RUNNING", op, err)
	}
	if !errors.Is(partialErr, ledger.ErrConflict) {
		t.Errorf("write whose claim exists = %v, want ErrConflict", partialErr)
	}
	if _, err := s.GetOperation(ctx, "p"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the failed write's operation was kept (not undone): %v", err)
	}
	after := s.Stats()
	if w := after.Writes - before.Writes; w != clean+1 {
		t.Errorf("writes committed = %d, want %d (the held one and the clean ones)", w, clean+1)
	}
	// The held write's transaction, and at most one more for the group.
	if tx := after.Transactions - before.Transactions; tx > 2 {
		t.Errorf("%d transactions for one held write and one queued group, want at most 2", tx)
	}
}

// TestGroupCancelledWhileQueued: a write whose context ends while it waits
// behind the writer returns the context's error at once and is never
// written, even though the writer runs the group it was queued in.
func TestGroupCancelledWhileQueued(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	release := holdWriter(t, s)
	qctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, _, err := claims.New(s).CommitOperation(qctx, ledgertest.Op("q"), nil)
		got <- err
	}()
	var other error
	var wg sync.WaitGroup
	waitQueued(s, 1)
	wg.Go(func() { _, _, other = claims.New(s).CommitOperation(ctx, ledgertest.Op("r"), nil) })
	waitQueued(s, 2)
	cancel()
	// Returned while the writer is still held: not waiting for the group.
	if err := <-got; !errors.Is(err, context.Canceled) || errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("write cancelled while queued = %v, want context.Canceled", err)
	}
	release()
	wg.Wait()
	if other != nil {
		t.Fatalf("the write queued beside it: %v", other)
	}
	if _, err := s.GetOperation(ctx, "q"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the cancelled write was written: %v", err)
	}
	if _, err := s.GetOperation(ctx, "r"); err != nil {
		t.Fatalf("the write queued beside it was not: %v", err)
	}
}

// TestGroupLostTransactionRetriesTheOthers: when one write's failure takes
// the whole transaction with it (SQLite rolls a transaction back when a
// statement is interrupted by its context; here the write ends it itself),
// that write fails and the writes of the same group, already run or not,
// are run again in a new transaction and commit.
func TestGroupLostTransactionRetriesTheOthers(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	var a, b, lost error
	wg.Go(func() { _, _, a = claims.New(s).CommitOperation(ctx, ledgertest.Op("a"), nil) })
	waitQueued(s, 1)
	wg.Go(func() {
		lost = s.write(ctx, label("lose the transaction"), func(ctx context.Context, tx *wtx) error {
			if _, err := tx.exec(ctx, "ROLLBACK"); err != nil {
				return err
			}
			return errors.New("injected: interrupted")
		})
	})
	waitQueued(s, 2)
	wg.Go(func() { _, _, b = claims.New(s).CommitOperation(ctx, ledgertest.Op("b"), nil) })
	waitQueued(s, 3)
	release()
	wg.Wait()
	if lost == nil {
		t.Errorf("the write that lost the transaction succeeded")
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.GetOperation(ctx, id); err != nil {
			t.Errorf("%s, in the lost transaction's group, not committed: %v", id, err)
		}
	}
	if a != nil || b != nil {
		t.Errorf("writes in the lost transaction's group: %v, %v; want both retried and committed", a, b)
	}
}

// TestCloseDrainsTheQueue: Close lets the writes already queued commit,
// stops the writer goroutine, and a write after it fails.
func TestCloseDrainsTheQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "close.db")
	ctx := t.Context()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	var queuedErr error
	var wg sync.WaitGroup
	wg.Go(func() { _, _, queuedErr = claims.New(s).CommitOperation(ctx, ledgertest.Op("z"), nil) })
	waitQueued(s, 1)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if queuedErr != nil {
		t.Fatalf("write queued before Close: %v", queuedErr)
	}
	select {
	case <-s.group.exited:
	default:
		t.Fatal("the writer goroutine still runs after Close")
	}
	if _, _, err := claims.New(s).CommitOperation(ctx, ledgertest.Op("late"), nil); !errors.Is(err, errClosed) {
		t.Fatalf("write after Close = %v, want errClosed", err)
	}
	s2 := openAt(t, path)
	if _, err := s2.GetOperation(ctx, "z"); err != nil {
		t.Fatalf("the write queued before Close is not in the file: %v", err)
	}
}

// TestGroupPanicFailsAlone: a write that panics on the writer goroutine
// fails with an error, what it wrote is rolled back, and the writer goes
// on serving writes.
func TestGroupPanicFailsAlone(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	err := s.write(ctx, label("panicking write"), func(ctx context.Context, tx *wtx) error {
		args, err := opArgs(ledgertest.Op("half"), ledger.FirstVersion)
		if err != nil {
			return err
		}
		if _, err := tx.exec(ctx, sqlInsertOperation, args...); err != nil {
			return err
		}
		panic("injected")
	})
	if err == nil {
		t.Fatal("a panicking write succeeded")
	}
	if _, err := s.GetOperation(ctx, "half"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the panicking write's insert was kept: %v", err)
	}
	if _, _, err := claims.New(s).CommitOperation(ctx, ledgertest.Op("after"), nil); err != nil {
		t.Fatalf("write after the panic: %v", err)
	}
}

// BenchmarkCommitParallel: distinct operations created by concurrent
// callers (b.SetParallelism × GOMAXPROCS goroutines), the shape of a burst
// of first deliveries; reports writes per second and the mean group size.
func BenchmarkCommitParallel(b *testing.B) {
	for _, par := range []int{1, 16, 128} {
		b.Run(fmt.Sprint("callers=", par*runtime.GOMAXPROCS(0)), func(b *testing.B) {
			s := openTemp(b)
			ctx := b.Context()
			var next atomic.Int64
			before := s.Stats()
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, _, err := claims.New(s).CommitOperation(ctx, ledgertest.Op(fmt.Sprint("p", next.Add(1))), nil); err != nil {
						b.Error(err)
						return
					}
				}
			})
			st := s.Stats()
			w, tx := st.Writes-before.Writes, st.Transactions-before.Transactions
			b.ReportMetric(float64(w)/b.Elapsed().Seconds(), "writes/s")
			if tx > 0 {
				b.ReportMetric(float64(w)/float64(tx), "writes/tx")
			}
		})
	}
}

// TestGroupWaitsForMoreOnlyUnderLoad: after a transaction that held more
// than one write, the next one waits (within its window) for writes still
// to come, so writes queued after it began join it; a lone writer never
// waits. The window is a minute here, so only a wait that really happens
// can make the later writes join, and a group closes when it is full (3).
func TestGroupWaitsForMoreOnlyUnderLoad(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	s.group.window, s.group.max = time.Minute, 3
	commit := func(id string) error {
		_, _, err := claims.New(s).CommitOperation(ctx, ledgertest.Op(id), nil)
		return err
	}
	// Alone (no load yet): commits at once, though the window is a minute.
	lone, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, _, err := claims.New(s).CommitOperation(lone, ledgertest.Op("lone"), nil); err != nil {
		t.Fatalf("a lone write waited for others: %v", err)
	}
	// Load: two writes queued behind a held one fill its transaction.
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	for _, id := range []string{"a1", "a2"} {
		wg.Go(func() {
			if err := commit(id); err != nil {
				t.Error(err)
			}
		})
	}
	waitQueued(s, 2)
	release()
	wg.Wait()
	before := s.Stats()
	taken := s.group.taken.Load()
	// b1 begins a transaction alone; b2 and b3, sent after b1 was taken,
	// join it.
	wg.Go(func() {
		if err := commit("b1"); err != nil {
			t.Error(err)
		}
	})
	for s.group.taken.Load() == taken {
		runtime.Gosched()
	}
	for _, id := range []string{"b2", "b3"} {
		wg.Go(func() {
			if err := commit(id); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	after := s.Stats()
	if txs, writes := after.Transactions-before.Transactions, after.Writes-before.Writes; txs != 1 || writes != 3 {
		t.Fatalf("b1, then b2 and b3, under load: %d transactions for %d writes, want 1 for 3", txs, writes)
	}
}

// TestGroupRunsBareUntilAFailureChangedRows: a group whose only failure is
// a fence that changed nothing runs bare (no savepoint statement is ever
// prepared on the writer) and is not run again; a failure after its write
// changed a row undoes the transaction once and runs the group again, each
// write in a savepoint: the failing write leaves nothing, the others
// commit.
func TestGroupRunsBareUntilAFailureChangedRows(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	stale := staleRead(t, s, "x")
	// group queues clean writes named prefix0…, plus odd, and checks that
	// the clean ones committed and odd failed with ErrConflict.
	group := func(prefix string, odd func() error) {
		t.Helper()
		release := holdWriter(t, s)
		var wg sync.WaitGroup
		const clean = 6
		errs := make([]error, clean)
		for i := range clean {
			wg.Go(func() {
				_, _, errs[i] = claims.New(s).CommitOperation(ctx, ledgertest.Op(fmt.Sprint(prefix, i)), nil)
			})
		}
		var oddErr error
		wg.Go(func() { oddErr = odd() })
		waitQueued(s, clean+1)
		release()
		wg.Wait()
		for i, err := range errs {
			if _, gerr := s.GetOperation(ctx, fmt.Sprint(prefix, i)); err != nil || gerr != nil {
				t.Errorf("clean write %s%d: %v, then read: %v", prefix, i, err, gerr)
			}
		}
		if !errors.Is(oddErr, ledger.ErrConflict) {
			t.Errorf("%s: odd write = %v, want ErrConflict", prefix, oddErr)
		}
	}

	group("bare", func() error {
		op := stale
		op.State, op.UpdateTime = lifecycle.Succeeded, t0
		_, _, err := claims.New(s).CommitOperation(ctx, op, nil)
		return err
	})
	if n := s.group.redone.Load(); n != 0 {
		t.Errorf("a fence that changed nothing undid %d transactions, want 0", n)
	}
	if cached(t, s.writer)["SAVEPOINT w"] {
		t.Errorf("a savepoint was used though no failure changed a row")
	}

	group("redo", func() error {
		return s.write(ctx, label("insert, then conflict"), func(ctx context.Context, tx *wtx) error {
			if _, err := tx.exec(ctx, `INSERT INTO delivery_entries (op_id, at_ns, source, delivery_id, status, auth, outcome, reason, answer, latency_ns) VALUES ('partial', 0, '', '', '', '', '', '', 0, 0)`); err != nil {
				return err
			}
			return ledger.ErrConflict
		})
	})
	if n := s.group.redone.Load(); n != 1 {
		t.Errorf("a failure after a changed row undid %d transactions, want 1", n)
	}
	if !cached(t, s.writer)["SAVEPOINT w"] {
		t.Errorf("the group was not run again in savepoints")
	}
	var n int
	if err := s.writer.QueryRowContext(ctx, `SELECT count(*) FROM delivery_entries WHERE op_id = 'partial'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the failed write's row: count %d, %v; want 0 (undone)", n, err)
	}
}
