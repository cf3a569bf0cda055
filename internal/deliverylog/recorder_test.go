package deliverylog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/metrics"
	lrotestutil "github.com/lrosink/lrosink/internal/testutil"
)

// mapStore is a delivery store without batches; gate, when set, is called
// at the start of each append (the tests hold the writer there).
type mapStore struct {
	mu   sync.Mutex
	logs map[string][]deliverylog.Entry
	gate func()
	// single counts AppendDeliveries calls.
	single int
}

func newMapStore() *mapStore { return &mapStore{logs: map[string][]deliverylog.Entry{}} }

func (s *mapStore) AppendDeliveries(_ context.Context, id string, es []deliverylog.Entry, r deliverylog.Retention) error {
	if s.gate != nil {
		s.gate()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.single++
	s.logs[id] = deliverylog.Merge(s.logs[id], es, r)
	return nil
}

func (s *mapStore) ListDeliveries(_ context.Context, id string) ([]deliverylog.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]deliverylog.Entry(nil), s.logs[id]...), nil
}

// batchStore is a mapStore that appends batches too, counting them.
type batchStore struct {
	*mapStore
	batches []int // the operations of each batch call
}

func (s *batchStore) AppendDeliveryBatch(_ context.Context, batch []deliverylog.Append, r deliverylog.Retention) error {
	if s.gate != nil {
		s.gate()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, len(batch))
	for _, a := range batch {
		s.logs[a.OpID] = deliverylog.Merge(s.logs[a.OpID], a.Entries, r)
	}
	return nil
}

// holdFirst makes the store's first append wait until release is closed,
// and returns a channel closed once it is waiting: whatever is recorded
// then is queued, and written by the calls after it.
func holdFirst(s *mapStore, release chan struct{}) <-chan struct{} {
	held := make(chan struct{})
	var once sync.Once
	s.gate = func() {
		first := false
		once.Do(func() { first = true })
		if first {
			close(held)
			<-release
		}
	}
	return held
}

func entriesOf(t *testing.T, s deliverylog.Store, id string) int {
	t.Helper()
	got, err := s.ListDeliveries(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return len(got)
}

// wantEntries checks that operations op0…op(n-1) each hold want entries.
func wantEntries(t *testing.T, s deliverylog.Store, n, want int) {
	t.Helper()
	for i := range n {
		if got := entriesOf(t, s, fmt.Sprint("op", i)); got != want {
			t.Fatalf("op%d has %d entries, want %d", i, got, want)
		}
	}
}

// TestRecorderWritesBatches: N operations queued at once reach a
// BatchStore in at most ceil(N/MaxChunk) batch calls, none of them one
// operation at a time, with every entry.
func TestRecorderWritesBatches(t *testing.T) {
	const n = 600
	s := &batchStore{mapStore: newMapStore()}
	release := make(chan struct{})
	held := holdFirst(s.mapStore, release)
	rec := deliverylog.NewRecorder(s, deliverylog.Retention{}, logging.Discard())
	t.Cleanup(func() { _ = rec.Close(context.Background()) })
	rec.Record("warm-up", deliverylog.Entry{At: t0})
	<-held
	for i := range n {
		for j := range 2 {
			rec.Record(fmt.Sprint("op", i), deliverylog.Entry{At: t0.Add(time.Duration(j) * time.Second), DeliveryID: fmt.Sprint(j)})
		}
	}
	close(release)
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if rec.Dropped() != 0 {
		t.Fatalf("dropped %d", rec.Dropped())
	}
	if s.single != 0 {
		t.Errorf("%d single-operation appends, want every write in batches", s.single)
	}
	if len(s.batches) == 0 {
		t.Fatal("no batch call")
	}
	after := s.batches[1:] // the first is the warm-up's
	if want := (n + deliverylog.MaxChunk - 1) / deliverylog.MaxChunk; len(after) > want {
		t.Errorf("%d batch calls %v for %d operations, want at most %d", len(after), after, n, want)
	}
	wantEntries(t, s, n, 2)
}

// TestRecorderFallbackOverlapsBounded: a store without batches gets every
// operation's append, FallbackInFlight of them in flight at once and never
// more. The store's appends wait at a barrier the test opens one at a time
// once the bound is reached, so the count does not depend on timing.
func TestRecorderFallbackOverlapsBounded(t *testing.T) {
	const n = 40
	s := newMapStore()
	var (
		mu               sync.Mutex
		inFlight, most   int
		entered, release = make(chan struct{}), make(chan struct{})
		warm             = true
	)
	s.gate = func() {
		mu.Lock()
		if warm { // the warm-up append: held until everything is queued
			warm = false
			mu.Unlock()
			entered <- struct{}{}
			<-release
			return
		}
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		entered <- struct{}{}
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
	}
	rec := deliverylog.NewRecorder(s, deliverylog.Retention{}, logging.Discard())
	t.Cleanup(func() { _ = rec.Close(context.Background()) })
	rec.Record("warm-up", deliverylog.Entry{At: t0})
	<-entered
	for i := range n {
		rec.Record(fmt.Sprint("op", i), deliverylog.Entry{At: t0})
	}
	release <- struct{}{}
	// Let each append finish only once the bound's worth have entered:
	// FallbackInFlight entered, then one more per release.
	for range deliverylog.FallbackInFlight {
		<-entered
	}
	for range n - deliverylog.FallbackInFlight {
		release <- struct{}{}
		<-entered
	}
	for range deliverylog.FallbackInFlight {
		release <- struct{}{}
	}
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if most != deliverylog.FallbackInFlight {
		t.Errorf("at most %d appends in flight at once, want %d", most, deliverylog.FallbackInFlight)
	}
	wantEntries(t, s, n, 1)
}

// TestRecorderDropsAreCountedAndLogged: with the writer held by the store,
// entries beyond the queue are dropped, counted (Dropped and the metric)
// and logged as one WARNING, then at most one a minute with the count since.
func TestRecorderDropsAreCountedAndLogged(t *testing.T) {
	const over = 100
	s := newMapStore()
	release := make(chan struct{})
	held := holdFirst(s, release)
	var logs lrotestutil.SyncBuffer
	clk := lrotestutil.NewClock(t0)
	rec := deliverylog.NewRecorder(s, deliverylog.Retention{}, logging.New(&logs, slog.LevelDebug, ""), deliverylog.WithClock(clk.Now))
	t.Cleanup(func() { _ = rec.Close(context.Background()) })
	open := sync.OnceFunc(func() { close(release) })
	t.Cleanup(open) // before Close (cleanups run last first), should the test fail while the store is held
	m := metrics.New()
	m.CountDeliveryLogDrops(rec)

	rec.Record("held", deliverylog.Entry{At: t0})
	<-held
	for i := range deliverylog.DefaultQueue + over {
		rec.Record(fmt.Sprint("op", i%100), deliverylog.Entry{At: t0})
	}
	if got := rec.Dropped(); got != over {
		t.Fatalf("Dropped() = %d, want %d", got, over)
	}
	if got := counter(t, m); got != over {
		t.Errorf("lrosink_delivery_log_dropped_total = %v, want %d", got, over)
	}
	const msg = `"message":"delivery log: entries dropped"`
	if n := logs.CountLines(msg); n != 1 {
		t.Fatalf("%d drop lines, want 1:\n%s", n, logs.String())
	}
	line := logs.String()
	if !strings.Contains(line, `"severity":"WARNING"`) || !strings.Contains(line, `"dropped":1,`) ||
		!strings.Contains(line, fmt.Sprintf(`"queue":%d`, deliverylog.DefaultQueue)) {
		t.Errorf("drop line: %s", line)
	}
	clk.Advance(30 * time.Second)
	for range 10 {
		rec.Record("op", deliverylog.Entry{At: t0})
	}
	if n := logs.CountLines(msg); n != 1 {
		t.Fatalf("%d drop lines within a minute, want 1:\n%s", n, logs.String())
	}
	clk.Advance(31 * time.Second)
	rec.Record("op", deliverylog.Entry{At: t0})
	if n := logs.CountLines(msg); n != 2 {
		t.Fatalf("%d drop lines after a minute, want 2:\n%s", n, logs.String())
	}
	if want := fmt.Sprintf(`"dropped":%d,`, over+10+1-1); !strings.Contains(logs.String(), want) {
		t.Errorf("the second line should count the drops since the first (%s):\n%s", want, logs.String())
	}
	open()
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := entriesOf(t, s, "op0"); got == 0 {
		t.Error("the queued entries were not written once the store answered")
	}
}

// counter is the registry's lrosink_delivery_log_dropped_total.
func counter(t *testing.T, m *metrics.Metrics) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "lrosink_delivery_log_dropped_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("lrosink_delivery_log_dropped_total is not registered")
	return 0
}

