package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// streamLine matches the human line of the first delivery of batch id
// (logging.NewText).
func streamLine(id string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  webhook +batch\.succeeded +batches/` + regexp.QuoteMeta(id) +
		` +completed \(first-sighting\)  200  (<1|\d+)ms\r?$`)
}

// waitStderr polls p's stderr until ok says it holds what the test waits
// for; the deadline only bounds a serve that never writes it.
func waitStderr(t *testing.T, p *proc, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := p.stderr.String()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve's stderr never held what was awaited:\n%s", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testServeLogFormat: serve whose stderr is a pipe writes the JSON lines
// of Cloud Logging, as before (besides its "lrosink: " notices) (the delivery's "webhook answer" line now
// with its event and latency), and nothing else; LROSINK_LOG_FORMAT=text
// forces the terminal's stream, one human line per delivery; any other
// value is exit 2 naming the variable.
func testServeLogFormat(t *testing.T, bin string) {
	secret := webhooktest.NewSecret()

	p := serve(t, bin, t.TempDir(), []string{"LROSINK_WEBHOOK_SECRETS=" + secret})
	mustDeliver(t, p.base, secret, "fmt_json", "msg_fmt1", "completed")
	out := waitStderr(t, p, func(s string) bool { return strings.Contains(s, `"message":"webhook answer"`) })
	answered := false
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "lrosink: ") {
			continue // serve's notices (where it listens), plain text as ever
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("stderr to a pipe holds a line that is not JSON: %q", l)
		}
		if rec["severity"] == nil || rec["message"] == nil {
			t.Errorf("not a Cloud Logging line (severity, message): %q", l)
		}
		if rec["message"] == "webhook answer" {
			_, hasLatency := rec["latency_ms"]
			answered = rec["event"] == "batch.succeeded" && rec["operation"] == "batches/fmt_json" && hasLatency
		}
	}
	if !answered {
		t.Fatalf("no webhook answer line with its event and latency_ms:\n%s", out)
	}
	stopServe(t, p)

	p = serve(t, bin, t.TempDir(), []string{"LROSINK_WEBHOOK_SECRETS=" + secret, "LROSINK_LOG_FORMAT=text"})
	mustDeliver(t, p.base, secret, "fmt_text", "msg_fmt2", "completed")
	out = waitStderr(t, p, streamLine("fmt_text").MatchString)
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "{") {
			t.Errorf("LROSINK_LOG_FORMAT=text wrote JSON: %q", l)
		}
	}
	if n := strings.Count(out, "batches/fmt_text"); n != 1 {
		t.Errorf("want one line for the delivery, got %d:\n%s", n, out)
	}
	stopServe(t, p)

	_, errOut, code := runEnv(t, bin, t.TempDir(), []string{"LROSINK_LOG_FORMAT=yaml"}, "serve", "--addr", freeAddr(t))
	if code != 2 || !strings.Contains(errOut, "LROSINK_LOG_FORMAT") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("LROSINK_LOG_FORMAT=yaml: exit %d, stderr %q; want 2 and one line naming it", code, errOut)
	}
}
