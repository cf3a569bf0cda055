package deliverylog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/testutil"
)

var t0 = time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)

// TestMergeKeepsNewestWithinTTL: newest first, a later arrival first among
// equal times, nothing older than the TTL before the newest, at most Keep.
func TestMergeKeepsNewestWithinTTL(t *testing.T) {
	r := deliverylog.Retention{Keep: 3, TTL: time.Hour}
	stored := []deliverylog.Entry{{At: t0, DeliveryID: "s1"}, {At: t0.Add(-2 * time.Hour), DeliveryID: "old"}}
	added := []deliverylog.Entry{{At: t0, DeliveryID: "a1"}, {At: t0, DeliveryID: "a2"}, {At: t0.Add(-time.Minute), DeliveryID: "a3"}}
	got := deliverylog.Merge(stored, added, r)
	var ids []string
	for _, e := range got {
		ids = append(ids, e.DeliveryID)
	}
	if fmt.Sprint(ids) != "[a2 a1 s1]" {
		t.Errorf("kept %v, want [a2 a1 s1]", ids)
	}
}

// slowStore is a delivery store whose appends wait until released, to show
// that recording never waits for the store.
type slowStore struct {
	*memledger.Store
	release chan struct{}
	mu      sync.Mutex
	appends int
}

func (s *slowStore) AppendDeliveries(ctx context.Context, id string, es []deliverylog.Entry, r deliverylog.Retention) error {
	<-s.release
	s.mu.Lock()
	s.appends++
	s.mu.Unlock()
	return s.Store.AppendDeliveries(ctx, id, es, r)
}

// TestRecorderNeverWaitsAndBatches: Record returns while the store is
// stuck; once it answers, what was queued behind the stuck append is
// written in one append per operation, bounded to Keep.
func TestRecorderNeverWaitsAndBatches(t *testing.T) {
	s := &slowStore{Store: memledger.New(), release: make(chan struct{})}
	rec := deliverylog.NewRecorder(s, deliverylog.Retention{Keep: 5}, logging.Discard())
	rec.Record("op", deliverylog.Entry{At: t0, DeliveryID: "first"})
	for i := range 500 { // the first append is stuck meanwhile
		rec.Record("op", deliverylog.Entry{At: t0.Add(time.Duration(i+1) * time.Second), DeliveryID: fmt.Sprint(i)})
	}
	close(s.release)
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListDeliveries(t.Context(), "op")
	if err != nil || len(got) != 5 || got[0].DeliveryID != "499" {
		t.Fatalf("log = %+v, %v; want the newest 5, 499 first", got, err)
	}
	if s.appends > 3 {
		t.Errorf("%d appends for two bursts, want them batched", s.appends)
	}
	if err := rec.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	rec.Record("op", deliverylog.Entry{At: t0})
	if rec.Dropped() != 1 {
		t.Errorf("a record after Close: dropped %d, want 1", rec.Dropped())
	}
	if err := rec.Flush(t.Context()); !errors.Is(err, deliverylog.ErrClosed) {
		t.Errorf("flush after close: %v", err)
	}
}

// TestCloseWritesTheQueue: entries queued before Close are written.
func TestCloseWritesTheQueue(t *testing.T) {
	s := memledger.New()
	rec := deliverylog.NewRecorder(s, deliverylog.Retention{}, logging.Discard())
	for i := range 10 {
		rec.Record(fmt.Sprint("op", i), deliverylog.Entry{At: t0})
	}
	if err := rec.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if got, _ := s.ListDeliveries(t.Context(), fmt.Sprint("op", i)); len(got) != 1 {
			t.Errorf("op%d has %d entries after Close, want 1", i, len(got))
		}
	}
}

// TestTrafficLastHour: counts by outcome and rejections by reason over the
// last 60 minutes only; the recent rejections keep the newest 10.
func TestTrafficLastHour(t *testing.T) {
	clk := testutil.NewClock(t0)
	tr := deliverylog.NewTraffic(clk.Now)
	tr.Delivery(clk.Now(), "completed")
	tr.Rejected(clk.Now(), "msg_old", "no-matching-signature", 401)
	clk.Advance(30 * time.Minute)
	tr.Delivery(clk.Now(), "duplicate")
	tr.Delivery(clk.Now(), "duplicate")
	for i := range 12 {
		tr.Rejected(clk.Now(), fmt.Sprint("msg_", i), "bad-envelope", 400)
	}
	w := tr.LastHour()
	if w.Total != 3 || w.RejectedTotal != 13 || fmt.Sprint(w.Deliveries) != "[{duplicate 2} {completed 1}]" {
		t.Errorf("after 30m: %+v", w)
	}
	if len(w.Recent) != 10 || w.Recent[0].DeliveryID != "msg_11" {
		t.Errorf("recent rejections %+v, want the newest 10", w.Recent)
	}
	clk.Advance(31 * time.Minute)
	w = tr.LastHour()
	if w.Total != 2 || w.RejectedTotal != 12 || !w.LastDelivery.Equal(t0.Add(30*time.Minute)) {
		t.Errorf("after 61m the first minute should be gone: %+v", w)
	}
	clk.Advance(2 * time.Hour)
	if w = tr.LastHour(); w.Total != 0 || w.RejectedTotal != 0 {
		t.Errorf("after 3h: %+v", w)
	}
}

// TestCloseWithSpentBudget: a stop whose budget is already spent reports
// entries unwritten only when there are some. An idle recorder closes
// cleanly every time (a select with both channels ready picks at random,
// which once reported "0 entries may be unwritten" about half the time); one
// whose store holds an entry reports that entry.
func TestCloseWithSpentBudget(t *testing.T) {
	spent, end := context.WithCancel(t.Context())
	end()
	for i := range 100 {
		rec := deliverylog.NewRecorder(memledger.New(), deliverylog.Retention{}, logging.Discard())
		if err := rec.Close(spent); err != nil {
			t.Fatalf("close %d of an idle recorder with a spent budget: %v", i, err)
		}
	}

	s := &slowStore{Store: memledger.New(), release: make(chan struct{})}
	defer close(s.release)
	rec := deliverylog.NewRecorder(s, deliverylog.Retention{}, logging.Discard())
	rec.Record("op", deliverylog.Entry{At: t0, DeliveryID: "held"})
	err := rec.Close(spent)
	if err == nil || !strings.Contains(err.Error(), "1 entries may be unwritten") {
		t.Fatalf("close with an entry held by the store = %v, want 1 entry reported unwritten", err)
	}
}
