package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/testutil"
)

// failingCommits refuses the next n commits of one operation, as a store
// that is briefly unreachable does (the simulator's injected ledger errors).
type failingCommits struct {
	*claims.Ledger
	mu   sync.Mutex
	id   string
	left int
}

var errStoreDown = errors.New("injected: store unreachable")

func (l *failingCommits) CommitOperation(ctx context.Context, op ledger.Operation, c *ledger.Claim) (ledger.Revision, *ledger.Lease, error) {
	l.mu.Lock()
	fail := op.ID == l.id && l.left > 0
	if fail {
		l.left--
	}
	l.mu.Unlock()
	if fail {
		return ledger.Revision{}, nil, fmt.Errorf("commit %s: %w", op.ID, errStoreDown)
	}
	return l.Ledger.CommitOperation(ctx, op, c)
}

// TestDegradedPollingKeepsItsIntervalAfterFailedChecks (issue [H] 7): while
// the project webhook is disabled, an operation whose check fails (the door
// cannot commit Gemini's answer) is checked again on the very next pass, not
// after its backoff (an hour by then), however many checks fail in a row:
// it settles on the first pass after the failures, so the time to settle
// grows by one pass interval per failed check and by nothing else. This is
// the simulator's invariant 7 bound (docs/RELIABILITY.md).
func TestDegradedPollingKeepsItsIntervalAfterFailedChecks(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		const fails = 6
		fl := &failingCommits{Ledger: claims.New(s), id: "gemini:batches%2Funlucky"}
		w := newStoreWorld(t, fl, nil)
		hook := w.fake.AddWebhook("lrosink", "https://example.com/Webhook")
		w.fake.SetBatch("unlucky", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
		w.register("batches/unlucky")
		const every = 5 * time.Minute // the simulator's pass interval
		for range 3 * 12 {            // 3 h with the webhook up: backoff grows to 1 h
			w.pass()
			w.clock.Advance(every)
		}
		if !w.fake.SetWebhookState(hook, fakegemini.WebhookDisabledDueToFailedDeliveries) {
			t.Fatal("SetWebhookState")
		}
		for range 3 { // the webhook read (every 10 min) notices
			w.pass()
			w.clock.Advance(every)
		}
		w.fake.SetBatch("unlucky", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", ResponsesFile: "files/out"})
		fl.mu.Lock()
		fl.left = fails
		fl.mu.Unlock()
		const getPath = "/v1beta/batches/unlucky"
		for pass := 1; ; pass++ {
			before := w.fake.Calls(getPath)
			sum := w.pass()
			if w.fake.Calls(getPath) == before {
				t.Fatalf("pass %d after the operation finished did not check it (degraded polling lost its interval after %d failed checks)", pass, pass-1)
			}
			if sum.Settled == 1 {
				if pass != fails+1 {
					t.Fatalf("settled on pass %d, want %d (one per failed check, plus one)", pass, fails+1)
				}
				break
			}
			if pass > fails+1 {
				t.Fatalf("not settled after %d passes", pass)
			}
			w.clock.Advance(every)
		}
	})
}
