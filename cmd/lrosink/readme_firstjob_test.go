package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
)

// firstJobHeading is the README section TestReadmeFirstRealJob runs.
const firstJobHeading = "## Your first real Gemini job"

// readmeSection returns the first ```sh block of the README section under
// heading, one command a line (blank and comment lines left out).
func readmeSection(t *testing.T, heading string) []string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no %q section", heading)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	_, block, ok := strings.Cut(sec, "```sh\n")
	if !ok {
		t.Fatalf("README section %q has no ```sh block", heading)
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatalf("README section %q: its ```sh block is not closed", heading)
	}
	var cmds []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			cmds = append(cmds, l)
		}
	}
	return cmds
}

// TestReadmeFirstRealJob (issue #48): the README's first-real-job block,
// run verbatim as one sh script in a directory holding examples/ (only
// `lrosink` at a line's start becomes the binary built here), against the
// fake Gemini through the real genai SDK. The environment gives what the
// README assumes (GEMINI_API_KEY) plus the fake's URL, a free PORT, and
// short LROSINK_RECONCILE_EVERY and LROSINK_GRACE so the test need not wait
// minutes. serve starts in the background, the script waits for it, submit
// creates the batch and says completion comes by polling (the fake has no
// webhook), the fake finishes the job, and serve's polling settles it:
// tail -f shows exactly one results line, with the operation and the
// metadata given, and it stays one line over the passes that follow.
func TestReadmeFirstRealJob(t *testing.T) {
	cmds := readmeSection(t, firstJobHeading)
	if len(cmds) != 4 || !strings.HasSuffix(cmds[0], "&") || !strings.HasPrefix(cmds[1], "until curl ") ||
		!strings.HasPrefix(cmds[2], "lrosink submit batch ") || !strings.HasPrefix(cmds[3], "tail -f ") {
		t.Fatalf("the README's block changed shape (a background serve, a wait, a submit batch, a tail -f); adapt this test: %q", cmds)
	}
	bin := build(t, "")
	dir := t.TempDir()
	example, err := os.ReadFile("../../examples/first-batch.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "examples"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "examples", "first-batch.jsonl"), example, 0o644); err != nil {
		t.Fatal(err)
	}
	fake := fakegemini.New()
	gemURL := fake.Start(t).URL
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	binWord := regexp.MustCompile(`(?m)^lrosink\b`)
	script := binWord.ReplaceAllLiteralString(strings.Join(cmds, "\n")+"\n", bin)
	sh := exec.Command("sh", "-c", script)
	sh.Dir = dir
	sh.Env = childEnv("GEMINI_API_KEY="+fakegemini.DefaultAPIKey, "GOOGLE_GEMINI_BASE_URL="+gemURL, "PORT="+port,
		"LROSINK_RECONCILE_EVERY=1s", "LROSINK_GRACE=1s")
	// Its own process group: the test's end stops serve and tail -f too.
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	lines := make(chan string, 64)
	var stderr syncBuffer
	sh.Stdout, sh.Stderr = &lineWriter{lines: lines}, &stderr
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = sh.Wait(); close(exited) }()
	t.Cleanup(func() { _ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL); <-exited })
	logText := func() string { b, _ := os.ReadFile(filepath.Join(dir, "lrosink.log")); return string(b) }
	defer func() {
		if t.Failed() {
			t.Logf("script stderr:\n%s\nlrosink.log:\n%s", stderr.String(), logText())
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-exited:
			t.Fatalf("the script ended before %s", what)
		case <-time.After(2 * time.Minute):
			t.Fatalf("no %s within 2 minutes", what)
		}
		return ""
	}

	// submit's output, then the results line tail -f shows.
	opLine, pollLine := regexp.MustCompile(`^operation\s+(batches/\S+)$`), regexp.MustCompile(`^completion\s+polling: `)
	var op string
	for polling := false; op == "" || !polling; {
		l := next("submit's output")
		if m := opLine.FindStringSubmatch(l); m != nil {
			op = m[1]
		}
		polling = polling || pollLine.MatchString(l)
		if strings.HasPrefix(l, "{") {
			t.Fatalf("a results line %s before submit said its operation and that completion comes by polling", l)
		}
	}
	if n := fake.Creates(fakegemini.KindBatch); n != 1 {
		t.Fatalf("%d batch creates, want 1", n)
	}
	id := strings.TrimPrefix(op, "batches/")
	st, ok := fake.Batch(id)
	if !ok || st.InputRequests != 2 {
		t.Fatalf("the fake holds %+v for %s: want the example's two requests, inline", st, id)
	}
	now := time.Now().UTC()
	st.State, st.UpdateTime, st.EndTime, st.ResponsesFile = "BATCH_STATE_SUCCEEDED", now, now, fakegemini.ResponsesFile(id)
	st.Stats = &fakegemini.BatchStats{RequestCount: "2", SuccessfulRequestCount: "2"}
	fake.SetBatch(id, st)

	line := next("results line")
	for !strings.HasPrefix(line, "{") { // the rest of submit's output
		line = next("results line")
	}
	var m struct {
		Operation    string          `json:"operation"`
		State        string          `json:"state"`
		SettledBy    string          `json:"settled_by"`
		UserMetadata json.RawMessage `json:"user_metadata"`
		Output       map[string]any  `json:"output"`
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("tail -f showed %q: %v", line, err)
	}
	if m.Operation != op || m.State != "SUCCEEDED" || m.SettledBy != "reconcile" || string(m.UserMetadata) != `{"job":"first"}` ||
		m.Output["batch_stats"] == nil || m.Output["responses_file"] == nil {
		t.Fatalf("results line %s: want %s SUCCEEDED, settled by reconcile, with responses_file, batch_stats and user_metadata {\"job\":\"first\"}", line, op)
	}
	// Exactly one line: two more passes go by, and the file still holds one.
	passes := strings.Count(logText(), `"message":"reconcile pass"`)
	waitFor(t, "two more reconcile passes", func() bool { return strings.Count(logText(), `"message":"reconcile pass"`) >= passes+2 })
	f, err := os.Open(filepath.Join(dir, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
	}
	if n != 1 {
		t.Fatalf("results.jsonl holds %d lines, want 1", n)
	}
	select {
	case extra := <-lines:
		t.Fatalf("the script printed more after the results line: %s", extra)
	default:
	}
}

// waitFor polls cond until it holds, with a deadline generous for a
// loaded machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 2 minutes", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
