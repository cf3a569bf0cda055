package logging

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/stream.golden from what NewText writes")

// streamRecords are the records serve writes, with the attributes the real
// code gives them (httpapi's "webhook answer" and "register answer", the
// door's "ingest decision", the reconciler's "reconcile pass", a start
// line), at fixed times.
func streamRecords() []struct {
	with []slog.Attr
	rec  slog.Record
} {
	at := time.Date(2026, 12, 2, 9, 20, 0, 0, time.UTC)
	type entry = struct {
		with []slog.Attr
		rec  slog.Record
	}
	var out []entry
	add := func(with []slog.Attr, sec int, l slog.Level, msg string, attrs ...slog.Attr) {
		r := slog.NewRecord(at.Add(time.Duration(sec)*time.Second), l, msg, 0)
		r.AddAttrs(attrs...)
		out = append(out, entry{with, r})
	}
	s, i, b := slog.String, slog.Int, slog.Bool
	i64 := slog.Int64
	add(nil, 0, slog.LevelInfo, "lrosink serve listening", s("addr", "127.0.0.1:8080"), s("store", "sqlite:lrosink.db"), i("gomaxprocs", 3))
	// A delivery the door applies: its decision line is left out, its
	// answer line is the delivery's.
	add(nil, 1, slog.LevelInfo, "ingest decision", s("operation", "batches/abc"), s("outcome", "completed"), s("reason", "first-sighting"),
		s("state", "SUCCEEDED"), s("event_state", "SUCCEEDED"), s("source", "webhook"), i64("version", 1), b("published", true),
		i64("duration_ms", 2), s("delivery_id", "msg_1"))
	add(nil, 1, slog.LevelInfo, "webhook answer", i("status", 200), s("outcome", "completed"), s("reason", "first-sighting"),
		s("operation", "batches/abc"), s("delivery_id", "msg_1"), s("auth", "v1"), s("event", "batch.succeeded"), i64("latency_ms", 3))
	add(nil, 2, slog.LevelInfo, "webhook answer", i("status", 200), s("outcome", "duplicate"), s("reason", "duplicate"),
		s("operation", "batches/abc"), s("delivery_id", "msg_1"), s("auth", "v1"), s("event", "batch.succeeded"), i64("latency_ms", 0))
	add(nil, 3, slog.LevelWarn, "webhook answer", i("status", 401), s("outcome", "rejected"), s("reason", "no-matching-signature"),
		s("operation", ""), s("delivery_id", "msg_2"), s("auth", ""), s("detail", "webhook: no-matching-signature: 0 of 1 v1 entries verify"),
		i64("latency_ms", 0))
	add(nil, 4, slog.LevelInfo, "webhook answer", i("status", 200), s("outcome", "ignored"), s("reason", "unknown-event-type"),
		s("operation", ""), s("delivery_id", "msg_3"), s("auth", "v1"), i64("latency_ms", 1))
	// A failure: the door's line comes too, for its error.
	add(nil, 5, slog.LevelError, "ingest decision", s("operation", "interactions/v1_x"), s("outcome", "error"), s("reason", ""),
		s("state", ""), s("event_state", "FAILED"), s("source", "webhook"), i64("version", 0), b("published", false),
		i64("duration_ms", 1204), s("delivery_id", "msg_4"), s("error", "ledger: database is locked"))
	add(nil, 5, slog.LevelError, "webhook answer", i("status", 503), s("outcome", "error"), s("reason", "ledger-unavailable"),
		s("operation", "interactions/v1_x"), s("delivery_id", "msg_4"), s("auth", "v1"), s("event", "interaction.failed"), i64("latency_ms", 1205))
	add(nil, 6, slog.LevelInfo, "register answer", i("status", 201), s("outcome", "created"), s("reason", "first-sighting"),
		s("operation", "models/veo-3.0-generate-001/operations/op1"))
	add(nil, 6, slog.LevelWarn, "register answer", i("status", 400), s("outcome", "rejected"), s("reason", "invalid-metadata"),
		s("detail", `"metadata" must be a JSON object, not a JSON array`))
	add(nil, 6, slog.LevelInfo, "register answer", i("status", 201), s("outcome", "intent-recorded"), s("reason", "intent-recorded"),
		s("operation", ""), s("intent", "promo-7"))
	// Values a sender chose cannot break a line or forge one.
	add(nil, 7, slog.LevelWarn, "register answer", i("status", 400), s("outcome", "rejected"), s("reason", "invalid-intent"),
		s("operation", ""), s("intent", "k\n09:20:07  webhook    batch.succeeded  batches/forged"), s("detail", "bad\u2028key"))
	// A reconcile pass: each operation it settles, then its figures.
	add(nil, 60, slog.LevelInfo, "ingest decision", s("operation", "batches/def"), s("outcome", "completed"), s("reason", "higher-rank"),
		s("state", "SUCCEEDED"), s("event_state", "SUCCEEDED"), s("source", "reconcile"), i64("version", 3), b("published", true),
		i64("duration_ms", 41))
	add(nil, 60, slog.LevelInfo, "reconcile pass", s("range", "0-64"), b("shared", true), b("ranged", true), i("concurrency", 8),
		i("checked", 3), i("settled", 1), i("still_pending", 2), i("claims_retried", 0), i("claims_due_after", 0), i("stuck", 1),
		i("stuck_alerts", 1), i("errors", 0), i("adopted", 0), i("webhooks_disabled", 0), b("partial", false), i("due_backlog", 0),
		i64("oldest_overdue_seconds", 0), i("pruned", 0), i("intents_unbound", 0), i("intents_bound", 0))
	add(nil, 120, slog.LevelWarn, "reconcile pass", s("range", "0-64"), b("shared", true), b("ranged", true), i("concurrency", 8),
		i("checked", 500), i("settled", 12), i("still_pending", 488), i("claims_retried", 2), i("claims_due_after", 0), i("stuck", 0),
		i("stuck_alerts", 0), i("errors", 1), i("adopted", 0), i("webhooks_disabled", 0), b("partial", true), i("due_backlog", 40),
		i64("oldest_overdue_seconds", 75), i("pruned", 0), i("intents_unbound", 0), i("intents_bound", 0))
	add([]slog.Attr{s("range", "16-32"), s("message_id", "42")}, 121, slog.LevelInfo, "reconcile shard request",
		s("tick", "2026-12-02T09:22:00Z"))
	add(nil, 122, slog.LevelWarn, "reconcile: intent alerting cut short by the pass's deadline", s("error", "context deadline exceeded"))
	add(nil, 123, slog.LevelInfo, "shutting down", slog.Group("drain", i("in_flight", 2)), s("why", "line\nbreak"))
	return out
}

