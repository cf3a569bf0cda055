// Package logging writes structured JSON lines that Cloud Logging understands:
// `severity` and `message` instead of slog's `level` and `msg`, and the
// request's trace as `logging.googleapis.com/trace` so a request's lines group
// together in the console.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// Keys Cloud Logging lifts out of a JSON payload.
const (
	TraceKey = "logging.googleapis.com/trace"
	SpanKey  = "logging.googleapis.com/spanId"
)

type traceKey struct{}

type trace struct{ id, span string }

// New returns a logger writing one JSON object per line to w. project is the
// Google Cloud project used to build full trace names; empty logs the bare
// trace id.
func New(w io.Writer, level slog.Leveler, project string) *slog.Logger {
	if level == nil {
		level = slog.LevelInfo // as slog.HandlerOptions reads a nil Level
	}
	out := &lockedWriter{w: w}
	h := slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level, ReplaceAttr: replace})
	return slog.New(&fastHandler{slow: &traceHandler{Handler: h, project: project}, out: out, level: level, project: project})
}

// Discard returns a logger that drops everything (for tests that do not
// inspect logs).
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func replace(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.LevelKey:
		return slog.String("severity", severity(a.Value.Any().(slog.Level)))
	case slog.MessageKey:
		a.Key = "message"
	}
	return a
}

func severity(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "DEBUG"
	case l < slog.LevelWarn:
		return "INFO"
	case l < slog.LevelError:
		return "WARNING"
	default:
		return "ERROR"
	}
}

// traceHandler adds the trace of the request in ctx to every record.
type traceHandler struct {
	slog.Handler
	project string
}

func (h *traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if id, span, ok := traceOf(ctx, h.project); ok {
		r.AddAttrs(slog.String(TraceKey, id))
		if span != "" {
			r.AddAttrs(slog.String(SpanKey, span))
		}
	}
	return h.Handler.Handle(ctx, r)
}

// traceOf returns the trace in ctx as Cloud Logging names it (the full
// name when project is known) and its span, if ctx carries one.
func traceOf(ctx context.Context, project string) (id, span string, ok bool) {
	t, ok := ctx.Value(traceKey{}).(trace)
	if !ok {
		return "", "", false
	}
	id = t.id
	if project != "" {
		id = "projects/" + project + "/traces/" + t.id
	}
	return id, t.span, true
}

func (h *traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &traceHandler{Handler: h.Handler.WithAttrs(as), project: h.project}
}

func (h *traceHandler) WithGroup(name string) slog.Handler {
	return &traceHandler{Handler: h.Handler.WithGroup(name), project: h.project}
}

var (
	hexID = regexp.MustCompile(`^[0-9a-fA-F]{1,32}$`)
	spanD = regexp.MustCompile(`^[0-9]{1,20}$`)
	tp    = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$`)
)

// ContextWithTrace returns ctx carrying the trace of the request headers:
// X-Cloud-Trace-Context ("TRACE/SPAN;o=1") or W3C traceparent. Malformed
// values are ignored rather than logged, since headers are attacker-chosen.
func ContextWithTrace(ctx context.Context, h http.Header) context.Context {
	if v := h.Get("X-Cloud-Trace-Context"); v != "" {
		id, rest, _ := strings.Cut(v, "/")
		span, _, _ := strings.Cut(rest, ";")
		if hexID.MatchString(id) {
			return context.WithValue(ctx, traceKey{}, trace{id: id, span: hexSpan(span)})
		}
	}
	// Canonical keys: Get canonicalises any other form, an allocation per
	// request.
	if m := tp.FindStringSubmatch(h.Get("Traceparent")); m != nil {
		return context.WithValue(ctx, traceKey{}, trace{id: m[1], span: m[2]})
	}
	return ctx
}

// hexSpan is X-Cloud-Trace-Context's span id (decimal) as Cloud Logging
// wants a spanId: the Trace API v2 form, 16 hex digits ("1" → "0000000000000001",
// as traceparent carries it already); "" when it is not a 64-bit decimal.
// Google's own libraries had it wrong (docs/GEMINI.md §11).
func hexSpan(span string) string {
	if !spanD.MatchString(span) {
		return ""
	}
	n, err := strconv.ParseUint(span, 10, 64)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%016x", n)
}

// Middleware puts the request's trace into its context.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Most requests carry no trace: a copy of the request only when
		// there is one to put in.
		if ctx := ContextWithTrace(r.Context(), r.Header); ctx != r.Context() {
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}
