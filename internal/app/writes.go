package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/sink"
)

// The kinds of writes /readyz follows (httpapi.Writes): every write of the
// claim protocol (the door's, the reconciler's) and every publish of the
// door. Each is told the outcome where the App hands the part to its users,
// so no adapter knows of readiness.

// watchedLedger tells w the outcome of every Apply of the ledger it wraps.
// A precondition that failed (a conflict, a fence) is the store answering,
// a success for readiness.
type watchedLedger struct {
	ledger.Ledger
	w *httpapi.Writes
}

func (l watchedLedger) Apply(ctx context.Context, writes ...ledger.Write) ([]ledger.Revision, error) {
	revs, err := l.Ledger.Apply(ctx, writes...)
	if answered := errors.Is(err, ledger.ErrConflict) || errors.Is(err, ledger.ErrFenced) || errors.Is(err, ledger.ErrNotFound); answered {
		record(ctx, l.w, nil)
	} else {
		record(ctx, l.w, err)
	}
	return revs, err
}

// Unwrap returns the ledger watched (ledger.As finds its extras).
func (l watchedLedger) Unwrap() ledger.Ledger { return l.Ledger }

// watchedSink tells w the outcome of every publish.
type watchedSink struct {
	sink.Sink
	w *httpapi.Writes
}

func (s watchedSink) Publish(ctx context.Context, m results.Message) error {
	err := s.Sink.Publish(ctx, m)
	record(ctx, s.w, err)
	return err
}

// watchedTailSink is a watchedSink over a sink the door asks what it wrote
// (ingest.TailChecker, the file sink).
type watchedTailSink struct {
	watchedSink
	tc ingest.TailChecker
}

func (s watchedTailSink) InTail(ctx context.Context, m results.Message) (bool, error) {
	return s.tc.InTail(ctx, m)
}

// watchSink wraps s so that w is told of every publish, keeping what the
// door asks of it.
func watchSink(s sink.Sink, w *httpapi.Writes) sink.Sink {
	ws := watchedSink{Sink: s, w: w}
	if tc, ok := s.(ingest.TailChecker); ok {
		return watchedTailSink{watchedSink: ws, tc: tc}
	}
	return ws
}

// record tells w of err, unless the caller gave up first (the write may not
// have been tried: that says nothing about the store or the sink).
func record(ctx context.Context, w *httpapi.Writes, err error) {
	if err != nil && ctx.Err() != nil {
		return
	}
	w.Record(err)
}

// writeProbeTimeout bounds a probe write of /readyz, as readyProbeTimeout
// bounds its read.
const writeProbeTimeout = readyProbeTimeout

// probeLedgerWrite sends the store a write that cannot apply: the
// reconciler's fields of readyProbeID, which never exists, fenced on a
// revision it cannot have (claim state is the claim protocol's alone to
// write, so the probe writes none). The store refusing it
// (ErrConflict) is the store taking writes; any other error is not. It
// proves the store answers a write, not that the write would fit: on a full
// disk SQLite refuses only a write that needs a new page, so readiness then
// comes back, and goes at the next write that fails.
func (a *App) probeLedgerWrite(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, writeProbeTimeout)
	defer cancel()
	_, err := a.Ledger.Apply(ctx, ledger.PatchSchedule(ledger.Operation{ID: readyProbeID, Rev: ledger.Revision{Version: ledger.FirstVersion}}))
	if err == nil || errors.Is(err, ledger.ErrConflict) {
		return nil
	}
	return fmt.Errorf("a probe write to LROSINK_STORE=%s: %w", a.Config.Store, err)
}

// writeProber is a sink that can try a write without publishing anything
// (the file sink: a temporary file beside the results).
type writeProber interface {
	ProbeWrite(ctx context.Context) error
}

// resultsProbe is the results sink's probe write, nil if it has none
// (Pub/Sub, stdout): then only a publish clears a failure, and the
// reconciler retries a released claim's every pass.
func resultsProbe(s sink.Sink) func(context.Context) error {
	p, ok := s.(writeProber)
	if !ok {
		return nil
	}
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, writeProbeTimeout)
		defer cancel()
		return p.ProbeWrite(ctx)
	}
}
