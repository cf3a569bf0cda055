package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestStagesInOrder pins the door's order, outermost first. The door is
// built from the same list, so a stage moved in the code moves here.
func TestStagesInOrder(t *testing.T) {
	t.Parallel()
	want := []string{"coalesce", "drain", "observe", "confirm", "retry-conflicts", "effect", "decide"}
	if got := ingest.Stages(); !slices.Equal(got, want) {
		t.Fatalf("door stages = %q, want %q", got, want)
	}
}

// decisions counts the door's decisions as its Observer sees them.
type decisions struct {
	mu  sync.Mutex
	got []string
}

func (o *decisions) ObserveDecision(_ event.Source, res ingest.Result, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, fmt.Sprintf("%s err=%v", res.Outcome, err != nil))
}

func (o *decisions) all() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got)
}

// observedDoor is a door on s whose decisions are logged to the returned
// buffer and counted by the returned Observer.
func observedDoor(t *testing.T, s ingest.Store) (*ingest.Door, *testutil.Recorder, *testutil.SyncBuffer, *decisions) {
	t.Helper()
	rec, buf, obs := &testutil.Recorder{}, &testutil.SyncBuffer{}, &decisions{}
	d, err := ingest.New(ingest.Config{Store: s, Sink: rec, Log: logging.New(buf, slog.LevelInfo, "p"),
		Now: newClock().Now, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	return d, rec, buf, obs
}

// TestDrainComesBeforeObserve: work a draining door refuses is refused
// before it is a decision, so it makes no "ingest decision" line and no
// metric (the caller's 503 is the record), and reaches no later stage.
func TestDrainComesBeforeObserve(t *testing.T) {
	t.Parallel()
	s := testutil.MemLedger(t)
	d, rec, logs, obs := observedDoor(t, claims.New(s))
	if err := d.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := d.Ingest(t.Context(), ev("batches/refused", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if !errors.Is(err, ingest.ErrUnavailable) {
		t.Fatalf("ingest on a drained door = %v, want ErrUnavailable", err)
	}
	if got := obs.all(); len(got) != 0 {
		t.Errorf("refused work was observed as %q", got)
	}
	if strings.Contains(logs.String(), "ingest decision") {
		t.Errorf("refused work was logged as a decision:\n%s", logs.String())
	}
	if _, err := s.GetOperation(t.Context(), "gemini:batches%2Frefused"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("refused work reached the ledger: %v", err)
	}
	if n := len(rec.All()); n != 0 {
		t.Errorf("refused work published %d messages", n)
	}
}

// conflictingStore loses the first n operation commits to a "concurrent
// writer" (ErrConflict, nothing written).
type conflictingStore struct {
	ingest.Store
	mu   sync.Mutex
	left int
}

func (s *conflictingStore) CommitOperation(ctx context.Context, op ledger.Operation, c *ledger.Claim) (ledger.Revision, *ledger.Lease, error) {
	s.mu.Lock()
	lose := s.left > 0
	s.left--
	s.mu.Unlock()
	if lose {
		return ledger.Revision{}, nil, fmt.Errorf("test: %w", ledger.ErrConflict)
	}
	return s.Store.CommitOperation(ctx, op, c)
}

// TestObserveComesBeforeConflictRetry: a completion whose commit is lost
// to concurrent writers three times is re-read and decided again inside one
// observed run: one decision line and one metric, "completed", and one
// message (the effect runs once, for the attempt that took the claim).
func TestObserveComesBeforeConflictRetry(t *testing.T) {
	t.Parallel()
	s := &conflictingStore{Store: claims.New(testutil.MemLedger(t)), left: 3}
	d, rec, logs, obs := observedDoor(t, s)
	res := mustIngest(t, d, ev("batches/contended", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if res.Outcome != ingest.OutcomeCompleted || !res.Published {
		t.Fatalf("result %+v, want completed and published", res)
	}
	if got := obs.all(); !slices.Equal(got, []string{"completed err=false"}) {
		t.Errorf("observed %q, want one completed decision", got)
	}
	if n := strings.Count(logs.String(), `"message":"ingest decision"`); n != 1 {
		t.Errorf("%d decision lines, want 1:\n%s", n, logs.String())
	}
	if n := len(rec.All()); n != 1 {
		t.Errorf("%d messages, want 1", n)
	}
}

// bareLeaseStore gives leases that carry no claim (the port does not
// promise one: ledger.Lease.Claim is the claim protocol's).
type bareLeaseStore struct{ ingest.Store }

func (s bareLeaseStore) CommitOperation(ctx context.Context, op ledger.Operation, c *ledger.Claim) (ledger.Revision, *ledger.Lease, error) {
	rev, l, err := s.Store.CommitOperation(ctx, op, c)
	if l != nil {
		l.Claim = ledger.Claim{}
	}
	return rev, l, err
}

// TestEffectPublishesTheClaimsMessage: the message published is the claim
// the door wrote, whatever the lease carries.
func TestEffectPublishesTheClaimsMessage(t *testing.T) {
	t.Parallel()
	d, rec, _, _ := observedDoor(t, bareLeaseStore{claims.New(testutil.MemLedger(t))})
	mustIngest(t, d, ev("batches/bare-lease", lifecycle.Succeeded, tDone, event.SourceWebhook))
	msgs := rec.All()
	if len(msgs) != 1 || msgs[0].Operation != "batches/bare-lease" || msgs[0].State != string(lifecycle.Succeeded) {
		t.Fatalf("published %+v, want the one message of batches/bare-lease", msgs)
	}
}
