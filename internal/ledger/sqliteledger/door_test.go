package sqliteledger_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
)

// gateSink holds every Publish until the test opens it, and says when n
// publishes are waiting.
type gateSink struct {
	n       int
	arrived chan struct{} // closed when n publishes wait
	open    chan struct{}

	mu   sync.Mutex
	msgs map[string]int
}

func (g *gateSink) Publish(ctx context.Context, m results.Message) error {
	g.mu.Lock()
	g.msgs[m.Operation]++
	if len(g.msgs) == g.n {
		close(g.arrived)
	}
	g.mu.Unlock()
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestDoorCompletionsShareTransactions: N concurrent distinct completions
// through the real ingest door on SQLite commit in fewer than N
// transactions. The writer is held busy twice, so that the N operation +
// claim commits queue up behind it, and then the N DONE commits (the test
// does not depend on timing to form the groups).
func TestDoorCompletionsShareTransactions(t *testing.T) {
	const n = 32
	ctx := t.Context()
	s, err := sqliteledger.Open(ctx, filepath.Join(t.TempDir(), "door.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	sink := &gateSink{n: n, arrived: make(chan struct{}), open: make(chan struct{}), msgs: map[string]int{}}
	door, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: sink, Log: logging.Discard(), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	before := s.Stats()

	release := sqliteledger.HoldWriter(t, s)
	var wg sync.WaitGroup
	res := make([]ingest.Result, n)
	errs := make([]error, n)
	at := time.Date(2026, 11, 25, 5, 0, 0, 0, time.UTC)
	for i := range n {
		wg.Go(func() {
			res[i], errs[i] = door.Ingest(ctx, event.Event{Name: fmt.Sprintf("batches/group-%d", i),
				State: lifecycle.Succeeded, UpdateTime: at, Source: event.SourceWebhook})
		})
	}
	sqliteledger.WaitQueued(s, n) // the N operation + claim commits
	release()
	<-sink.arrived // every completion committed and now publishing
	release = sqliteledger.HoldWriter(t, s)
	close(sink.open)
	sqliteledger.WaitQueued(s, n) // the N DONE commits
	release()
	wg.Wait()

	for i := range n {
		if errs[i] != nil || res[i].Outcome != ingest.OutcomeCompleted || !res[i].Published {
			t.Fatalf("completion %d: %+v, %v; want completed and published", i, res[i], errs[i])
		}
		id, err := opname.DocID(opname.KeyPrefix + res[i].Operation)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.GetClaim(ctx, id)
		if err != nil || c.Status != ledger.ClaimDone {
			t.Fatalf("completion %d: claim %+v, %v; want DONE", i, c, err)
		}
	}
	for op, k := range sink.msgs {
		if k != 1 {
			t.Errorf("%s published %d times", op, k)
		}
	}
	after := s.Stats()
	txs, writes := after.Transactions-before.Transactions, after.Writes-before.Writes
	t.Logf("%d completions: %d writes in %d transactions", n, writes, txs)
	if writes < 2*n {
		t.Errorf("%d writes committed, want at least %d (operation + claim, DONE per completion)", writes, 2*n)
	}
	if txs >= n {
		t.Errorf("%d concurrent completions took %d transactions, want fewer than %d", n, txs, n)
	}
}
