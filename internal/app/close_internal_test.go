package app

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/logging"
)

// TestCloseWithinIsBounded: a client whose Close hangs (a Pub/Sub sink
// flushing into an unresponsive service takes up to its 60 s publish
// timeout; a SQLite ledger's writer waits up to 10 s for another process's
// write lock) does not hold the stop past its budget: closeWithin returns
// an error saying so once ctx has ended, while clients that close at once
// are closed, in reverse order.
func TestCloseWithinIsBounded(t *testing.T) {
	var order []string
	quick := func(name string) func() error {
		return func() error { order = append(order, name); return nil }
	}
	if err := closeWithin(t.Context(), []func() error{quick("ledger"), quick("sink")}); err != nil {
		t.Fatalf("quick closers: %v", err)
	}
	if strings.Join(order, ",") != "sink,ledger" {
		t.Fatalf("closed %v, want the sink, then the ledger", order)
	}

	hang := make(chan struct{})
	defer close(hang)
	ctx, stop := context.WithCancel(t.Context())
	entered := make(chan struct{})
	go func() { <-entered; stop() }() // the budget ends while Close hangs
	err := closeWithin(ctx, []func() error{quick("ledger"), func() error { close(entered); <-hang; return nil }})
	if err == nil || !strings.Contains(err.Error(), "outlasted the stop's budget") || !errors.Is(err, context.Canceled) {
		t.Fatalf("a hanging Close = %v, want an error naming the budget", err)
	}

	failing := errors.New("flush failed")
	if err := closeWithin(t.Context(), []func() error{func() error { return failing }}); !errors.Is(err, failing) {
		t.Fatalf("a failing Close = %v, want its error", err)
	}
}

// TestStopPartsShareOneDeadline: every part of a stop ends by the deadline
// of the one budget it is given: the requests, the reconcile loop and the
// door's drain closeGrace before it (workPart), the clients' close at it.
// A budget shorter than closeGrace goes to the close whole.
func TestStopPartsShareOneDeadline(t *testing.T) {
	dl := time.Now().Add(StopTimeout)
	ctx, cancel := context.WithDeadline(t.Context(), dl)
	defer cancel()
	work, cancelWork := workPart(ctx)
	defer cancelWork()
	if got, ok := work.Deadline(); !ok || !got.Equal(dl.Add(-closeGrace)) {
		t.Fatalf("the work part ends at %v (%v), want %v: closeGrace before the stop's deadline", got, ok, dl.Add(-closeGrace))
	}
	short, cancelShort := context.WithTimeout(t.Context(), closeGrace/2)
	defer cancelShort()
	w, cancelW := workPart(short)
	defer cancelW()
	if w.Err() == nil {
		t.Fatal("with less than closeGrace left, the work part is not already over")
	}
	none, cancelNone := workPart(t.Context())
	defer cancelNone()
	if _, ok := none.Deadline(); ok || none.Err() != nil {
		t.Fatal("a budget without a deadline gets one")
	}
}

// TestStopCutsOffAStepThatIgnoresItsBudget: a step of the stop (serve's
// reconcile loop) that does not return when its part of the budget ends
// does not hold the stop: Stop returns once the whole budget has ended,
// naming the step cut off.
func TestStopCutsOffAStepThatIgnoresItsBudget(t *testing.T) {
	a := &App{Log: logging.Discard()}
	hang := make(chan struct{})
	defer close(hang)
	ctx, cancel := context.WithTimeout(t.Context(), 2*closeGrace)
	defer cancel()
	err := a.Stop(ctx, &http.Server{}, func(context.Context) { <-hang })
	if err == nil || !strings.Contains(err.Error(), "a step of the stop outlasted the budget") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop with a step that hangs = %v, want the step named as cut off", err)
	}
}
