package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// nasty strings: every escape slog's JSON handler makes, and what it
// leaves alone (HTML characters, multi-byte runes).
var nasty = []string{"", "plain", `"quoted"`, `back\slash`, "tab\tnew\nline\rret", "\x00\x01\x1f\x7f", "<a href='x'>&amp;</a>",
	"caf\u00e9 \u65e5\u672c", "\u2028\u2029", "bad\xffutf8\xc3", "emoji \U0001F600", strings.Repeat("long ", 300)}

func randString(rng *rand.Rand) string {
	var b strings.Builder
	for range 1 + rng.IntN(3) {
		b.WriteString(nasty[rng.IntN(len(nasty))])
	}
	return b.String()
}

// randAttr returns an attribute of a kind the fast path writes, or, when
// plainOnly is false, sometimes one it hands to slog.
func randAttr(rng *rand.Rand, plainOnly bool) slog.Attr {
	key := randString(rng)
	if key == "" || key == slog.LevelKey || key == slog.MessageKey {
		key = "k" + key
	}
	n := 5
	if !plainOnly {
		n = 11
	}
	switch rng.IntN(n) {
	case 0:
		return slog.String(key, randString(rng))
	case 1:
		return slog.Int64(key, rng.Int64()-rng.Int64())
	case 2:
		return slog.Uint64(key, rng.Uint64())
	case 3:
		return slog.Bool(key, rng.IntN(2) == 0)
	case 4:
		return slog.Duration(key, time.Duration(rng.Int64N(1e12)-5e11))
	case 5:
		return slog.Float64(key, rng.Float64()*1e6)
	case 6:
		return slog.Any(key, errors.New(randString(rng)))
	case 7:
		return slog.Time(key, time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)))
	case 8:
		return slog.Group(key, slog.String("in", randString(rng)))
	case 9:
		return slog.String("", randString(rng))
	default:
		return slog.String([]string{slog.MessageKey, slog.TimeKey}[rng.IntN(2)], randString(rng))
	}
}

// TestFastHandlerWritesWhatSlogWrites holds New's logger to the bytes the
// JSON handler with replace under traceHandler (what New returned before
// the fast path) writes, over random records: plain ones, which the fast
// path writes, and others, which it hands on.
func TestFastHandlerWritesWhatSlogWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	traced := ContextWithTrace(context.Background(), map[string][]string{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	levels := []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelInfo + 2, slog.LevelWarn, slog.LevelError, slog.LevelError + 4}
	fastLines := 0
	for i := range 3000 {
		project := []string{"", "p1"}[i%2]
		var got, want bytes.Buffer
		fast := New(&got, slog.LevelDebug, project)
		ref := slog.New(&traceHandler{Handler: slog.NewJSONHandler(&want, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: replace}), project: project})

		plainOnly := i%3 != 0
		var attrs []slog.Attr
		for range rng.IntN(12) {
			attrs = append(attrs, randAttr(rng, plainOnly))
		}
		when := time.Unix(rng.Int64N(4e9), rng.Int64N(1e9))
		if i%50 == 0 {
			when = time.Time{}
		} else if i%7 == 0 {
			when = time.Now() // with a monotonic reading
		}
		r := slog.NewRecord(when, levels[rng.IntN(len(levels))], randString(rng), 0)
		r.AddAttrs(attrs...)
		if plainOnly && !plain(r) {
			t.Fatalf("record %d of plain attributes not plain: %v", i, attrs)
		}
		if plain(r) {
			fastLines++
		}
		ctx := context.Background()
		if i%4 == 0 {
			ctx = traced
		}
		if err := fast.Handler().Handle(ctx, r.Clone()); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if err := ref.Handler().Handle(ctx, r.Clone()); err != nil {
			t.Fatalf("record %d, reference: %v", i, err)
		}
		if got.String() != want.String() {
			t.Fatalf("record %d differs:\n got %q\nwant %q", i, got.String(), want.String())
		}
	}
	if fastLines < 1500 {
		t.Fatalf("only %d of 3000 records took the fast path", fastLines)
	}
}

// Lines written at once through the fast path, the slow path and a derived
// logger stay whole lines (run with -race: one writer behind both).
func TestFastAndSlowLinesNeverInterleave(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelInfo, "")
	derived := log.With("range", "0-1")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				switch (g + i) % 3 {
				case 0:
					log.LogAttrs(context.Background(), slog.LevelInfo, "fast", slog.Int("i", i), slog.String("s", strings.Repeat("x", 500)))
				case 1:
					log.Info("slow", "f", 1.5, "err", errors.New("boom"))
				default:
					derived.Info("derived", "i", i)
				}
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines, want %d", len(lines), 8*200)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not one JSON object: %q: %v", l, err)
		}
	}
}

// BenchmarkDecisionLine: one "ingest decision" line (the door's attributes)
// through New's logger and through the JSON handler it replaced.
func BenchmarkDecisionLine(b *testing.B) {
	attrs := []slog.Attr{slog.String("operation", "batches/bench_95c1c7b9_0"), slog.String("outcome", "completed"),
		slog.String("reason", "applied"), slog.String("state", "SUCCEEDED"), slog.String("event_state", "SUCCEEDED"),
		slog.String("source", "webhook"), slog.Int64("version", 1), slog.Bool("published", true),
		slog.Int64("duration_ms", 12), slog.String("delivery_id", "msg_2mXk9")}
	for _, c := range []struct {
		name string
		log  *slog.Logger
	}{
		{"fast", New(discard{}, slog.LevelInfo, "p1")},
		{"slog", slog.New(&traceHandler{Handler: slog.NewJSONHandler(discard{}, &slog.HandlerOptions{ReplaceAttr: replace}), project: "p1"})},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				c.log.LogAttrs(ctx, slog.LevelInfo, "ingest decision", attrs...)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// A nil level is Info, as slog.HandlerOptions reads it.
func TestNilLevelIsInfo(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, nil, "")
	log.Debug("hidden")
	log.Info("shown")
	if got := buf.String(); strings.Contains(got, "hidden") || !strings.Contains(got, `"message":"shown"`) {
		t.Fatalf("nil level logged %q, want only the Info line", got)
	}
}

// A long line's buffer is written and dropped, not kept for the next line.
func TestLongLineBufferNotKept(t *testing.T) {
	var buf bytes.Buffer
	f, ok := New(&buf, slog.LevelInfo, "").Handler().(*fastHandler)
	if !ok {
		t.Fatal("New's handler is not the fast one")
	}
	slog.New(f).LogAttrs(context.Background(), slog.LevelInfo, "long", slog.String("s", strings.Repeat("x", 64<<10)))
	if !strings.Contains(buf.String(), `"message":"long"`) {
		t.Fatal("the long line was not written")
	}
	if bp, _ := f.bufs.Get().(*[]byte); bp != nil && cap(*bp) > 16<<10 {
		t.Fatalf("a %d-byte buffer was kept", cap(*bp))
	}
}
