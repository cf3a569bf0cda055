package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/sink"
)

func message(op, replay string) results.Message {
	return results.Message{Operation: op, Kind: "batch", State: "SUCCEEDED", SettledBy: "webhook",
		UpdateTime: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC), SettledAt: time.Date(2026, 11, 21, 9, 1, 0, 0, time.UTC),
		IdempotencyKey: "gemini:" + op, ReplayID: replay}
}

// `lrosink serve | worker -lines - -store sqlite:PATH`: each key is processed
// once (the duplicate publish is skipped, the replay runs again), and a
// second worker on the same store reading the same lines processes nothing.
func TestWorkerOnLines(t *testing.T) {
	var lines bytes.Buffer
	w := sink.NewWriter(&lines)
	for _, m := range []results.Message{message("batches/a", ""), message("batches/a", ""), message("batches/b", ""), message("batches/a", "r1")} {
		if err := w.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	db := "sqlite:" + filepath.Join(t.TempDir(), "worker.db")
	var out, logs bytes.Buffer
	if err := run(t.Context(), []string{"-lines", "-", "-store", db}, bytes.NewReader(lines.Bytes()), &out, &logs); err != nil {
		t.Fatalf("run: %v\n%s", err, logs.String())
	}
	var got []string
	for l := range strings.Lines(out.String()) {
		var r struct {
			Operation string `json:"operation"`
			ReplayID  string `json:"replay_id"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("output line %q: %v", l, err)
		}
		got = append(got, r.Operation+"/"+r.ReplayID)
	}
	if strings.Join(got, " ") != "batches/a/ batches/b/ batches/a/r1" {
		t.Errorf("processed %v, want a, b and a's replay once each", got)
	}
	if !strings.Contains(logs.String(), `"outcome":"duplicate"`) {
		t.Errorf("no duplicate logged:\n%s", logs.String())
	}
	// The keys Cloud Logging reads, as lrosink itself writes them.
	for l := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if rec["severity"] == nil || rec["message"] == nil || rec["level"] != nil || rec["msg"] != nil {
			t.Errorf("log line %q: want severity and message, not level and msg", l)
		}
	}

	out.Reset()
	if err := run(t.Context(), []string{"-lines", "-", "-store", db}, bytes.NewReader(lines.Bytes()), &out, &logs); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("second worker on the same store processed again:\n%s", out.String())
	}
}

func TestWorkerFlags(t *testing.T) {
	for _, args := range [][]string{
		{},                                    // no source
		{"-lines", "-", "-subscription", "s"}, // two sources
		{"-lines", "-", "-store", "mysql:x"},
	} {
		var stderr bytes.Buffer
		err := run(t.Context(), args, strings.NewReader(""), &bytes.Buffer{}, &stderr)
		// A bad invocation says what is wrong, then shows the usage.
		if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "Usage of worker") || !strings.Contains(stderr.String(), "-lines") {
			t.Errorf("%v: %v, stderr %q; want a usage error with the usage", args, err, stderr.String())
		}
	}
}
