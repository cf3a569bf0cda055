package sink_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/sink"
)

func TestOpen(t *testing.T) {
	ctx := testCtx(t)
	c, project := emutest.PubSub(t)
	topic := "projects/" + project + "/topics/opened"
	createTopic(ctx, t, c, topic)
	dir := t.TempDir()

	tests := []struct {
		spec string
		// check runs against a successfully opened sink; nil means Open must fail.
		check func(t *testing.T, s sink.Sink, stdout *bytes.Buffer)
	}{
		{"stdout", func(t *testing.T, s sink.Sink, stdout *bytes.Buffer) {
			if ops := checkLines(t, stdout.Bytes()); len(ops) != 1 {
				t.Errorf("stdout has %d lines, want 1", len(ops))
			}
		}},
		{"file:" + filepath.Join(dir, "r.jsonl"), func(t *testing.T, s sink.Sink, stdout *bytes.Buffer) {
			b, err := os.ReadFile(filepath.Join(dir, "r.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if ops := checkLines(t, b); len(ops) != 1 {
				t.Errorf("file has %d lines, want 1", len(ops))
			}
			if stdout.Len() != 0 {
				t.Errorf("file sink wrote to stdout: %q", stdout)
			}
		}},
		// Publish succeeds only if Open wired a working client for the topic.
		{"pubsub:" + topic, func(t *testing.T, s sink.Sink, stdout *bytes.Buffer) {}},
		{"", nil},
		{"STDOUT", nil},
		{"stdout:", nil},
		{"kafka:results", nil},
		{"file:", nil},
		{"file:" + filepath.Join(dir, "missing", "r.jsonl"), nil},
		{"pubsub:", nil},
		{"pubsub:results", nil},
		{"pubsub:topics/results", nil},
		{"pubsub:projects/p1/topics/", nil},
		{"pubsub:projects//topics/results", nil},
		{"pubsub:projects/p1/subscriptions/results", nil},
		{"pubsub:projects/p1/topics/results/extra", nil},
		{"pubsub:projects/P1/topics/results", nil},
		{"pubsub:projects/p1/topics/9results", nil},
		{"pubsub:projects/p1/topics/ab", nil},
		{"pubsub:projects/p1/topics/goog-results", nil},
		{"pubsub:projects/p1/topics/res ults", nil},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			var stdout bytes.Buffer
			s, err := sink.Open(ctx, tt.spec, &stdout)
			if tt.check == nil {
				if err == nil {
					_ = s.Close()
					t.Fatalf("Open(%q) succeeded, want an error", tt.spec)
				}
				if !strings.Contains(err.Error(), "LROSINK_RESULTS") {
					t.Fatalf("Open(%q) error %q does not name LROSINK_RESULTS", tt.spec, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%q): %v", tt.spec, err)
			}
			if err := s.Publish(ctx, message("batches/opened")); err != nil {
				t.Fatalf("publish: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			tt.check(t, s, &stdout)
		})
	}
}

func TestOpenStdoutNeedsWriter(t *testing.T) {
	if _, err := sink.Open(context.Background(), "stdout", nil); err == nil || !strings.Contains(err.Error(), "LROSINK_RESULTS") {
		t.Fatalf("Open(stdout, nil) = %v, want an error naming LROSINK_RESULTS", err)
	}
}
