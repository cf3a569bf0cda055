package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxBenchmarkLines bounds docs/BENCHMARKS.md: one current table per goal,
// read in minutes; the dated rounds behind them stay in git.
const maxBenchmarkLines = 300

// benchGoal is one "## Pn. …" section of docs/BENCHMARKS.md.
type benchGoal struct {
	n        int
	body     string
	commands []string // the lines of its fenced blocks
}

// benchGoals reads BENCHMARKS.md's goal sections and its line count.
func benchGoals(t *testing.T) ([]benchGoal, int) {
	t.Helper()
	b, err := os.ReadFile("BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	heads := regexp.MustCompile(`(?m)^## P([0-9]+)\. `).FindAllStringSubmatchIndex(text, -1)
	var goals []benchGoal
	for i, h := range heads {
		end := len(text)
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		var g benchGoal
		fmt.Sscan(text[h[2]:h[3]], &g.n)
		g.body = text[h[0]:end]
		inBlock, cont := false, ""
		for _, l := range strings.Split(g.body, "\n") {
			switch {
			case strings.HasPrefix(l, "```"):
				inBlock = !inBlock
			case inBlock && strings.HasSuffix(strings.TrimSpace(l), `\`):
				// A command continued on the next line is one command.
				cont += strings.TrimSuffix(strings.TrimSpace(l), `\`) + " "
			case inBlock && strings.TrimSpace(l) != "":
				g.commands = append(g.commands, cont+l)
				cont = ""
			}
		}
		goals = append(goals, g)
	}
	return goals, strings.Count(text, "\n")
}

// TestBenchmarksAreOneTablePerGoal: docs/BENCHMARKS.md is at most 300
// lines, holds the goals P1–P10 in order, each with a command, a date, the
// machine, a table and a row in the summary table.
func TestBenchmarksAreOneTablePerGoal(t *testing.T) {
	goals, lines := benchGoals(t)
	if lines > maxBenchmarkLines {
		t.Errorf("docs/BENCHMARKS.md has %d lines, over %d: keep the current figures, the history is in git", lines, maxBenchmarkLines)
	}
	if len(goals) != 10 {
		t.Fatalf("found %d goal sections (## Pn.), want P1–P10", len(goals))
	}
	b, _ := os.ReadFile("BENCHMARKS.md")
	date := regexp.MustCompile(`\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b`)
	for i, g := range goals {
		if g.n != i+1 {
			t.Errorf("goal section %d is P%d, want P%d", i+1, g.n, i+1)
		}
		if len(g.commands) == 0 {
			t.Errorf("P%d has no command that reproduces it", g.n)
		}
		if !date.MatchString(g.body) {
			t.Errorf("P%d gives no date", g.n)
		}
		if !strings.Contains(g.body, " VM") {
			t.Errorf("P%d says nothing of the machine (the VM it ran on)", g.n)
		}
		if !strings.Contains(g.body, "\n|") && !strings.Contains(g.body, "**") {
			t.Errorf("P%d has no table or figure", g.n)
		}
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^\| P%d `, g.n)).Match(b) {
			t.Errorf("P%d has no row in the summary table", g.n)
		}
	}
}

// TestBenchmarkCommandsExist: every command docs/BENCHMARKS.md names can
// be run: a make target the Makefile has, a go test whose -bench and -run
// names are functions of the package it names, an lrosink subcommand the
// CLI has, a script that is there.
func TestBenchmarkCommandsExist(t *testing.T) {
	goals, _ := benchGoals(t)
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	cliSrc, err := os.ReadFile("../internal/cli/cli.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, g := range goals {
		for _, line := range g.commands {
			cmd, _, _ := strings.Cut(line, "#") // a comment after the command
			fields := strings.Fields(cmd)
			for i, f := range fields {
				switch {
				case f == "make" && i+1 < len(fields):
					target := fields[i+1]
					checked++
					if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(makefile) {
						t.Errorf("P%d: `make %s`: the Makefile has no such target", g.n, target)
					}
				case f == "lrosink" && i+1 < len(fields):
					sub := fields[i+1]
					checked++
					if !strings.Contains(string(cliSrc), `"`+sub+`":`) {
						t.Errorf("P%d: `lrosink %s`: no such command in internal/cli", g.n, sub)
					}
				case strings.HasPrefix(f, "scripts/"):
					checked++
					if _, err := os.Stat("../" + f); err != nil {
						t.Errorf("P%d: %s: %v", g.n, f, err)
					}
				}
			}
			checked += checkGoTest(t, g.n, fields)
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d commands: the parser no longer reads the document", checked)
	}
}

// checkGoTest checks a go test (or a compiled test binary's -test.*)
// command: the functions its -bench and -run patterns name exist in the
// package directory it names. It returns how many names it checked.
func checkGoTest(t *testing.T, goal int, fields []string) int {
	t.Helper()
	var pkg string
	var patterns []string
	for i, f := range fields {
		f = strings.TrimPrefix(f, "-test.")
		f = strings.TrimPrefix(f, "-")
		if strings.HasPrefix(fields[i], "./internal/") || strings.HasPrefix(fields[i], "./cmd/") {
			pkg = fields[i]
		}
		for _, flag := range []string{"bench", "run"} {
			switch {
			case strings.HasPrefix(f, flag+"="):
				patterns = append(patterns, strings.TrimPrefix(f, flag+"="))
			case f == flag && i+1 < len(fields) && strings.HasPrefix(fields[i], "-"):
				patterns = append(patterns, fields[i+1])
			}
		}
	}
	if len(patterns) == 0 {
		return 0
	}
	if pkg == "" {
		// A compiled binary run in the package's directory: the
		// command's cd names it.
		for i, f := range fields {
			if f == "cd" && i+1 < len(fields) {
				pkg = "./" + fields[i+1]
			}
		}
	}
	if pkg == "" {
		t.Errorf("P%d: %q names tests but no package", goal, strings.Join(fields, " "))
		return 0
	}
	src := packageTests(t, filepath.Join("..", pkg))
	n := 0
	for _, p := range patterns {
		for _, name := range regexp.MustCompile(`(Benchmark|Test)[A-Za-z0-9_]+`).FindAllString(p, -1) {
			n++
			if !regexp.MustCompile(`(?m)^func ` + name + `\(`).MatchString(src) {
				t.Errorf("P%d: %s names %s, which %s does not define", goal, p, name, pkg)
			}
		}
	}
	return n
}

// packageTests is the text of every _test.go file of dir.
func packageTests(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no test files (%v)", dir, err)
	}
	var b strings.Builder
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(src)
	}
	return b.String()
}
