package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// logCalls are the slog methods and the index of their message argument.
var logCalls = map[string]int{
	"Debug": 0, "Info": 0, "Warn": 0, "Error": 0,
	"DebugContext": 1, "InfoContext": 1, "WarnContext": 1, "ErrorContext": 1,
	"Log": 2, "LogAttrs": 2,
}

// logMessages returns every literal log message of the module's non-test
// code, with where it is written.
func logMessages(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	msgs := map[string]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name != ".." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var i int
			switch fun := call.Fun.(type) {
			case *ast.SelectorExpr:
				if i, ok = logCalls[fun.Sel.Name]; !ok {
					return true
				}
			case *ast.Ident:
				// A method value called by name: log(ctx, "reconcile pass", …).
				if fun.Name != "log" {
					return true
				}
				i = 1
			default:
				return true
			}
			if len(call.Args) <= i {
				return true
			}
			if lit, ok := call.Args[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					msgs[s] = fset.Position(lit.Pos()).String()
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) < 30 {
		t.Fatalf("found %d log messages in the code; the walk or the call set is broken", len(msgs))
	}
	return msgs
}

var (
	codeFence = regexp.MustCompile("(?s)```.*?```")
	codeSpan  = regexp.MustCompile("`([^`]+)`")
	spaces    = regexp.MustCompile(`\s+`)
)

// A log message the runbook or the contract quotes is quoted whole: an
// operator builds equality queries (jsonPayload.message="…") from it, and
// the start of a message matches no line. A quoted text that begins a
// message the code writes, without being one itself, fails here.
func TestQuotedLogMessagesAreWhole(t *testing.T) {
	msgs := logMessages(t)
	for _, doc := range []string{"OPERATIONS.md", "CONTRACT.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := codeFence.ReplaceAllStringFunc(string(b), func(s string) string {
			return strings.Repeat("\n", strings.Count(s, "\n"))
		})
		for _, m := range codeSpan.FindAllStringSubmatchIndex(text, -1) {
			q := spaces.ReplaceAllString(text[m[2]:m[3]], " ")
			// A command (`lrosink serve`) is not a log message.
			if _, ok := msgs[q]; ok || !strings.Contains(q, " ") || strings.HasPrefix(q, "lrosink ") {
				continue
			}
			for msg, at := range msgs {
				if strings.HasPrefix(msg, q) {
					line := strings.Count(text[:m[0]], "\n") + 1
					t.Errorf("%s:%d quotes %q, the start of the log message %q (%s): quote it whole", doc, line, q, msg, at)
				}
			}
		}
	}
}
