package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/testutil"
)

// owedClaims is how many results messages the claim-recovery tests leave
// owed: three of the pages (100) a pass used to stop after.
const owedClaims = 300

// oweMessages settles owedClaims batches by webhook while sink is down, so
// every publish fails and every claim is released: owed, due at once.
func oweMessages(t *testing.T, door *ingest.Door, sink *downSink) {
	t.Helper()
	sink.down.Store(true)
	defer sink.down.Store(false)
	var wg sync.WaitGroup
	errs := make(chan error, owedClaims)
	ids := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range ids {
				_, err := door.Ingest(t.Context(), event.Event{Name: fmt.Sprintf("batches/owed%03d", i), State: lifecycle.Succeeded,
					Source: event.SourceWebhook, UpdateTime: tDone, Output: map[string]any{"responses_file": "files/out"}})
				if !errors.Is(err, ingest.ErrSideEffect) {
					errs <- fmt.Errorf("owed%03d with the sink down: %v, want a side-effect error", i, err)
				}
			}
		})
	}
	for i := range owedClaims {
		ids <- i
	}
	close(ids)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// answered is the summary as /Reconcile answers it (CONTRACT.md §4).
func answered(t *testing.T, s reconcile.Summary) map[string]any {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["claims_due_after"].(float64); !ok {
		t.Fatalf("the summary %s has no claims_due_after", b)
	}
	return m
}

// checkOnceEach fails unless sink holds exactly one message for each owed
// operation.
func checkOnceEach(t *testing.T, sink *downSink) {
	t.Helper()
	per := sink.PerKey()
	if len(per) != owedClaims {
		t.Errorf("messages for %d operations, want %d", len(per), owedClaims)
	}
	for key, n := range per {
		if n != 1 {
			t.Errorf("%s: %d messages, want 1", key, n)
		}
	}
}

// TestClaimRecoveryDrains: a pass with 300 owed messages (claims released
// after failed publishes) publishes all 300 within its budget. It used to
// retry one page of due claims (100) and answer partial:false with 200
// still waiting: with LROSINK_RECONCILE_EVERY=1h, hours to publish
// messages already owed.
func TestClaimRecoveryDrains(t *testing.T) {
	t.Parallel()
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		sink := &downSink{}
		_, clk, door, rec := retentionRig(t, s, sink, 0, 0)
		oweMessages(t, door, sink)
		clk.Advance(time.Minute)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		sum, err := rec.Pass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := answered(t, sum)
		if sum.ClaimsRetried != owedClaims || m["claims_due_after"] != 0.0 || sum.Partial || sum.Errors != 0 {
			t.Fatalf("pass %v: want %d claims retried, claims_due_after 0, not partial, no error", m, owedClaims)
		}
		checkOnceEach(t, sink)
		due, err := s.DueClaims(t.Context(), clk.Now(), ledger.ClaimCursor{}, 10)
		if err != nil || len(due) != 0 {
			t.Fatalf("due claims after the pass: %d, %v; want none", len(due), err)
		}
	})
}

// budgetEnds is the door as the reconciler uses it, whose nth claim retry
// answers only once the pass's work time is over: the budget then ends
// right after that retry, however fast the machine is.
type budgetEnds struct {
	reconcile.Door
	n     int64
	calls atomic.Int64
}

func (d *budgetEnds) RetryClaim(ctx context.Context, id string) (ingest.Result, error) {
	res, err := d.Door.RetryClaim(ctx, id)
	if d.calls.Add(1) == d.n {
		<-ctx.Done()
	}
	return res, err
}

// TestClaimRecoveryReportsWhatIsLeft: a pass whose budget ends before it
// has retried every due claim (300 owed, the budget over after the 50th)
// says how many it left (claims_due_after) and that it is partial; the
// next pass publishes the rest, each message once.
func TestClaimRecoveryReportsWhatIsLeft(t *testing.T) {
	t.Parallel()
	s := testutil.MemLedger(t)
	sink := &downSink{}
	clk := testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	log := logging.New(&testutil.SyncBuffer{}, slog.LevelInfo, "")
	door, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: sink, Log: log, Now: clk.Now, Grace: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const first = 50
	rec, err := reconcile.New(reconcile.Config{Ledger: claims.New(s), Door: &budgetEnds{Door: door, n: first}, Log: log,
		Gemini: fakeFetcher(t, fakegemini.New().Start(t), log), Now: clk.Now, StuckAfter: 6 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	oweMessages(t, door, sink)
	clk.Advance(time.Minute)
	// The work time (four fifths) ends after the 50th retry; the count of
	// what is left runs in the rest. The project webhooks' read, after the
	// retries, then finds the work time over: not an error (it used to
	// count one), read again next pass.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	sum, err := rec.Pass(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if m := answered(t, sum); !sum.Partial || sum.ClaimsRetried != first || m["claims_due_after"] != float64(owedClaims-first) || sum.Errors != 0 {
		t.Fatalf("pass whose budget ends after %d retries: %v; want partial, claims_retried %d, claims_due_after %d, no error",
			first, m, first, owedClaims-first)
	}
	next := mustPass(t, rec)
	if m := answered(t, next); next.Partial || next.ClaimsRetried != owedClaims-first || m["claims_due_after"] != 0.0 {
		t.Fatalf("next pass %v: want the %d left retried, none left", m, owedClaims-first)
	}
	checkOnceEach(t, sink)
}
