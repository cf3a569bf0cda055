package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// mapRow matches a package-map row's first cell: "| `internal/cli` |" or
// "| `consume` (public) |".
var mapRow = regexp.MustCompile("(?m)^\\| `([^`]+)`[^|]*\\|")

// TestPackageMapMatchesTree checks ARCHITECTURE.md's package map against the
// tree: every Go package of the module has a row, and every row names a
// package or file that exists. A package added, moved or removed without
// its row fails here.
func TestPackageMapMatchesTree(t *testing.T) {
	b, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Package map")
	if start < 0 {
		t.Fatal("ARCHITECTURE.md has no '## Package map' section")
	}
	section := doc[start:]
	if end := strings.Index(section[len("## Package map"):], "\n## "); end >= 0 {
		section = section[:len("## Package map")+end]
	}
	rows := map[string]bool{}
	for _, m := range mapRow.FindAllStringSubmatch(section, -1) {
		rows[strings.TrimSuffix(m[1], "/")] = true
	}
	if len(rows) < 10 {
		t.Fatalf("found %d package-map rows; the row pattern no longer matches", len(rows))
	}
	pkgs := goPackages(t)
	for _, p := range pkgs {
		if !rows[p] {
			t.Errorf("package %s has no row in ARCHITECTURE.md's package map", p)
		}
	}
	for r := range rows {
		if _, err := os.Stat(filepath.Join("..", r)); err != nil {
			t.Errorf("package map row %q names nothing in the tree", r)
		}
	}
}

// goPackages lists the directories below the module root that hold Go
// files, as slash paths relative to it (testdata and hidden folders left out).
func goPackages(t *testing.T) []string {
	t.Helper()
	var pkgs []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel("..", filepath.Dir(path))
			if err != nil {
				return err
			}
			if rel = filepath.ToSlash(rel); !slices.Contains(pkgs, rel) {
				pkgs = append(pkgs, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}
