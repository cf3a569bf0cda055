package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/sink"
)

// diesAt makes the door stop at one boundary as if its process died there.
type diesAt ingest.FaultPoint

func (p diesAt) At(_ context.Context, at ingest.FaultPoint, _ string) error {
	if at == ingest.FaultPoint(p) {
		return errors.New("killed")
	}
	return nil
}

// askedFile is the real file sink, counting the questions it is asked.
type askedFile struct {
	*sink.File
	asked atomic.Int64
}

func (a *askedFile) InTail(ctx context.Context, m results.Message) (bool, error) {
	a.asked.Add(1)
	return a.File.InTail(ctx, m)
}

func (e *env) doorWith(s ingest.Sink, f ingest.Faults) *ingest.Door {
	e.t.Helper()
	d, err := ingest.New(ingest.Config{Store: claims.New(e.store), Sink: s, Log: logging.Discard(), Now: e.clock.Now,
		Lease: 10 * time.Minute, Grace: 90 * time.Second, Faults: f})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func openFile(t *testing.T, path string) *askedFile {
	t.Helper()
	f, err := sink.NewFile(path, logging.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return &askedFile{File: f}
}

// TestExpiredClaimWhoseMessageIsInTheFileIsNotPublishedAgain (issue #47,
// item 1): a holder that published to a results file and died before its
// DONE commit leaves its claim held; the door that seizes it after the
// lease asks the file, finds the line and commits DONE without a second
// line. A holder that died before publishing is published for, once.
func TestExpiredClaimWhoseMessageIsInTheFileIsNotPublishedAgain(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dies      ingest.FaultPoint
		lines     int // after the crash
		already   bool
		retryPath string
	}{
		{ingest.FaultAfterPublish, 1, true, "redelivery"},
		{ingest.FaultAfterPublish, 1, true, "claim retry"},
		{ingest.FaultAfterCommit, 0, false, "redelivery"},
	} {
		t.Run(string(c.dies)+" then "+c.retryPath, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			path := filepath.Join(t.TempDir(), "results.jsonl")
			name, id := "batches/tail", "gemini:batches%2Ftail"
			// The dying process has a file sink of its own, as a process would.
			dying := e.doorWith(openFile(t, path), diesAt(c.dies))
			if _, err := dying.Ingest(t.Context(), ev(name, lifecycle.Succeeded, tDone, event.SourceWebhook)); err == nil {
				t.Fatal("the holder was to die, yet its ingest succeeded")
			}
			if n := countLines(t, path); n != c.lines {
				t.Fatalf("%d lines after dying at %s, want %d", n, c.dies, c.lines)
			}
			if cl := mustClaim(t, e.store, id); cl.Status != ledger.ClaimHeld {
				t.Fatalf("claim after the death %+v, want CLAIMED", cl)
			}

			e.clock.Advance(11 * time.Minute) // past the dead holder's lease
			f := openFile(t, path)            // the restarted process opens the file anew
			d := e.doorWith(f, nil)
			var r ingest.Result
			var err error
			if c.retryPath == "redelivery" {
				r, err = d.Ingest(t.Context(), ev(name, lifecycle.Succeeded, tDone, event.SourceWebhook))
			} else {
				r, err = d.RetryClaim(t.Context(), id)
			}
			if err != nil || r.Outcome != ingest.OutcomeRecovered || r.Reason != "lease-expired" || !r.Published || r.AlreadyPublished != c.already {
				t.Fatalf("recovery = %+v, %v; want recovered, lease-expired, published, already published %v", r, err, c.already)
			}
			if n := countLines(t, path); n != 1 {
				t.Fatalf("%d lines after the recovery, want exactly 1", n)
			}
			if got := f.asked.Load(); got != 1 {
				t.Fatalf("the file was asked %d times, want once", got)
			}
			if cl := mustClaim(t, e.store, id); cl.Status != ledger.ClaimDone || cl.Attempts != 2 {
				t.Fatalf("claim %+v, want DONE after 2 attempts", cl)
			}
		})
	}
}

