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

// TestReadmeFirstScreen: the README opens with what lrosink is, then Run,
// Test, Try it and a real Gemini job, in that order, each short; the
// reference material is in docs/CLI.md, which it links.
func TestReadmeFirstScreen(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	var heads []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "## ") {
			heads = append(heads, strings.TrimPrefix(l, "## "))
		}
	}
	want := []string{"Run", "Test", "Try it", "Your first real Gemini job"}
	if len(heads) < len(want) {
		t.Fatalf("README sections %q, want %q first", heads, want)
	}
	for i, w := range want {
		if heads[i] != w {
			t.Errorf("README section %d is %q, want %q (sections: %q)", i+1, heads[i], w, heads)
		}
	}
	// What and how to run and test it fit one screen before Try it.
	before, _, _ := strings.Cut(text, "## Try it")
	if n := strings.Count(before, "\n"); n > 45 {
		t.Errorf("README has %d lines before Try it: the first screen is what, run and test; move reference to docs/CLI.md", n)
	}
	if !strings.Contains(text, "(docs/CLI.md)") {
		t.Error("README does not link docs/CLI.md, where its reference material went")
	}
	if _, err := os.Stat("CLI.md"); err != nil {
		t.Fatal(err)
	}
}
