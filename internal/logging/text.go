package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// NewText returns a logger that writes one human line per record to w, for
// `lrosink serve` in a terminal (LROSINK_LOG_FORMAT=text; CONTRACT.md §2):
// a delivery is one line (the "webhook answer" record: time, event,
// operation, outcome, reason, status, latency), as Stripe CLI's listen
// shows an event, and so is a registration, a reconcile pass and each
// operation a pass settles. The door's own line for a delivery or a
// registration says again what its answer line says, so it is left out
// unless it is a warning or an error. Every other record is its time,
// level, message and key=value pairs. Times are shown in loc. The JSON of
// New stays what Cloud Run and every pipe get.
func NewText(w io.Writer, level slog.Leveler, loc *time.Location) *slog.Logger {
	if level == nil {
		level = slog.LevelInfo
	}
	if loc == nil {
		loc = time.Local
	}
	return slog.New(&textHandler{out: &lockedWriter{w: w}, level: level, loc: loc})
}

// textHandler is NewText's handler.
type textHandler struct {
	out   *lockedWriter
	level slog.Leveler
	loc   *time.Location
	attrs []slog.Attr // from WithAttrs, keys already prefixed by their groups
	group string      // the open group's prefix ("g." ), from WithGroup
}

func (h *textHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *textHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), prefixed(h.group, as)...)
	return &c
}

func (h *textHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group = h.group + name + "."
	return &c
}

// prefixed flattens as under group prefix p (a group attribute's members
// become "g.key").
func prefixed(p string, as []slog.Attr) []slog.Attr {
	out := make([]slog.Attr, 0, len(as))
	for _, a := range as {
		a.Value = a.Value.Resolve()
		if a.Value.Kind() == slog.KindGroup {
			out = append(out, prefixed(p+a.Key+".", a.Value.Group())...)
			continue
		}
		if a.Key != "" {
			out = append(out, slog.Attr{Key: p + a.Key, Value: a.Value})
		}
	}
	return out
}

func (h *textHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := append([]slog.Attr(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, prefixed(h.group, []slog.Attr{a})...)
		return true
	})
	rec := textRecord{level: r.Level, msg: r.Message, attrs: attrs}
	line, columns, ok := rec.line()
	if !ok {
		return nil
	}
	var b strings.Builder
	b.WriteString(r.Time.In(h.loc).Format("15:04:05"))
	b.WriteString("  ")
	// A delivery's or a pass's line keeps its columns: its outcome
	// (rejected, error, partial) says what its level would.
	if r.Level >= slog.LevelWarn && !columns {
		b.WriteString(levelWord(r.Level))
		b.WriteString("  ")
	}
	b.WriteString(line)
	b.WriteByte('\n')
	_, err := io.WriteString(h.out, b.String())
	return err
}

// levelWord is a warning's or an error's tag; Cloud Logging's severity
// names, as the JSON says them.
func levelWord(l slog.Level) string {
	if l >= slog.LevelError {
		return "ERROR"
	}
	return "WARNING"
}

// textRecord is one record being rendered.
type textRecord struct {
	level slog.Level
	msg   string
	attrs []slog.Attr
	used  map[string]bool
}

// get is attribute k as text ("" when absent), marked as shown.
func (t *textRecord) get(k string) string {
	for i := len(t.attrs) - 1; i >= 0; i-- {
		if t.attrs[i].Key == k {
			if t.used == nil {
				t.used = map[string]bool{}
			}
			t.used[k] = true
			return t.attrs[i].Value.String()
		}
	}
	return ""
}