// TestStdoutKeepsTheCrashWindow: a sink that cannot say what it wrote
// (stdout) is published to again after the same crash: the documented
// window, one more line with the same key.
func TestStdoutKeepsTheCrashWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var out bytes.Buffer
	w := sink.NewWriter(&out)
	if _, err := e.doorWith(w, diesAt(ingest.FaultAfterPublish)).Ingest(t.Context(), ev("batches/out", lifecycle.Succeeded, tDone, event.SourceWebhook)); err == nil {
		t.Fatal("the holder was to die")
	}
	e.clock.Advance(11 * time.Minute)
	r, err := e.doorWith(w, nil).RetryClaim(t.Context(), "gemini:batches%2Fout")
	if err != nil || r.Outcome != ingest.OutcomeRecovered || r.AlreadyPublished {
		t.Fatalf("recovery = %+v, %v", r, err)
	}
	if n := strings.Count(out.String(), `"idempotency_key":"gemini:batches/out"`); n != 2*2 { // data and attributes
		t.Fatalf("stdout holds the key %d times, want 2 lines of it:\n%s", n/2, out.String())
	}
}

// TestReleasedClaimIsPublishedWithoutAsking: a claim released after a
// failed publish was not published (a sink's error means so; the file
// removes what a failed write left), so its retry does not ask the file.
func TestReleasedClaimIsPublishedWithoutAsking(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := filepath.Join(t.TempDir(), "results.jsonl")
	f := openFile(t, path)
	fs := &flakySink{inner: f}
	fs.fail.Store(1)
	if _, err := e.doorWith(fs, nil).Ingest(t.Context(), ev("batches/rel", lifecycle.Succeeded, tDone, event.SourceWebhook)); !errors.Is(err, ingest.ErrSideEffect) {
		t.Fatalf("ingest with a failing publish: %v", err)
	}
	r, err := e.doorWith(f, nil).RetryClaim(t.Context(), "gemini:batches%2Frel")
	if err != nil || r.Outcome != ingest.OutcomeRecovered || r.Reason != "claim-RELEASED" || r.AlreadyPublished {
		t.Fatalf("retry of the released claim = %+v, %v", r, err)
	}
	if f.asked.Load() != 0 || countLines(t, path) != 1 {
		t.Fatalf("asked %d times, %d lines; want 0 and 1", f.asked.Load(), countLines(t, path))
	}
}

// TestUnansweredTailQuestionLeavesTheClaimHeld: when the file cannot be
// read the door publishes nothing and keeps the claim held (a release
// would have the next attempt publish without asking); after its lease the
// next holder asks again.
func TestUnansweredTailQuestionLeavesTheClaimHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := filepath.Join(t.TempDir(), "results.jsonl")
	id := "gemini:batches%2Fask"
	if _, err := e.doorWith(openFile(t, path), diesAt(ingest.FaultAfterPublish)).Ingest(t.Context(), ev("batches/ask", lifecycle.Succeeded, tDone, event.SourceWebhook)); err == nil {
		t.Fatal("the holder was to die")
	}
	e.clock.Advance(11 * time.Minute)
	closed := openFile(t, path)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := e.doorWith(closed, nil).RetryClaim(t.Context(), id)
	if !errors.Is(err, ingest.ErrSideEffect) {
		t.Fatalf("retry with a file that cannot be read: %v, want ErrSideEffect", err)
	}
	if cl := mustClaim(t, e.store, id); cl.Status != ledger.ClaimHeld || cl.Attempts != 2 {
		t.Fatalf("claim %+v, want still CLAIMED, by the second holder", cl)
	}
	e.clock.Advance(11 * time.Minute)
	r, err := e.doorWith(openFile(t, path), nil).RetryClaim(t.Context(), id)
	if err != nil || !r.AlreadyPublished || countLines(t, path) != 1 {
		t.Fatalf("the next retry = %+v, %v with %d lines; want it found, one line", r, err, countLines(t, path))
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}
