package main

import (
	"strings"
	"testing"
)

func TestNoTestsRanIsLoudAndFails(t *testing.T) {
	// What `make test` piped in when the emulators never became ready: the
	// runner's complaint and no test2json event at all.
	in := "with-emulators: the Firestore emulator did not answer on 127.0.0.1:1 within 180s\n"
	var out strings.Builder
	s, err := run(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if !s.failedOverall() {
		t.Fatalf("a run in which no package reported counts as success:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "NO TESTS RAN") {
		t.Fatalf("output does not say that no tests ran:\n%s", out.String())
	}
	if strings.Contains(out.String(), "tests: 0 passed, 0 failed") {
		t.Fatalf("output still reads like a clean run:\n%s", out.String())
	}
}

func TestPassingRun(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.1}`,
		`{"Action":"skip","Package":"p","Test":"TestB","Elapsed":0}`,
		`{"Action":"pass","Package":"p","Elapsed":0.2}`,
	}, "\n")
	var out strings.Builder
	s, err := run(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if s.failedOverall() || s.passed != 1 || s.skipped != 1 {
		t.Fatalf("summary %+v, want 1 passed, 1 skipped, success:\n%s", s, out.String())
	}
	if !strings.Contains(out.String(), "tests: 1 passed, 0 failed, 1 skipped") {
		t.Fatalf("closing line missing:\n%s", out.String())
	}
}

func TestFailingTestFails(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"output","Package":"p","Test":"TestA","Output":"boom\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestA","Elapsed":0.1}`,
		`{"Action":"fail","Package":"p","Elapsed":0.2}`,
	}, "\n")
	var out strings.Builder
	s, err := run(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if !s.failedOverall() || !strings.Contains(out.String(), "boom") {
		t.Fatalf("summary %+v; output:\n%s", s, out.String())
	}
}
