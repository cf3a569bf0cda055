// Command testsummary reads `go test -json` on stdin and prints what a person
// needs: each package's result line, the full output of failing tests and
// packages (build errors included), and one closing line
// "tests: N passed, N failed, N skipped". It exits 1 if anything failed, so a
// pipeline cannot hide a failure, and also when no package reported at all
// (the runner never started, e.g. the emulators were not ready): that run
// tested nothing and says so loudly instead of "0 passed, 0 failed".
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	Elapsed     float64
	ImportPath  string
	FailedBuild string
}

type summary struct {
	passed, failed, skipped int
	packages, badPackages   int
	skippedNames            []string
}

// failedOverall: something failed, or nothing ran.
func (s summary) failedOverall() bool {
	return s.failed > 0 || s.badPackages > 0 || s.packages == 0
}

func main() {
	s, err := run(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if s.failedOverall() {
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) (summary, error) {
	var s summary
	output := map[string][]string{} // "pkg" or "pkg test" → buffered lines
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || (e.Action == "" && e.ImportPath == "") {
			fmt.Fprintln(out, string(line)) // not test2json: pass through (e.g. vet output)
			continue
		}
		key := e.Package + " " + e.Test
		if e.ImportPath != "" { // build-output events
			key = e.ImportPath + " "
		}
		switch e.Action {
		case "output", "build-output":
			output[key] = append(output[key], e.Output)
		case "build-fail":
			s.badPackages++
			fmt.Fprint(out, strings.Join(output[key], ""))
		case "pass", "fail", "skip":
			if e.Test == "" {
				s.packages++
				if e.Action == "fail" {
					s.badPackages++
					fmt.Fprint(out, strings.Join(output[key], ""))
				}
				fmt.Fprintf(out, "%-4s %s\t%.3fs\n", map[string]string{"pass": "ok", "fail": "FAIL", "skip": "?"}[e.Action], e.Package, e.Elapsed)
				delete(output, key)
				continue
			}
			switch e.Action {
			case "pass":
				s.passed++
			case "fail":
				s.failed++
				fmt.Fprint(out, strings.Join(output[key], ""))
			case "skip":
				s.skipped++
				s.skippedNames = append(s.skippedNames, e.Package+"."+e.Test)
			}
			delete(output, key)
		}
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("read go test output: %w", err)
	}
	if len(s.skippedNames) > 0 {
		sort.Strings(s.skippedNames)
		fmt.Fprintln(out, "skipped:", strings.Join(s.skippedNames, ", "))
	}
	if s.badPackages > 0 {
		fmt.Fprintf(out, "%d package(s) failed\n", s.badPackages)
	}
	if s.packages == 0 {
		fmt.Fprintln(out, "tests: NO TESTS RAN: the test runner never started or reported nothing (see the lines above); this run FAILED")
		return s, nil
	}
	fmt.Fprintf(out, "tests: %d passed, %d failed, %d skipped\n", s.passed, s.failed, s.skipped)
	return s, nil
}
