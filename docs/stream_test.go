package docs_test

import (
	"os"
	"strings"
	"testing"
)

// TestStreamExampleIsTheGolden: the lines OPERATIONS.md shows of serve's
// terminal stream are lines the stream writes (internal/logging's golden
// file, which its test holds the code to).
func TestStreamExampleIsTheGolden(t *testing.T) {
	ops, err := os.ReadFile("OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("../internal/logging/testdata/stream.golden")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(ops), "### serve's stream in a terminal")
	if !ok {
		t.Fatal(`OPERATIONS.md has no "### serve's stream in a terminal"`)
	}
	_, block, _ := strings.Cut(rest, "```\n")
	block, _, _ = strings.Cut(block, "```")
	lines := strings.Split(strings.TrimSpace(block), "\n")
	if len(lines) < 4 {
		t.Fatalf("the example shows %d lines", len(lines))
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(golden), "\n") {
		have[l] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("OPERATIONS.md shows a stream line the golden file does not hold:\n%s", l)
		}
	}
}
