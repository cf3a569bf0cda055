package docs_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/ingest"
)

// stageLine matches a stage of the data-path figure: "│ ▸ coalesce  ...".
var stageLine = regexp.MustCompile(`▸ ([a-z-]+)`)

// TestDataPathListsTheDoorsStages checks the data-path figure of
// ARCHITECTURE.md against the door: the same stages, in the same order.
func TestDataPathListsTheDoorsStages(t *testing.T) {
	b, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Data path")
	if start < 0 {
		t.Fatal("ARCHITECTURE.md has no '## Data path' section")
	}
	section := doc[start:]
	if end := strings.Index(section, "\n```\n\n"); end >= 0 {
		section = section[:end] // the figure ends with its code block
	}
	var got []string
	for _, m := range stageLine.FindAllStringSubmatch(section, -1) {
		got = append(got, m[1])
	}
	if want := ingest.Stages(); !slices.Equal(got, want) {
		t.Fatalf("ARCHITECTURE.md's data path lists the stages %q; the door has %q", got, want)
	}
}
