package app

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestCloseWithinIsBounded: a client whose Close hangs (a Pub/Sub sink
// flushing into an unresponsive service takes up to its 60 s publish
// timeout) does not hold the stop past its budget: closeWithin returns an
// error saying so once ctx has ended, while clients that close at once
// are closed, in reverse order, even with the budget already spent.
func TestCloseWithinIsBounded(t *testing.T) {
	var order []string
	quick := func(name string) func() error {
		return func() error { order = append(order, name); return nil }
	}
	spent, end := context.WithCancel(t.Context())
	end()
	if err := closeWithin(spent, []func() error{quick("ledger"), quick("sink")}); err != nil {
		t.Fatalf("quick closers with a spent budget: %v", err)
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
