// Package docs_test keeps the documents code cites in step with the code.
package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citation matches "CONTRACT.md §6", "GEMINI.md §4" and the second section
// of a range such as "CONTRACT.md §3–§5".
var citation = regexp.MustCompile(`\b(CONTRACT|GEMINI)\.md §([0-9]+)(?:[–-]§([0-9]+))?`)

// Every section a comment, a document or the Terraform cites exists in the
// cited file: a renumbered or removed section fails here, not in a reader's
// hands.
func TestCitedSectionsExist(t *testing.T) {
	sections := map[string]map[string]bool{}
	for _, doc := range []string{"CONTRACT", "GEMINI"} {
		b, err := os.ReadFile(doc + ".md")
		if err != nil {
			t.Fatal(err)
		}
		sections[doc] = map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^##+ ([0-9]+)\.`).FindAllStringSubmatch(string(b), -1) {
			sections[doc][m[1]] = true
		}
		if len(sections[doc]) < 5 {
			t.Fatalf("%s.md: found %d numbered sections; the heading pattern no longer matches", doc, len(sections[doc]))
		}
	}
	cites := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name != ".." && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".tf", ".yaml", ".sh":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range citation.FindAllStringSubmatch(string(b), -1) {
			if strings.HasSuffix(path, "docs_test.go") {
				continue
			}
			cites++
			for _, n := range []string{m[2], m[3]} {
				if n != "" && !sections[m[1]][n] {
					t.Errorf("%s cites %s.md §%s, which does not exist", path, m[1], n)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cites < 10 {
		t.Errorf("found %d citations in the repository; the walk or the pattern is broken", cites)
	}
}
