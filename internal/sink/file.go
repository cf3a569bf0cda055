package sink

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lrosink/lrosink/internal/results"
)

// File appends results messages to a JSON-lines file; Publish returns once
// its line is fsynced.
//
// Concurrent publishes share fsyncs (group sync): each line is written
// under mu, then its publisher waits for an fsync that began after the
// write; one fsync covers every line written before it. One fsync per line
// capped serve at one line per fsync (≈ 1–2 ms on the development VM's
// disk), whatever the load.
//
// An fsync is costly beyond its wait: on ext4 it commits the journal, which
// also flushes what the ledger's WAL appended since, and fsyncs as often as
// they could run were a fifth of serve's CPU per delivery under load
// (docs/BENCHMARKS.md). So a leader that finds other publishes in flight
// first lets them write for syncWindow, and its one fsync covers them too;
// a lone publish syncs at once.
type File struct {
	path    string
	mu      sync.Mutex // one writer at a time, so lines never interleave
	f       *os.File   // nil once closed
	written int64      // lines written, under mu

	syncMu sync.Mutex // one fsync at a time
	synced int64      // lines covered by a completed fsync, under syncMu
	syncs  int64      // fsyncs done, under syncMu (tests)

	inflight atomic.Int64 // Publish calls between entry and return
	// gather lets the lines of concurrent publishes be written before an
	// fsync (sleeps syncWindow; tests replace it).
	gather func()
}

// syncWindow is how long an fsync leader waits for concurrent publishes to
// write their lines: about one fsync's own time on the development VM, so a
// publish waits at most about twice what it did, and under load one fsync
// covers every line written meanwhile.
const syncWindow = 2 * time.Millisecond

// NewFile opens path for appending, creating it if needed. The directory must
// exist: creating it would hide a mistyped path.
func NewFile(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open results file: %w", err)
	}
	// A new file's directory entry is durable only once its directory is
	// synced; without this, fsynced lines could vanish with the file.
	if err := syncDir(filepath.Dir(path)); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open results file %s: %w", path, err)
	}
	return &File{path: path, f: f, gather: func() { time.Sleep(syncWindow) }}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for sync: %w", err)
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("close directory %s: %w", dir, err)
	}
	return nil
}

// Publish appends one line and returns once it is fsynced.
func (s *File) Publish(ctx context.Context, m results.Message) error {
	line, err := jsonLine(m)
	if err != nil {
		return err
	}
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	s.mu.Lock()
	// Checked after the lock: waiting behind other writes may outlast ctx.
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("write results for %s to %s: %w", m.Operation, s.path, err)
	}
	if s.f == nil {
		s.mu.Unlock()
		return fmt.Errorf("write results for %s to %s: %w", m.Operation, s.path, os.ErrClosed)
	}
	// One Write call per line: O_APPEND places it atomically at the end.
	if n, err := s.f.Write(line); err != nil {
		if n > 0 {
			// Best effort: end the torn line so the next line parses on its own.
			_, _ = s.f.Write([]byte("\n"))
		}
		s.mu.Unlock()
		return fmt.Errorf("write results for %s to %s: %w", m.Operation, s.path, err)
	}
	s.written++
	mine := s.written
	s.mu.Unlock()
	if err := s.syncUpTo(mine); err != nil {
		return fmt.Errorf("fsync results for %s to %s: %w", m.Operation, s.path, err)
	}
	return nil
}

// syncUpTo returns once an fsync that began after line n was written has
// completed. Whoever holds syncMu fsyncs for every line written so far; the
// publishers that queued behind it find their lines covered and return.
func (s *File) syncUpTo(n int64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.synced >= n {
		return nil
	}
	if s.inflight.Load() > 1 {
		s.gather()
	}
	s.mu.Lock()
	f, upTo := s.f, s.written
	s.mu.Unlock()
	if f == nil {
		return os.ErrClosed
	}
	if err := f.Sync(); err != nil {
		// Not advanced: each waiting publisher tries its own fsync.
		return err
	}
	s.syncs++
	s.synced = upTo
	return nil
}

// Close closes the file; later Publish calls fail.
func (s *File) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return fmt.Errorf("close results file %s: %w", s.path, err)
	}
	return nil
}

// Writer writes results messages as JSON lines to w (stdout). A message counts
// as accepted once written: stdout is for development and log-based pipelines,
// where there is nothing further to sync.
type Writer struct {
	mu sync.Mutex // one writer at a time, so lines never interleave
	w  io.Writer
}

// NewWriter writes to w; Close does not close w, which the caller owns.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Publish writes one line.
func (s *Writer) Publish(ctx context.Context, m results.Message) error {
	line, err := jsonLine(m)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write results for %s: %w", m.Operation, err)
	}
	n, err := s.w.Write(line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("write results for %s: %w", m.Operation, err)
	}
	return nil
}

// Close is a no-op: the writer belongs to the caller.
func (s *Writer) Close() error { return nil }
