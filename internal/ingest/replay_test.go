package ingest_test

import (
	"context"
	"errors"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/testutil"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/results"
)

// crashOnce crashes the first time the door reaches point.
type crashOnce struct {
	point ingest.FaultPoint
	done  sync.Once
}

func (c *crashOnce) At(_ context.Context, p ingest.FaultPoint, _ string) error {
	var err error
	if p == c.point {
		c.done.Do(func() { err = errors.New("process killed") })
	}
	return err
}

func recordingDoor(t *testing.T, faults ingest.Faults) (*ingest.Door, *memledger.Store, *testutil.Recorder, *clock) {
	t.Helper()
	s, rec, c := testutil.MemLedger(t), &testutil.Recorder{}, newClock()
	d, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: rec, Log: logging.Discard(), Now: c.Now, Lease: 10 * time.Minute, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	return d, s, rec, c
}

func TestReplayPublishesAgainAndRecordsIt(t *testing.T) {
	t.Parallel()
	d, s, rec, _ := recordingDoor(t, nil)
	ctx := t.Context()
	if _, err := d.Replay(ctx, "batches/r", ""); !errors.Is(err, ingest.ErrNotSettled) {
		t.Fatalf("replay of an unknown operation = %v, want ErrNotSettled", err)
	}
	mustIngest(t, d, ev("batches/r", lifecycle.Succeeded, tDone, event.SourceWebhook))
	before, _ := s.GetOperation(ctx, "gemini:batches%2Fr")
	id, err := d.Replay(ctx, "batches/r", "")
	if err != nil || id == "" {
		t.Fatalf("replay: %q %v", id, err)
	}
	msgs := rec.All()
	if len(msgs) != 2 || msgs[1].ReplayID != id || msgs[0].ReplayID != "" || msgs[1].IdempotencyKey != msgs[0].IdempotencyKey ||
		msgs[1].Attributes()["replay_id"] != id {
		t.Fatalf("messages %+v", msgs)
	}
	after, _ := s.GetOperation(ctx, "gemini:batches%2Fr")
	if after.State != before.State || !after.UpdateTime.Equal(before.UpdateTime) || len(after.Replays) != 1 || after.Replays[0].ID != id {
		t.Fatalf("after replay: state %s replays %+v", after.State, after.Replays)
	}
}

// TestCrashAfterPublishIsTheOnlyDuplicate walks the documented crash window:
// killed after the publish and before DONE, the claim is retried after its
// lease and published once more with the same key, then DONE.
func TestCrashAfterPublishIsTheOnlyDuplicate(t *testing.T) {
	t.Parallel()
	d, s, rec, c := recordingDoor(t, &crashOnce{point: ingest.FaultAfterPublish})
	_, err := d.Ingest(t.Context(), ev("batches/cw", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if !errors.Is(err, ingest.ErrCrashed) {
		t.Fatalf("ingest = %v, want the injected crash", err)
	}
	id := "gemini:batches%2Fcw"
	if cl := mustClaim(t, s, id); cl.Status != ledger.ClaimHeld {
		t.Fatalf("claim after the crash %+v", cl)
	}
	if r, err := d.RetryClaim(t.Context(), id); err != nil || r.Published {
		t.Fatalf("retry within the lease: %+v %v", r, err)
	}
	c.Advance(11 * time.Minute)
	r, err := d.RetryClaim(t.Context(), id)
	if err != nil || r.Outcome != ingest.OutcomeRecovered || !r.Published {
		t.Fatalf("retry after the lease: %+v %v", r, err)
	}
	if cl := mustClaim(t, s, id); cl.Status != ledger.ClaimDone || cl.Attempts != 2 {
		t.Fatalf("claim %+v", cl)
	}
	msgs := rec.All()
	if len(msgs) != 2 || msgs[0].IdempotencyKey != msgs[1].IdempotencyKey || string(mustData(t, msgs[0])) != string(mustData(t, msgs[1])) {
		t.Fatalf("messages %+v, want the same message twice", msgs)
	}
}

// TestCrashAfterCommitPublishesOnce: killed between the commit and the
// publish, the operation is settled and the message goes out exactly once,
// by whoever seizes the claim after the lease.
func TestCrashAfterCommitPublishesOnce(t *testing.T) {
	t.Parallel()
	d, s, rec, c := recordingDoor(t, &crashOnce{point: ingest.FaultAfterCommit})
	if _, err := d.Ingest(t.Context(), ev("batches/cc", lifecycle.Succeeded, tDone, event.SourceWebhook)); !errors.Is(err, ingest.ErrCrashed) {
		t.Fatalf("ingest = %v", err)
	}
	if op := mustOp(t, s, "gemini:batches%2Fcc"); op.State != lifecycle.Succeeded || len(rec.All()) != 0 {
		t.Fatalf("after the crash: %s, %d messages", op.State, len(rec.All()))
	}
	c.Advance(11 * time.Minute)
	r := mustIngest(t, d, ev("batches/cc", lifecycle.Succeeded, tDone, event.SourceWebhook))
	if r.Outcome != ingest.OutcomeRecovered || len(rec.All()) != 1 {
		t.Fatalf("redelivery %+v, %d messages", r, len(rec.All()))
	}
}

func mustData(t *testing.T, m results.Message) []byte {
	t.Helper()
	b, err := m.Data()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