// failingStore fails the appends of operations named bad*, and every batch
// when batchErr is set.
type failingStore struct {
	*mapStore
	batchErr error
}

func (s *failingStore) AppendDeliveries(ctx context.Context, id string, es []deliverylog.Entry, r deliverylog.Retention) error {
	if strings.HasPrefix(id, "bad") {
		return errors.New("store said no")
	}
	return s.mapStore.AppendDeliveries(ctx, id, es, r)
}

func (s *failingStore) AppendDeliveryBatch(ctx context.Context, batch []deliverylog.Append, r deliverylog.Retention) error {
	if s.batchErr != nil {
		if s.gate != nil {
			s.gate()
		}
		return s.batchErr
	}
	return deliverylog.ErrNoBatch
}

// TestFailedAppendsAreLogged: a failed append logs one WARNING naming an
// operation and counting the operations and entries lost: only the failed
// ones when operations are appended one by one, the whole chunk when a
// batch fails.
func TestFailedAppendsAreLogged(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		batchErr             error
		wantOps, wantEntries int
		// wantLines counts the warm-up's own failure in a failing batch.
		wantLines int
	}{
		{"one by one", nil, 2, 3, 1},
		{"batch", errors.New("disk full"), 4, 6, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &failingStore{mapStore: newMapStore(), batchErr: tc.batchErr}
			var logs lrotestutil.SyncBuffer
			rec := deliverylog.NewRecorder(s, deliverylog.Retention{}, logging.New(&logs, slog.LevelDebug, ""))
			t.Cleanup(func() { _ = rec.Close(context.Background()) })
			release := make(chan struct{})
			held := holdFirst(s.mapStore, release)
			rec.Record("warm-up", deliverylog.Entry{At: t0})
			<-held
			for _, id := range []string{"ok1", "bad1", "ok2", "bad2", "bad1", "ok1"} {
				rec.Record(id, deliverylog.Entry{At: t0})
			}
			close(release)
			if err := rec.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			const msg = `"message":"delivery log: append failed; these entries are lost"`
			if n := logs.CountLines(msg); n != tc.wantLines {
				t.Fatalf("%d append-failed lines, want %d:\n%s", n, tc.wantLines, logs.String())
			}
			want := fmt.Sprintf(`"operations":%d,"entries":%d`, tc.wantOps, tc.wantEntries)
			if n := logs.CountLines(want); n != 1 || !strings.Contains(logs.String(), `"severity":"WARNING"`) {
				t.Errorf("want one WARNING with %s:\n%s", want, logs.String())
			}
		})
	}
}
