package logging

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// fastHandler writes the records `serve` writes per delivery (the "webhook
// answer" and "ingest decision" lines: strings, integers, booleans and
// durations, no groups) itself, byte for byte as slow (the JSON handler
// with replace, under traceHandler) writes them, and hands every other
// record to slow. The two lines per delivery were about 5 % of serve's CPU
// under load, most of it slog's general path: ReplaceAttr on every
// attribute, and a Record.Attrs callback per attribute
// (docs/BENCHMARKS.md). A logger derived with With or WithGroup is slow's
// alone. TestFastHandlerWritesWhatSlogWrites holds the two to the same
// bytes.
type fastHandler struct {
	slow    slog.Handler
	out     *lockedWriter
	level   slog.Leveler
	project string
	bufs    sync.Pool // *[]byte, a line's buffer
}

// lockedWriter is the one writer behind both paths, so that a fast line
// and a slow one never write at once.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (f *fastHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= f.level.Level()
}

func (f *fastHandler) WithAttrs(as []slog.Attr) slog.Handler { return f.slow.WithAttrs(as) }

func (f *fastHandler) WithGroup(name string) slog.Handler { return f.slow.WithGroup(name) }

func (f *fastHandler) Handle(ctx context.Context, r slog.Record) error {
	if !plain(r) {
		return f.slow.Handle(ctx, r)
	}
	bp, _ := f.bufs.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, 0, 1024)
		bp = &b
	}
	b := append((*bp)[:0], '{')
	if !r.Time.IsZero() {
		b = append(b, `"time":"`...)
		b = r.Time.Round(0).AppendFormat(b, time.RFC3339Nano)
		b = append(b, `",`...)
	}
	b = append(b, `"severity":"`...)
	b = append(b, severity(r.Level)...)
	b = append(b, `","message":`...)
	b = appendString(b, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b = appendAttr(b, a)
		return true
	})
	if id, span, ok := traceOf(ctx, f.project); ok {
		b = appendAttr(b, slog.String(TraceKey, id))
		if span != "" {
			b = appendAttr(b, slog.String(SpanKey, span))
		}
	}
	b = append(b, '}', '\n')
	_, err := f.out.Write(b)
	if cap(b) <= 16<<10 { // a rare long line's buffer is not kept
		*bp = b
		f.bufs.Put(bp)
	}
	return err
}

// plain reports whether r is a record the fast path writes as slow would:
// a time slog writes as RFC 3339 (years 0–9999), attributes of the kinds
// appendAttr knows, none empty (slog drops those), and none named like a
// built-in key that replace renames.
func plain(r slog.Record) bool {
	if y := r.Time.Year(); !r.Time.IsZero() && (y < 0 || y >= 10000) {
		return false
	}
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		switch a.Value.Kind() {
		case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindBool, slog.KindDuration:
		default:
			ok = false
		}
		if a.Key == "" || a.Key == slog.LevelKey || a.Key == slog.MessageKey {
			ok = false
		}
		return ok
	})
	return ok
}

func appendAttr(b []byte, a slog.Attr) []byte {
	b = append(b, ',')
	b = appendString(b, a.Key)
	b = append(b, ':')
	switch v := a.Value; v.Kind() {
	case slog.KindString:
		b = appendString(b, v.String())
	case slog.KindInt64:
		b = strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		b = strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindBool:
		b = strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		b = strconv.AppendInt(b, int64(v.Duration()), 10)
	}
	return b
}

// appendString appends s as a JSON string the way slog's JSON handler
// does: quotes, backslashes and control characters escaped (\n, \r, \t by
// name), invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped, and nothing
// else (no HTML escaping).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
