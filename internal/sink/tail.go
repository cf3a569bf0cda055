package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"unicode/utf8"

	"github.com/lrosink/lrosink/internal/results"
)

// TailBytes bounds how far back InTail looks for a message: the last 8 MiB
// of the file as it was when this process opened it, and the last 8 MiB
// written since (docs/ARCHITECTURE.md, "The remaining crash window"). 8 MiB
// holds about 10,000 lines of a typical size; a line carries at most about
// 330 KiB (metadata and output at their bounds), so at least 24 of those.
const TailBytes = 8 << 20

// tail is what InTail remembers of the lines written before this process
// opened the file: they never change, so they are read once, on the first
// question (a process that recovers no claim never reads them).
type tail struct {
	end  int64               // the file's size at open (after the repair)
	mu   sync.Mutex          // one InTail at a time
	keys map[string]struct{} // tailKey of each line in [end-TailBytes, end); nil until read, under mu
}

// InTail reports whether a line of m's message (the same idempotency_key,
// and the same replay_id or none) is in the recent tail of the file (see
// TailBytes). The ingest door asks before publishing the message of a claim
// whose holder's lease ran out: that holder may have written the line and
// died before it committed DONE. A line found is fsynced before InTail
// answers true (it may have been written by a process killed before its
// own fsync). A device or pipe (file:/dev/full) keeps nothing to look in:
// false.
func (s *File) InTail(ctx context.Context, m results.Message) (bool, error) {
	if !s.regular {
		return false, nil
	}
	want := tailKey(m.IdempotencyKey, m.ReplayID)
	s.mu.Lock()
	f := s.f
	s.mu.Unlock()
	if f == nil {
		return false, fmt.Errorf("look for %s in %s: %w", m.IdempotencyKey, s.path, errClosed)
	}
	// One question at a time: a scan holds a chunk of the file in memory,
	// and questions are few (claims recovered after a crash).
	s.tail.mu.Lock()
	found, err := s.tail.has(ctx, f, want)
	if err == nil && !found {
		found, err = s.sinceOpen(ctx, f, m.IdempotencyKey, want)
	}
	s.tail.mu.Unlock()
	if err != nil {
		return false, fmt.Errorf("look for %s in the last %d bytes of %s: %w", m.IdempotencyKey, TailBytes, s.path, err)
	}
	if !found {
		return false, nil
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if err := f.Sync(); err != nil {
		return false, fmt.Errorf("fsync %s, which holds %s's line: %w", s.path, m.IdempotencyKey, err)
	}
	return true, nil
}

// has reads the lines before the open once and looks want up among them
// (under t.mu).
func (t *tail) has(ctx context.Context, f io.ReaderAt, want string) (bool, error) {
	if t.keys == nil {
		keys := map[string]struct{}{}
		err := scanBack(ctx, f, max(t.end-TailBytes, 0), t.end, scanChunk, func(line []byte) bool {
			if k, ok := lineKey(line); ok {
				keys[k] = struct{}{}
			}
			return false
		})
		if err != nil {
			return false, err
		}
		t.keys = keys
	}
	_, ok := t.keys[want]
	return ok, nil
}

// sinceOpen looks for want among the last TailBytes written since the
// open: a claim this process published and then could not commit DONE
// (the ledger failed), or lines a process still stopping wrote after this
// one opened the file.
func (s *File) sinceOpen(ctx context.Context, f *os.File, key, want string) (bool, error) {
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	end := st.Size()
	lo := max(s.tail.end, end-TailBytes)
	if lo >= end {
		return false, nil
	}
	// Most lines are other keys': a line not holding the key's bytes is
	// not decoded (a key JSON would escape is looked for in every line).
	var needle []byte
	if plainJSON(key) {
		needle = []byte(key)
	}
	found := false
	err = scanBack(ctx, f, lo, end, scanChunk, func(line []byte) bool {
		if needle != nil && !bytes.Contains(line, needle) {
			return false
		}
		k, ok := lineKey(line)
		found = ok && k == want
		return found
	})
	return found, err
}

// tailKey identifies a message among the lines: its idempotency_key and
// its replay_id ("" for none).
func tailKey(key, replayID string) string { return key + "\x00" + replayID }

// lineKey reads the tailKey of a results line from its "attributes",
// the line's last member (jsonLine); false for a line that has none.
func lineKey(line []byte) (string, bool) {
	const member = `"attributes":`
	i := bytes.LastIndex(line, []byte(member))
	if i < 0 {
		return "", false
	}
	var attrs struct {
		Key      string `json:"idempotency_key"`
		ReplayID string `json:"replay_id"`
	}
	if err := json.NewDecoder(bytes.NewReader(line[i+len(member):])).Decode(&attrs); err != nil || attrs.Key == "" {
		return "", false
	}
	return tailKey(attrs.Key, attrs.ReplayID), true
}

// plainJSON reports whether s is written as itself inside a JSON string
// (encoding/json escapes quotes, backslashes, control characters, <, >, &
// and U+2028/U+2029).
func plainJSON(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == '"' || r == '\\' || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029' || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// scanChunk is how much scanBack reads at a time.
const scanChunk = 1 << 20

// scanBack calls f with each complete line (without its newline) that lies
// wholly in [lo, hi) of r, the last first, until f returns true, reading
// chunk bytes at a time. A line is complete when a newline ends it; one that
// began before lo is not offered, nor the bytes after the last newline
// before hi.
func scanBack(ctx context.Context, r io.ReaderAt, lo, hi, chunk int64, f func(line []byte) bool) error {
	// The byte before lo, when there is one, says whether the region's
	// first line starts at lo (it is a newline) or before it.
	start := max(lo-1, 0)
	var carry []byte // the start of the chunk after this one, up to its first newline
	dropTail := true // no newline seen yet: the bytes read so far end no line
	for end := hi; end > start; {
		if err := ctx.Err(); err != nil {
			return err
		}
		from := max(end-chunk, start)
		buf := make([]byte, end-from, end-from+int64(len(carry)))
		if _, err := r.ReadAt(buf, from); err != nil {
			return fmt.Errorf("read bytes %d-%d: %w", from, end, err)
		}
		buf = append(buf, carry...)
		end = from
		if dropTail {
			nl := bytes.LastIndexByte(buf, '\n')
			if nl < 0 {
				carry = nil
				continue
			}
			buf, dropTail = buf[:nl+1], false
		}
		// buf ends with a newline, so it has a first one; every segment
		// after it is a whole line. (A line longer than a chunk makes that
		// first newline the carry's: buf is carried on whole.)
		first := bytes.IndexByte(buf, '\n')
		for b := len(buf) - 1; b > first; {
			a := bytes.LastIndexByte(buf[:b], '\n') + 1
			if f(buf[a:b]) {
				return nil
			}
			b = a - 1
		}
		if from == start {
			if lo == 0 { // the segment before is the file's first line
				f(buf[:first])
			}
			return nil
		}
		carry = buf[:first+1]
	}
	return nil
}