// line is the record's line after its time and level, and whether it is
// one of the column lines (a delivery, a registration, a decision, a
// pass); false to leave it out.
func (t *textRecord) line() (line string, columns, ok bool) {
	switch t.msg {
	case "webhook answer":
		return t.delivery("webhook", t.get("event"), t.get("status"), t.get("latency_ms")), true, true
	case "register answer":
		ev := ""
		if k := t.get("intent"); k != "" {
			ev = "intent " + k
		}
		return t.delivery("register", ev, t.get("status"), ""), true, true
	case "ingest decision":
		src := t.get("source")
		if (src == "webhook" || src == "register") && t.level < slog.LevelWarn {
			return "", true, false // its answer's line says it
		}
		return t.delivery(src, t.get("event_state"), "", t.get("duration_ms")), true, true
	case "reconcile pass":
		return t.pass(), true, true
	}
	var b strings.Builder
	b.WriteString(safe(t.msg))
	t.rest(&b)
	return b.String(), false, true
}

// delivery is the line of one delivery, registration or decision: the
// source, the event (its type or state), the operation, the outcome and
// reason, the HTTP status, the latency, then what else the record holds
// that a reader needs (a refusal's detail, an error).
func (t *textRecord) delivery(source, ev, status, ms string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-9s  %-27s  %-32s  %s", safe(source), orDash(safe(ev)), orDash(safe(t.get("operation"))), orDash(safe(t.get("outcome"))))
	if reason := t.get("reason"); reason != "" {
		b.WriteString(" (" + safe(reason) + ")")
	}
	if status != "" {
		b.WriteString("  " + safe(status))
	}
	if ms != "" {
		b.WriteString("  " + millis(ms))
	}
	for _, k := range []string{"intent_note", "detail", "error"} {
		if v := t.get(k); v != "" {
			b.WriteString("  " + k + "=" + quoteIfNeeded(v))
		}
	}
	return b.String()
}

// passFigures are a reconcile pass's figures shown whatever their value;
// passExtras only when not zero (or false).
var (
	passFigures = []struct{ key, word string }{
		{"checked", "checked"}, {"settled", "settled"}, {"still_pending", "pending"}, {"errors", "errors"},
	}
	passExtras = []struct{ key, word string }{
		{"claims_retried", "claims retried"}, {"stuck", "stuck"}, {"stuck_alerts", "stuck alerts"},
		{"adopted", "adopted"}, {"webhooks_disabled", "webhooks disabled"}, {"due_backlog", "due backlog"},
		{"pruned", "pruned"}, {"intents_unbound", "intents unbound"}, {"intents_bound", "intents bound"},
	}
)

// pass is a reconcile pass's line: its range and its figures.
func (t *textRecord) pass() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-9s  %-27s", "reconcile", "pass "+orDash(safe(t.get("range"))))
	for _, f := range passFigures {
		fmt.Fprintf(&b, "  %s %s", f.word, orDash(safe(t.get(f.key))))
	}
	for _, f := range passExtras {
		if v := t.get(f.key); v != "" && v != "0" && v != "false" {
			fmt.Fprintf(&b, "  %s %s", f.word, safe(v))
		}
	}
	if t.get("partial") == "true" {
		b.WriteString("  partial")
	}
	for _, k := range []string{"shared", "ranged", "concurrency", "claims_due_after", "oldest_overdue_seconds"} {
		t.get(k) // the pass's bookkeeping: in the JSON, not the stream
	}
	t.rest(&b)
	return b.String()
}

// rest appends every attribute not shown yet as key=value.
func (t *textRecord) rest(b *strings.Builder) {
	for _, a := range t.attrs {
		if t.used[a.Key] {
			continue
		}
		b.WriteString("  " + safe(a.Key) + "=" + quoteIfNeeded(a.Value.String()))
	}
}

// millis renders a latency in milliseconds as the stream shows it.
func millis(ms string) string {
	if ms == "0" {
		return "<1ms"
	}
	return ms + "ms"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// safe is s as a column shows it: quoted when it holds a control or
// non-printing character, so that a value a sender chose (an intent key)
// can neither break the line nor forge another.
func safe(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

// quoteIfNeeded quotes a value with spaces, quotes or control characters,
// so that a line stays one line and its pairs stay apart.
func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '"' || r == '=' || !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}