// TestStreamGolden: NewText writes serve's records as testdata/stream.golden
// holds them (go test ./internal/logging -run TestStreamGolden -update
// rewrites it after a deliberate change).
func TestStreamGolden(t *testing.T) {
	var buf bytes.Buffer
	h := NewText(&buf, slog.LevelInfo, time.UTC).Handler()
	for _, e := range streamRecords() {
		hh := h
		if e.with != nil {
			hh = h.WithAttrs(e.with)
		}
		if err := hh.Handle(context.Background(), e.rec); err != nil {
			t.Fatal(err)
		}
	}
	golden := filepath.Join("testdata", "stream.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != string(want) {
		t.Fatalf("the stream differs from %s (-update rewrites it):\n--- got\n%s--- want\n%s", golden, got, want)
	}
	// One line per delivery: the applied delivery's door line is left out.
	if n := strings.Count(buf.String(), "msg_1"); n != 0 {
		t.Errorf("the stream shows delivery ids (%d): they are the JSON's", n)
	}
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(l, "09:20:07  webhook") {
			t.Errorf("a sender's intent key forged a line: %q", l)
		}
	}
	if strings.Count(buf.String(), "batches/abc") != 2 {
		t.Errorf("want one line per delivery of batches/abc (two deliveries):\n%s", buf.String())
	}
}

// TestStreamLevel: records below the level are not written.
func TestStreamLevel(t *testing.T) {
	var buf bytes.Buffer
	log := NewText(&buf, slog.LevelWarn, time.UTC)
	log.Info("quiet")
	log.Warn("loud", "k", "v w")
	if got := buf.String(); strings.Contains(got, "quiet") || !strings.HasSuffix(got, "WARNING  loud  k=\"v w\"\n") {
		t.Fatalf("got %q", got)
	}
}
