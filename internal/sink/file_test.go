package sink_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lrosink/lrosink/internal/sink"
)

const concurrent = 50

// publishConcurrently publishes opName(0..n-1) from n goroutines at once.
func publishConcurrently(t *testing.T, s sink.Sink, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			m := message(opName(i))
			if i%5 == 0 {
				m.ReplayID = "replay-" + opName(i)
			}
			errs <- s.Publish(t.Context(), m)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
}

// checkLines parses JSON lines and checks each against the message it names;
// it returns the operations in file order.
func checkLines(t *testing.T, b []byte) []string {
	t.Helper()
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("output does not end with a newline")
	}
	var ops []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d is not one JSON object: %v: %q", len(ops)+1, err, sc.Text())
		}
		checkSchema(t, sc.Bytes())
		op, _ := line["operation"].(string)
		m := message(op)
		raw, _ := line["attributes"].(map[string]any)
		attrs := map[string]string{}
		for k, v := range raw {
			s, _ := v.(string)
			attrs[k] = s
		}
		if r, ok := attrs["replay_id"]; ok {
			m.ReplayID = r
		}
		delete(line, "attributes")
		checkData(t, line, m)
		if !maps.Equal(attrs, wantAttrs(m)) {
			t.Errorf("%s: attributes = %v, want %v", op, attrs, wantAttrs(m))
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan lines: %v", err)
	}
	return ops
}

// checkAllOnce asserts ops holds each of opName(0..n-1) exactly once, and
// that every fifth carried its replay id (checked by checkLines' attributes).
func checkAllOnce(t *testing.T, ops []string, n int) {
	t.Helper()
	if len(ops) != n {
		t.Fatalf("got %d lines, want %d", len(ops), n)
	}
	seen := map[string]int{}
	for _, op := range ops {
		seen[op]++
	}
	for i := range n {
		if seen[opName(i)] != 1 {
			t.Errorf("%s appears %d times, want once", opName(i), seen[opName(i)])
		}
	}
}

func TestFileConcurrentPublishAndAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.jsonl")
	f, err := sink.NewFile(path, discard)
	if err != nil {
		t.Fatalf("NewFile: %v", err)
	}
	publishConcurrently(t, f, concurrent)
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkAllOnce(t, checkLines(t, b), concurrent)
	// Replay lines carry replay_id in their attributes, the others do not.
	if n := bytes.Count(b, []byte(`"replay_id":`)); n != concurrent/5 {
		t.Errorf("%d lines carry replay_id, want %d", n, concurrent/5)
	}

	// Reopening appends rather than truncating.
	f2, err := sink.NewFile(path, discard)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if err := f2.Publish(t.Context(), message("batches/appended")); err != nil {
		t.Fatalf("publish after reopen: %v", err)
	}
	if err := f2.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	b2, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b2, b) {
		t.Fatal("reopening changed the earlier lines")
	}
	ops := checkLines(t, b2)
	if len(ops) != concurrent+1 || ops[concurrent] != "batches/appended" {
		t.Fatalf("after reopen: %d lines ending with %q, want %d ending with batches/appended", len(ops), ops[len(ops)-1], concurrent+1)
	}
}

func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := sink.NewFile(filepath.Join(dir, "missing", "results.jsonl"), discard); err == nil {
		t.Error("NewFile in a missing directory returned nil error")
	}

	path := filepath.Join(dir, "results.jsonl")
	f, err := sink.NewFile(path, discard)
	if err != nil {
		t.Fatalf("NewFile: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := f.Publish(ctx, message("batches/cancelled")); !errors.Is(err, context.Canceled) {
		t.Errorf("publish with a cancelled context: %v, want context.Canceled", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := f.Publish(t.Context(), message("batches/closed")); err == nil {
		t.Error("publish after Close returned nil error")
	}
	if b, err := os.ReadFile(path); err != nil || len(b) != 0 {
		t.Errorf("file holds %q (err %v), want nothing written", b, err)
	}
}

func TestWriterConcurrentPublish(t *testing.T) {
	// bytes.Buffer is not safe for concurrent use: the race detector fails
	// this test if the writer does not serialise its writes.
	var buf bytes.Buffer
	w := sink.NewWriter(&buf)
	publishConcurrently(t, w, concurrent)
	checkAllOnce(t, checkLines(t, buf.Bytes()), concurrent)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	before := buf.Len()
	if err := w.Publish(ctx, message("batches/cancelled")); !errors.Is(err, context.Canceled) {
		t.Errorf("publish with a cancelled context: %v, want context.Canceled", err)
	}
	if buf.Len() != before {
		t.Error("a cancelled publish wrote output")
	}
}

// failingWriter accepts part of a write, then fails.
type failingWriter struct{}

func (failingWriter) Write(p []byte) (int, error) { return len(p) / 2, errors.New("disk full") }

func TestWriterReportsWriteErrors(t *testing.T) {
	w := sink.NewWriter(failingWriter{})
	if err := w.Publish(t.Context(), message("batches/x")); err == nil {
		t.Fatal("publish to a failing writer returned nil")
	}
}

// The line is the §6 data object plus "attributes": its other fields are
// exactly the Pub/Sub message data.
func TestLineIsDataPlusAttributes(t *testing.T) {
	var buf bytes.Buffer
	m := message("batches/shape")
	m.ReplayID = "r1"
	if err := sink.NewWriter(&buf).Publish(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	var line, data map[string]json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("line: %v", err)
	}
	raw, err := m.Data()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	var attrs map[string]string
	if err := json.Unmarshal(line["attributes"], &attrs); err != nil {
		t.Fatalf("attributes: %v", err)
	}
	if !maps.Equal(attrs, wantAttrs(m)) {
		t.Errorf("attributes = %v, want %v", attrs, wantAttrs(m))
	}
	delete(line, "attributes")
	if !maps.EqualFunc(line, data, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
		t.Errorf("line without attributes = %s\nwant data %s", buf.Bytes(), raw)
	}
}
