package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
)

// server is `lrosink serve` running in-process.
type server struct {
	base           string
	stdout, stderr *syncBuffer
	cancel         context.CancelFunc
	done           chan int
	once           sync.Once
	code           int
}

// stop cancels serve's context, as SIGTERM does, and returns its exit code.
func (s *server) stop() int {
	s.once.Do(func() {
		s.cancel()
		s.code = <-s.done
	})
	return s.code
}

func startServe(t *testing.T, env map[string]string, args ...string) *server {
	t.Helper()
	return startServeWith(t, env, nil, args...)
}

// startServeWith is startServe with Run options.
func startServeWith(t *testing.T, env map[string]string, opts []Option, args ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := &server{stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	go func() {
		s.done <- Run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), strings.NewReader(""), s.stdout, s.stderr, mapEnv(env), opts...)
	}()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("serve stderr:\n%s", s.stderr.String())
		}
	})
	re := regexp.MustCompile(`(?m)^lrosink: listening on (http://\S+)$`)
	waitFor(t, "serve to listen", func() bool {
		if len(s.done) > 0 {
			t.Fatalf("serve exited early:\n%s", s.stderr.String())
		}
		m := re.FindStringSubmatch(s.stderr.String())
		if m != nil {
			s.base = m[1]
		}
		return m != nil
	})
	return s
}

// TestServeDevSecret: without a configured secret, serve prints a generated
// one once, outside the JSON logs, and accepts deliveries signed with it;
// stdout carries the results line and nothing else; a cancelled context
// (SIGTERM in the binary) stops it with exit 0.
func TestServeDevSecret(t *testing.T) {
	env := storeEnv(t)
	s := startServe(t, env)
	m := regexp.MustCompile(`(?m)^lrosink: DEV webhook signing secret.*: (whsec_\S+)$`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("no dev secret line:\n%s", s.stderr.String())
	}
	secret := m[1]
	resp, err := http.DefaultClient.Do(delivery(t, s.base, secret, "dev1", "msg_dev1"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delivery signed with the dev secret: %d", resp.StatusCode)
	}
	waitFor(t, "the results line", func() bool { return strings.Count(s.stdout.String(), "\n") >= 1 })
	if code := s.stop(); code != command.ExitOK {
		t.Fatalf("serve exit %d after cancel", code)
	}
	lines := resultLines(t, s.stdout.String())
	if len(lines) != 1 || lines[0].Operation != "batches/dev1" || lines[0].SettledBy != "webhook" {
		t.Fatalf("results %+v", lines)
	}
	// The secret appears exactly once, and every other stderr line is JSON.
	if n := strings.Count(s.stderr.String(), secret); n != 1 {
		t.Fatalf("secret printed %d times", n)
	}
	sc := bufio.NewScanner(strings.NewReader(s.stderr.String()))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "lrosink: ") {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec["severity"] == nil {
			t.Fatalf("stderr line is neither plain lrosink: nor a JSON log: %q", sc.Text())
		}
	}
	if !strings.Contains(s.stderr.String(), `"message":"stopped"`) {
		t.Fatalf("no clean stop logged:\n%s", s.stderr.String())
	}
}

// TestServeFlagsOverrideEnvironment: --store, --results and --webhook-secret
// win over their variables.
func TestServeFlagsOverrideEnvironment(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{
		"LROSINK_STORE":           "sqlite:" + filepath.Join(dir, "env.db"),
		"LROSINK_RESULTS":         "file:" + filepath.Join(dir, "env.jsonl"),
		"LROSINK_WEBHOOK_SECRETS": "whsec_ZW52aXJvbm1lbnQ=",
	}
	secret := "whsec_ZmxhZ3NlY3JldGZsYWdzZWNyZXQ="
	results := filepath.Join(dir, "flag.jsonl")
	s := startServe(t, env, "--store", "sqlite:"+filepath.Join(dir, "flag.db"), "--results", "file:"+results, "--webhook-secret", secret)
	if strings.Contains(s.stderr.String(), "DEV webhook") {
		t.Fatal("dev secret generated although one is configured")
	}
	resp, err := http.DefaultClient.Do(delivery(t, s.base, secret, "flags1", "msg_flags1"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delivery signed with the --webhook-secret: %d", resp.StatusCode)
	}
	b, err := os.ReadFile(results)
	if err != nil || len(resultLines(t, string(b))) != 1 {
		t.Fatalf("results file %q: %v", b, err)
	}
	for _, f := range []string{"env.db", "env.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s was created although a flag overrides it", f)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "flag.db")); err != nil {
		t.Errorf("--store file: %v", err)
	}
	if s.stdout.String() != "" {
		t.Errorf("stdout carries %q with file: results", s.stdout.String())
	}
}

