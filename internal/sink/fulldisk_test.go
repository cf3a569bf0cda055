package sink

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestFileFullDisk (issue #47, item 1): a publish that meets a full disk
// part-way fails, and leaves the file ending on its last complete line;
// once there is room again the next message is a line of its own; and a
// file left ending in part of a line is repaired when it is opened again,
// with one WARN line saying how many bytes went.
//
// As root the results file lives on a 64 KiB tmpfs filled by another file,
// so the kernel itself cuts the write short; otherwise (and always, as its
// own case) a short write is injected where the line is written.
func TestFileFullDisk(t *testing.T) {
	t.Run("injected short write", func(t *testing.T) {
		dir := t.TempDir()
		short := true
		fullDiskCase(t, dir, func(s *File) {
			next := s.write
			s.write = func(f *os.File, p []byte) (int, error) {
				if !short {
					return next(f, p)
				}
				n, err := next(f, p[:len(p)/2])
				if err != nil {
					return n, err
				}
				return n, syscall.ENOSPC
			}
		}, func() { short = false })
	})
	dir := testutil.SmallFS(t, "64k")
	if dir == "" {
		return // the injected short write above stands in
	}
	t.Run("tmpfs of 64 KiB", func(t *testing.T) {
		filler := filepath.Join(dir, "filler")
		fullDiskCase(t, dir, func(*File) { testutil.FillFS(t, filler) }, func() {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// fullDiskCase runs the case in dir: full makes the next write of a large
// line fail part-way, free makes room again.
func fullDiskCase(t *testing.T, dir string, full func(*File), free func()) {
	path := filepath.Join(dir, "results.jsonl")
	s, err := NewFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Publish(t.Context(), bigMessage("batches/first", 10)); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, path)

	full(s)
	// The write really was cut short, not refused whole: that is the case
	// that tore the file.
	var wrote, of int
	next := s.write
	s.write = func(f *os.File, p []byte) (int, error) {
		n, err := next(f, p)
		wrote, of = n, len(p)
		return n, err
	}
	err = s.Publish(t.Context(), bigMessage("batches/torn", 16<<10))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("publish on a full disk: %v, want ENOSPC", err)
	}
	if wrote == 0 || wrote >= of {
		t.Fatalf("the write put %d of %d bytes: not a write cut short, the case proves nothing", wrote, of)
	}
	if got := readFile(t, path); !bytes.Equal(got, before) {
		t.Fatalf("after the failed write the file holds %d bytes ending %q, want the %d it held before", len(got), tailOf(got), len(before))
	}

	free()
	if err := s.Publish(t.Context(), bigMessage("batches/after", 10)); err != nil {
		t.Fatalf("publish once there is room: %v", err)
	}
	if ops := lineOps(t, readFile(t, path)); strings.Join(ops, " ") != "batches/first batches/after" {
		t.Fatalf("lines for %v, want batches/first then batches/after, each a line of its own", ops)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A file left ending in part of a line (a process killed mid-write, or
	// an older version on a full disk) is repaired when opened.
	whole := readFile(t, path)
	line, err := jsonLine(bigMessage("batches/cut", 10))
	if err != nil {
		t.Fatal(err)
	}
	fragment := line[:len(line)/2]
	appendBytes(t, path, fragment)
	var logs bytes.Buffer
	s2, err := NewFile(path, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("reopen a torn file: %v", err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	var warns []map[string]any
	for l := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		warns = append(warns, rec)
	}
	if len(warns) != 1 || warns[0]["level"] != "WARN" || warns[0]["msg"] != "results file ended in an incomplete line: removed it" ||
		warns[0]["bytes_removed"] != float64(len(fragment)) || warns[0]["path"] != path {
		t.Fatalf("reopening a file ending in %d bytes of a line logged %v, want one WARN with bytes_removed %d", len(fragment), warns, len(fragment))
	}
	if got := readFile(t, path); !bytes.Equal(got, whole) {
		t.Fatalf("after the repair the file holds %d bytes ending %q, want the %d whole lines it held", len(got), tailOf(got), len(whole))
	}
	if err := s2.Publish(t.Context(), bigMessage("batches/reopened", 10)); err != nil {
		t.Fatal(err)
	}
	if ops := lineOps(t, readFile(t, path)); strings.Join(ops, " ") != "batches/first batches/after batches/reopened" {
		t.Fatalf("after the repair, lines for %v", ops)
	}

	// A file that ends on a whole line is opened without a word.
	logs.Reset()
	s3, err := NewFile(path, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	_ = s3.Close()
	if logs.Len() != 0 {
		t.Fatalf("opening a whole file logged %s", logs.String())
	}
}

// bigMessage is a settled message for op whose output holds n bytes.
func bigMessage(op string, n int) results.Message {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	return results.Message{Operation: op, APIName: results.APIName(op), Kind: "batch", State: "SUCCEEDED", UpdateTime: t0,
		SettledBy: "webhook", SettledAt: t0, IdempotencyKey: "gemini:" + op, Output: map[string]any{"pad": strings.Repeat("x", n)}}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// lineOps checks that b is whole JSON lines and returns their operations.
func lineOps(t *testing.T, b []byte) []string {
	t.Helper()
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("the file ends in part of a line: %q", tailOf(b))
	}
	var ops []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct{ Operation string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Operation == "" {
			t.Fatalf("line %d is not a results line (%v): %q", len(ops)+1, err, tailOf(sc.Bytes()))
		}
		ops = append(ops, l.Operation)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ops
}

// tailOf is the end of b, short enough for a failure message.
func tailOf(b []byte) []byte { return b[max(len(b)-80, 0):] }

// TestFileLeavesAnotherWritersTailAlone: a file another File holds open
// (`lrosink replay` beside `serve`) may end in a line that process is
// still writing, so opening it cuts nothing; alone with it, the next open
// repairs it. And a failed write whose bytes another process appended
// after is not cut at the cost of that line: it stays, and the sink keeps
// writing.
func TestFileLeavesAnotherWritersTailAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.jsonl")
	first, err := NewFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Publish(t.Context(), bigMessage("batches/one", 10)); err != nil {
		t.Fatal(err)
	}
	inFlight := []byte(`{"operation":"batches/in-flight"`)
	appendBytes(t, path, inFlight)
	var logs bytes.Buffer
	second, err := NewFile(path, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); !bytes.HasSuffix(got, inFlight) || logs.Len() != 0 {
		t.Fatalf("opened beside another File: the file ends %q and it logged %q; want the line in flight left alone", tailOf(got), logs.String())
	}
	_ = second.Close()
	_ = first.Close()
	third, err := NewFile(path, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = third.Close() })
	if got := readFile(t, path); bytes.HasSuffix(got, inFlight) || !strings.Contains(logs.String(), `"bytes_removed":32`) {
		t.Fatalf("opened alone: the file ends %q and it logged %q; want the fragment cut, with a WARN", tailOf(got), logs.String())
	}

	other, err := jsonLine(bigMessage("batches/other-process", 10))
	if err != nil {
		t.Fatal(err)
	}
	next := third.write
	third.write = func(f *os.File, p []byte) (int, error) {
		n, err := next(f, p[:len(p)/2])
		if err != nil {
			return n, err
		}
		appendBytes(t, path, other) // another process, between the write and its error
		return n, syscall.ENOSPC
	}
	if err := third.Publish(t.Context(), bigMessage("batches/failed", 10)); !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, errNotLast) {
		t.Fatalf("a failed write followed by another process's line: %v, want ENOSPC and errNotLast", err)
	}
	if got := readFile(t, path); !bytes.HasSuffix(got, other) {
		t.Fatalf("the other process's line was cut: the file ends %q", tailOf(got))
	}
	third.write = next
	if err := third.Publish(t.Context(), bigMessage("batches/later", 10)); err != nil {
		t.Fatalf("the sink stopped writing after a fragment it could not cut: %v", err)
	}
}
