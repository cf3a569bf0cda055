// Package testutil holds small helpers shared by the tests of several
// packages: a buffer a running component and a test can share, a results
// sink that keeps what it is given, a fake clock, and a poll for a
// condition (WaitFor).
package testutil

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/results/resultstest"
)

// SyncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// CountLines returns how many lines contain substr.
func (s *SyncBuffer) CountLines(substr string) int {
	n := 0
	for _, l := range strings.Split(s.String(), "\n") {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// Recorder is a results sink (ingest.Sink) that keeps every message. Like
// every sink used in the tests it checks each message against
// docs/results.schema.json: a message that violates it is refused (the
// publish fails, and so does the test that expected it to go out).
type Recorder struct {
	mu   sync.Mutex
	msgs []results.Message
}

// Publish records m.
func (r *Recorder) Publish(_ context.Context, m results.Message) error {
	if err := resultstest.ValidateMessage(m); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
	return nil
}

// All returns the messages so far, in publish order.
func (r *Recorder) All() []results.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]results.Message(nil), r.msgs...)
}

// PerKey counts the messages per idempotency key.
func (r *Recorder) PerKey() map[string]int {
	n := map[string]int{}
	for _, m := range r.All() {
		n[m.IdempotencyKey]++
	}
	return n
}