// fakePasser counts passes; block, if set, holds each pass until closed.
type fakePasser struct {
	passes    atomic.Int32
	cancelled atomic.Bool
	block     chan struct{}
}

func (f *fakePasser) Pass(ctx context.Context) (reconcile.Summary, error) {
	f.passes.Add(1)
	if f.block != nil {
		<-f.block
	}
	f.cancelled.Store(ctx.Err() != nil)
	return reconcile.Summary{}, nil
}

// TestReconcileLoop: a pass runs at start-up, before any tick; stopping the
// loop lets a pass in progress finish uncancelled.
func TestReconcileLoop(t *testing.T) {
	f := &fakePasser{block: make(chan struct{})}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		reconcileLoop(t.Context(), stop, f, 1<<40, logging.Discard()) // the ticker never fires
	}()
	waitFor(t, "the start-up pass", func() bool { return f.passes.Load() == 1 })
	close(stop)
	close(f.block)
	<-done
	if f.passes.Load() != 1 || f.cancelled.Load() {
		t.Fatalf("passes %d, cancelled %v", f.passes.Load(), f.cancelled.Load())
	}
}

// TestServeGivesTheSQLiteWriterAP: on the SQLite ledger serve asks for one
// P more than the scheduler has and reports it on its start line; with
// GOMAXPROCS set, or another ledger, it leaves the scheduler alone.
func TestServeGivesTheSQLiteWriterAP(t *testing.T) {
	// procs records the calls serve makes instead of changing this
	// process's scheduler.
	type procs struct {
		mu  sync.Mutex
		set []int
	}
	fake := func(p *procs) func(int) int {
		return func(n int) int {
			p.mu.Lock()
			defer p.mu.Unlock()
			if n > 0 {
				p.set = append(p.set, n)
			}
			return 5
		}
	}
	startedWith := func(s *server) (any, bool) {
		for _, line := range strings.Split(s.stderr.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["message"] == "lrosink serve started" {
				v, ok := rec["gomaxprocs"]
				return v, ok
			}
		}
		t.Fatalf("no start line:\n%s", s.stderr.String())
		return nil, false
	}

	var sqlite procs
	s := startServeWith(t, storeEnv(t), []Option{WithProcs(fake(&sqlite))})
	if v, _ := startedWith(s); v != float64(6) {
		t.Errorf("start line gomaxprocs = %v, want 6", v)
	}
	s.stop()
	if !slices.Equal(sqlite.set, []int{6}) {
		t.Errorf("SQLite ledger: GOMAXPROCS set to %v, want [6] (5 + 1)", sqlite.set)
	}

	pinnedEnv := storeEnv(t)
	pinnedEnv["GOMAXPROCS"] = "3"
	var pinned procs
	s = startServeWith(t, pinnedEnv, []Option{WithProcs(fake(&pinned))})
	if v, _ := startedWith(s); v != float64(5) {
		t.Errorf("with GOMAXPROCS set, start line gomaxprocs = %v, want 5 (as the runtime has it)", v)
	}
	s.stop()
	if len(pinned.set) != 0 {
		t.Errorf("with GOMAXPROCS set, serve changed it: %v", pinned.set)
	}

	if _, ok := startedWith(startServe(t, storeEnv(t))); ok {
		t.Errorf("without WithProcs the start line reports gomaxprocs")
	}
	if got := writerHeadroom(&env{getenv: mapEnv(nil), procs: fake(&procs{})}, "firestore"); got != 5 {
		t.Errorf("firestore: writerHeadroom = %d, want 5 (unchanged)", got)
	}
}
