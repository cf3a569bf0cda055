package sink

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/results"
)

// TestScanBackOffersEveryWholeLine holds scanBack to a plain split: for
// random files (lines up to several chunks long, with or without a last
// newline) and random regions, it offers exactly the lines that a newline
// ends inside the region and that start inside it, last first.
func TestScanBackOffersEveryWholeLine(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 1))
	for i := range 2000 {
		var b []byte
		for range rng.IntN(8) {
			b = append(b, bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, rng.IntN(20))...)
			if rng.IntN(5) > 0 {
				b = append(b, '\n')
			}
		}
		lo := int64(rng.IntN(len(b) + 1))
		hi := lo + int64(rng.IntN(len(b)-int(lo)+1))
		chunk := int64(1 + rng.IntN(9))
		var got []string
		if err := scanBack(t.Context(), bytes.NewReader(b), lo, hi, chunk, func(l []byte) bool {
			got = append(got, string(l))
			return false
		}); err != nil {
			t.Fatal(err)
		}
		if want := wholeLines(b, lo, hi); !slices.Equal(got, want) {
			t.Fatalf("case %d: %q [%d, %d) in chunks of %d: offered %q, want %q", i, b, lo, hi, chunk, got, want)
		}
	}
}

// wholeLines is the plain split scanBack must agree with: the lines of b
// that start at or after lo, just after a newline (or at 0), and whose
// newline is before hi, last first.
func wholeLines(b []byte, lo, hi int64) []string {
	var out []string
	start := int64(0)
	for i := int64(0); i < int64(len(b)); i++ {
		if b[i] != '\n' {
			continue
		}
		if start >= lo && i < hi {
			out = append(out, string(b[start:i]))
		}
		start = i + 1
	}
	slices.Reverse(out)
	return out
}

// TestInTail: a message is found by its idempotency_key and replay_id
// among the lines written before the file was opened and since, within
// TailBytes of the end; not beyond, and never for a different replay.
func TestInTail(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "results.jsonl")
	replay := bigMessage("batches/b", 10)
	replay.ReplayID = "replay-1"
	for _, m := range []results.Message{bigMessage("batches/a", 10), replay, bigMessage(`batches/q"uote`, 10)} {
		appendLine(t, path, m)
	}
	appendBytes(t, path, []byte(`{"operation":"batches/torn","idempotency_key":"gemini:batches/torn"`)) // repaired at open
	s, err := NewFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	noReplay := bigMessage("batches/b", 10)
	for _, c := range []struct {
		m    results.Message
		want bool
	}{
		{bigMessage("batches/a", 10), true},
		{replay, true},
		{noReplay, false}, // the key's line is a replay: not the message itself
		{bigMessage(`batches/q"uote`, 10), true},
		{bigMessage("batches/torn", 10), false},
		{bigMessage("batches/never", 10), false},
	} {
		if got, err := s.InTail(ctx, c.m); err != nil || got != c.want {
			t.Errorf("InTail(%s, replay %q) before any publish = %v, %v; want %v", c.m.IdempotencyKey, c.m.ReplayID, got, err, c.want)
		}
	}
	if err := s.Publish(ctx, bigMessage("batches/c", 10)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.InTail(ctx, bigMessage("batches/c", 10)); err != nil || !got {
		t.Errorf("InTail of a message published since the open = %v, %v; want true", got, err)
	}

	// More than TailBytes written after a line (by another writer here,
	// which InTail reads as well) push it out of the part looked at.
	appendLine(t, path, bigMessage("batches/pushed", 10))
	var filler bytes.Buffer
	n := 0
	for ; filler.Len() <= TailBytes; n++ {
		l, err := jsonLine(bigMessage(fmt.Sprintf("batches/fill-%06d", n), 400))
		if err != nil {
			t.Fatal(err)
		}
		filler.Write(l)
	}
	appendBytes(t, path, filler.Bytes())
	appendLine(t, path, bigMessage("batches/recent", 10))
	for _, c := range []struct {
		op   string
		want bool
	}{{"batches/pushed", false}, {"batches/recent", true}, {"batches/c", false}} {
		if got, err := s.InTail(ctx, bigMessage(c.op, 10)); err != nil || got != c.want {
			t.Errorf("InTail(%s) with more than TailBytes since the open = %v, %v; want %v", c.op, got, err, c.want)
		}
	}
	// Reopened, the same bound holds for what was written before.
	s2, err := NewFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	for _, c := range []struct {
		op   string
		want bool
	}{{"batches/pushed", false}, {"batches/recent", true}, {"batches/fill-000000", false}, {fmt.Sprintf("batches/fill-%06d", n-1), true}} {
		if got, err := s2.InTail(ctx, bigMessage(c.op, 10)); err != nil || got != c.want {
			t.Errorf("InTail(%s) after a reopen = %v, %v; want %v", c.op, got, err, c.want)
		}
	}

	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.InTail(ctx, bigMessage("batches/a", 10)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("InTail after Close: %v, want an error", err)
	}
}

// TestInTailOfADevice: file:/dev/full keeps nothing to look in.
func TestInTailOfADevice(t *testing.T) {
	s, err := NewFile("/dev/full", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.InTail(t.Context(), bigMessage("batches/a", 10)); got || err != nil {
		t.Fatalf("InTail on /dev/full = %v, %v; want false, nil", got, err)
	}
}

func appendLine(t *testing.T, path string, m results.Message) {
	t.Helper()
	l, err := jsonLine(m)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(l); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkInTail is one question about a key that is not there, the
// worst case: the cached 8 MiB before the open looked up, and 8 MiB
// written since read back. (The first question also reads the part before
// the open once; it is outside the loop.)
func BenchmarkInTail(b *testing.B) {
	path := filepath.Join(b.TempDir(), "results.jsonl")
	var lines bytes.Buffer
	for i := 0; lines.Len() <= 2*TailBytes; i++ {
		l, err := jsonLine(bigMessage(fmt.Sprintf("batches/bench-%06d", i), 400))
		if err != nil {
			b.Fatal(err)
		}
		lines.Write(l)
	}
	half := bytes.IndexByte(lines.Bytes()[TailBytes:], '\n') + TailBytes + 1
	if err := os.WriteFile(path, lines.Bytes()[:half], 0o644); err != nil {
		b.Fatal(err)
	}
	s, err := NewFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Write(lines.Bytes()[half:]); err != nil {
		b.Fatal(err)
	}
	_ = f.Close()
	m := bigMessage("batches/absent", 10)
	if found, err := s.InTail(b.Context(), m); err != nil || found {
		b.Fatalf("InTail = %v, %v", found, err)
	}
	b.SetBytes(TailBytes)
	for b.Loop() {
		if _, err := s.InTail(b.Context(), m); err != nil {
			b.Fatal(err)
		}
	}
}
