package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
// The file never ends in part of a line: what a write that fails part-way
// put in the file is cut off again before Publish returns its error, and
// NewFile cuts an incomplete last line (a process killed mid-write, or a
// version that left a torn line) back to the last newline, saying so in one
// WARN line. So the next message is always a line of its own. NewFile does
// that only when no other File has the file open (an advisory lock): a
// line another process is writing looks incomplete until its write returns.
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
	regular bool       // a regular file: repaired, and its tail can be read (not /dev/full or a pipe)
	mu      sync.Mutex // one writer at a time, so lines never interleave
	f       *os.File   // nil once closed
	written int64      // lines written, under mu
	// fragment is the part of a line a failed write left at the end of the
	// file and could not cut off (the truncate failed too): every write
	// first tries again, and none is made while it stays. Under mu.
	fragment []byte
	// write appends p to f (f.Write; a test injects a short write).
	write func(f *os.File, p []byte) (int, error)

	syncMu sync.Mutex // one fsync at a time
	synced int64      // lines covered by a completed fsync, under syncMu
	syncs  int64      // fsyncs done, under syncMu (tests)

	inflight atomic.Int64 // Publish calls between entry and return
	// gather lets the lines of concurrent publishes be written before an
	// fsync (sleeps syncWindow; tests replace it).
	gather func()

	tail tail // InTail's view of the lines written before this process opened the file
}

// syncWindow is how long an fsync leader waits for concurrent publishes to
// write their lines: about one fsync's own time on the development VM, so a
// publish waits at most about twice what it did, and under load one fsync
// covers every line written meanwhile.
const syncWindow = 2 * time.Millisecond

// NewFile opens path for appending, creating it if needed, and repairs an
// incomplete last line (one WARN line on log says how many bytes were
// removed) unless another File has the file open. The directory must
// exist: creating it would hide a mistyped path.
func NewFile(path string, log *slog.Logger) (*File, error) {
	if log == nil {
		return nil, errors.New("open results file: no logger given")
	}
	// Read as well as write: the repair and InTail read the file's tail.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open results file: %w", err)
	}
	// A new file's directory entry is durable only once its directory is
	// synced; without this, fsynced lines could vanish with the file.
	if err := syncDir(filepath.Dir(path)); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open results file %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open results file %s: %w", path, err)
	}
	s := &File{path: path, f: f, regular: st.Mode().IsRegular(), gather: func() { time.Sleep(syncWindow) },
		write: func(f *os.File, p []byte) (int, error) { return f.Write(p) }}
	if !s.regular {
		return s, nil // a device or a pipe: nothing to repair or read back
	}
	removed, size := int64(0), st.Size()
	if lockAlone(f) {
		if removed, size, err = cutIncomplete(f); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("open results file %s: remove its incomplete last line: %w", path, err)
		}
	}
	if err := lockShared(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open results file %s: lock it: %w", path, err)
	}
	if removed > 0 {
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("open results file %s: sync the removal of its incomplete last line: %w", path, err)
		}
		log.Warn("results file ended in an incomplete line: removed it",
			slog.String("path", path), slog.Int64("bytes_removed", removed), slog.Int64("size", size))
	}
	s.tail.end = size
	return s, nil
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

// Publish appends one line and returns once it is fsynced. A write that
// fails leaves the file as it was before it.
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
	if err := s.writeLine(line); err != nil {
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

// writeLine appends line whole or not at all (under mu). One Write call per
// line: O_APPEND places it atomically at the end. Part of a line written
// (the disk filled up half-way) is cut off again before the error returns;
// were that to fail too, no later line is written until it succeeds, so no
// message is ever appended to a fragment.
func (s *File) writeLine(line []byte) error {
	if s.fragment != nil {
		if err := s.cutOwn(s.fragment); err != nil && !errors.Is(err, errNotLast) {
			return fmt.Errorf("an earlier failed write left %d bytes of a line that cannot be removed yet: %w", len(s.fragment), err)
		}
		s.fragment = nil
	}
	n, err := s.write(s.f, line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	if err == nil {
		return nil
	}
	if n > 0 && s.regular {
		if cerr := s.cutOwn(line[:n]); cerr != nil {
			if !errors.Is(cerr, errNotLast) { // else trying again cannot help
				s.fragment = bytes.Clone(line[:n])
			}
			return errors.Join(err, fmt.Errorf("remove the %d bytes written: %w", n, cerr))
		}
	}
	return err
}

// errNotLast: the bytes to cut are no longer the file's last ones.
var errNotLast = errors.New("another process appended after them; they stay")

// cutOwn truncates frag, which a failed write left, off the end of the
// file: only if the file still ends with it, so that a line another
// process appended since is never cut (then frag stays where it is:
// errNotLast).
func (s *File) cutOwn(frag []byte) error {
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	at := st.Size() - int64(len(frag))
	last := make([]byte, len(frag))
	if at < 0 {
		return errNotLast
	}
	if _, err := s.f.ReadAt(last, at); err != nil {
		return fmt.Errorf("read the file's tail: %w", err)
	}
	if !bytes.Equal(last, frag) {
		return errNotLast
	}
	if err := s.f.Truncate(at); err != nil {
		return fmt.Errorf("truncate to %d bytes: %w", at, err)
	}
	return nil
}

// cutIncomplete truncates f after its last newline (to nothing if it has
// none) and returns how many bytes it removed and the size left.
func cutIncomplete(f *os.File) (removed, size int64, err error) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	end := st.Size()
	keep, err := lastLineEnd(f, end)
	if err != nil {
		return 0, 0, err
	}
	if keep == end {
		return 0, end, nil
	}
	if err := f.Truncate(keep); err != nil {
		return 0, 0, fmt.Errorf("truncate to %d bytes: %w", keep, err)
	}
	return end - keep, keep, nil
}

// lastLineEnd returns the offset just past the last newline before end (0
// if there is none), reading back from end.
func lastLineEnd(r io.ReaderAt, end int64) (int64, error) {
	buf := make([]byte, min(end, 64<<10))
	for hi := end; hi > 0; {
		lo := max(hi-int64(len(buf)), 0)
		b := buf[:hi-lo]
		if _, err := r.ReadAt(b, lo); err != nil {
			return 0, fmt.Errorf("read the file's tail: %w", err)
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] == '\n' {
				return lo + int64(i) + 1, nil
			}
		}
		hi = lo
	}
	return 0, nil
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

// probeBlock is what ProbeWrite writes: one block, the least a new line
// can need from a filesystem.
const probeBlock = 4096

// ProbeWrite tries a write where the results go, without touching them: a
// temporary file beside the results file gets a block, fsynced, and is
// removed. /readyz runs it to learn that a full disk has room again when
// no publish comes to say so. A device or pipe has nowhere beside it to
// try: an error.
func (s *File) ProbeWrite(context.Context) error {
	if !s.regular {
		return fmt.Errorf("%s is not a regular file: no write to try beside it", s.path)
	}
	f, err := os.CreateTemp(filepath.Dir(s.path), ".lrosink-probe-*")
	if err != nil {
		return fmt.Errorf("probe write beside %s: %w", s.path, err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	_, err = f.Write(make([]byte, probeBlock))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("probe write beside %s: %w", s.path, err)
	}
	return nil
}
