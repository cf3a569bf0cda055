package docs_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeHeadlineStatesTheCrashWindow: where the README promises
// "exactly one results message", the same paragraph states the documented
// exception (a crash after the publish, one more message with the same
// idempotency_key), so the simulator's "N messages for M keys" does not
// contradict it.
func TestReadmeHeadlineStatesTheCrashWindow(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, para := range strings.Split(string(b), "\n\n") {
		if !strings.Contains(para, "exactly one results") {
			continue
		}
		flat := strings.Join(strings.Fields(para), " ")
		if !strings.Contains(flat, "after the publish") || !strings.Contains(flat, "same `idempotency_key`") {
			t.Errorf("README paragraph promising exactly one message does not state the crash window beside it:\n%s", para)
		}
	}
}
