package lifecycle_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// allowedImports is everything the pure reducer may import.
var allowedImports = map[string]bool{"time": true}

// TestNoIOImports: the reducer is pure. Its non-test files may import only
// "time"; anything else (os, net, io, database drivers, loggers...) is a
// failure naming the file and import.
func TestNoIOImports(t *testing.T) {
	parsed, bad, err := disallowedImports(".")
	if err != nil {
		t.Fatal(err)
	}
	if parsed == 0 {
		t.Fatal("no non-test Go files found in the package directory")
	}
	for _, b := range bad {
		t.Errorf("%s; the lifecycle package may import only %v", b, sortedKeys(allowedImports))
	}
}

// TestNoIOImportsChecker makes sure the checker itself catches an offending
// import (and ignores test files).
func TestNoIOImportsChecker(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.go", "package x\n\nimport (\n\t\"time\"\n\t_ \"os\"\n)\n\nvar _ time.Time\n")
	write("b.go", "package x\n\nimport \"net/http\"\n\nvar _ = http.Get\n")
	write("c_test.go", "package x\n\nimport \"testing\"\n\nvar _ testing.T\n")
	parsed, bad, err := disallowedImports(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(bad, "\n")
	if parsed != 2 || len(bad) != 2 || !strings.Contains(got, `"os"`) || !strings.Contains(got, `"net/http"`) {
		t.Errorf("checker parsed %d files and reported:\n%s\nwant 2 files and exactly os and net/http", parsed, got)
	}
}

// disallowedImports parses the non-test .go files of dir and returns how many
// it parsed and one message per import outside allowedImports.
func disallowedImports(dir string) (int, []string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return 0, nil, err
	}
	fset := token.NewFileSet()
	var (
		parsed int
		bad    []string
	)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			return parsed, bad, fmt.Errorf("parse %s: %w", name, err)
		}
		parsed++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return parsed, bad, fmt.Errorf("%s: bad import %s: %w", name, imp.Path.Value, err)
			}
			if !allowedImports[path] {
				bad = append(bad, fmt.Sprintf("%s: imports %q", fset.Position(imp.Pos()), path))
			}
		}
	}
	return parsed, bad, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
