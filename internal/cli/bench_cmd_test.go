package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// benchJSON runs `lrosink bench ... --json` and decodes its one line.
func benchJSON(t *testing.T, env map[string]string, args ...string) (runResult, benchReport) {
	t.Helper()
	r := run(t, env, append([]string{"bench", "--json"}, args...)...)
	var rep benchReport
	if strings.Count(r.stdout, "\n") != 1 || json.Unmarshal([]byte(r.stdout), &rep) != nil || rep.Target == nil {
		t.Fatalf("bench --json: exit %d, want one JSON line\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}
	return r, rep
}

// TestBenchAgainstServe: `lrosink bench --bare` against a real serve (SQLite
// ledger, file: results) sends exactly --requests deliveries to each of the
// bare handler and serve, a quarter of them repeats of earlier ids; every
// answer is 200, each distinct id is completed once and the rest are
// duplicates, and the results file holds exactly one line per distinct id.
func TestBenchAgainstServe(t *testing.T) {
	const n, repeats = 200, 50 // --repeat 0.25
	secret := webhooktest.NewSecret()
	env := storeEnv(t)
	resultsFile := filepath.Join(t.TempDir(), "results.jsonl")
	env["LROSINK_RESULTS"] = "file:" + resultsFile
	env["LROSINK_WEBHOOK_SECRETS"] = secret
	s := startServe(t, env)

	r, rep := benchJSON(t, map[string]string{"LROSINK_WEBHOOK_SECRETS": secret}, "--bare", "--url", s.base+"/Webhook",
		"--requests", "200", "--duration", "5m", "--concurrency", "8", "--repeat", "0.25")
	if r.code != command.ExitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if rep.Bare == nil || rep.Ratio == nil || *rep.Ratio <= 0 {
		t.Fatalf("--bare: no bare result or ratio: %s", r.stdout)
	}
	b, tg := rep.Bare, rep.Target
	if b.Deliveries != n || b.Status["200"] != n || len(b.Status) != 1 || b.Outcomes["verified"] != n || b.Failed != 0 ||
		b.DistinctIDs != n-repeats || !strings.HasPrefix(b.URL, "http://127.0.0.1:") {
		t.Errorf("bare: %+v", *b)
	}
	if tg.Deliveries != n || tg.Status["200"] != n || len(tg.Status) != 1 || tg.Failed != 0 || tg.URL != s.base+"/Webhook" {
		t.Errorf("target: %+v", *tg)
	}
	if tg.DistinctIDs != n-repeats || tg.Operations != n-repeats || tg.Repeats != repeats {
		t.Errorf("target: %d distinct ids, %d operations, %d repeats; want %d and %d", tg.DistinctIDs, tg.Operations, tg.Repeats, n-repeats, repeats)
	}
	// Each operation is one completion, every other delivery a duplicate:
	// no figure counts an operation twice (issue #50).
	if tg.Completions != n-repeats || tg.Duplicates != repeats || tg.Completions+tg.Duplicates != tg.Deliveries {
		t.Errorf("target: %d completions, %d duplicates (%d raced); want %d and %d", tg.Completions, tg.Duplicates, tg.RacedRepeats, n-repeats, repeats)
	}
	// With --url the operations stay in serve's ledger: the report names
	// their prefix and how to remove them.
	if rep.Ledger != "url" || len(rep.NamePrefixes) != 1 || !strings.HasPrefix(rep.NamePrefixes[0], "batches/bench_") ||
		!strings.Contains(rep.Cleanup, "substr(name, 1, "+strconv.Itoa(len(rep.NamePrefixes[0]))+") = '"+rep.NamePrefixes[0]+"'") ||
		rep.ResultsMessages != nil {
		t.Errorf("--url: ledger %q, prefixes %q, cleanup %q, results %v", rep.Ledger, rep.NamePrefixes, rep.Cleanup, rep.ResultsMessages)
	}
	// A repeat may race its id's first delivery: the door then runs the two
	// once and both are answered completed (one message still, below).
	c, d := tg.Outcomes["completed"], tg.Outcomes["duplicate"]
	if c < n-repeats || c+d+tg.Outcomes["in-progress-elsewhere"] != n {
		t.Errorf("target outcomes %v, want at least %d completed and the rest duplicates", tg.Outcomes, n-repeats)
	}
	if tg.P50ms <= 0 || tg.P99ms < tg.P50ms || tg.MaxMs < tg.P99ms {
		t.Errorf("latencies p50 %v p99 %v max %v", tg.P50ms, tg.P99ms, tg.MaxMs)
	}
	// The text report says it too, while serve still answers (5
	// deliveries, 4 operations under their own prefix).
	r = run(t, map[string]string{"LROSINK_WEBHOOK_SECRETS": secret}, "bench", "--url", s.base+"/Webhook", "--requests", "5", "--concurrency", "1",
		"--id-prefix", "text_")
	if r.code != command.ExitOK || !strings.Contains(r.stdout, "This run's operations went to the target's ledger: their names start with batches/text_") ||
		!strings.Contains(r.stdout, "To remove them: ") {
		t.Errorf("--url report does not name the prefix: exit %d\n%s", r.code, r.stdout)
	}
	if code := s.stop(); code != command.ExitOK {
		t.Fatalf("serve exit %d", code)
	}
	raw, err := os.ReadFile(resultsFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := resultLines(t, string(raw))
	ops := map[string]int{}
	textOps := 0
	for _, l := range lines {
		if strings.HasPrefix(l.Operation, "batches/text_") {
			textOps++
			continue
		}
		ops[l.Operation]++
	}
	if textOps != 4 {
		t.Errorf("results file: %d lines for the text run's 4 operations", textOps)
	}
	if len(lines)-textOps != n-repeats || len(ops) != n-repeats {
		t.Fatalf("results file: %d lines for %d operations, want one line for each of %d distinct ids", len(lines)-textOps, len(ops), n-repeats)
	}
	for op := range ops {
		if !strings.HasPrefix(op, rep.NamePrefixes[0]) {
			t.Fatalf("results for %q, want only names starting with the prefix the report named, %q", op, rep.NamePrefixes[0])
		}
	}
}

// TestBenchCountsEveryAnswer: statuses and outcomes are counted as the
// target answers them; a non-2xx answer is exit 1 with the first one
// shown, the human report names every figure, and a run bounded by
// --duration alone stops by itself.
func TestBenchCountsEveryAnswer(t *testing.T) {
	secret := webhooktest.NewSecret()
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts := s2t(t, r.Header.Get("webhook-timestamp"))
		if r.Header.Get("webhook-signature") != webhooktest.Signature(secret, r.Header.Get("webhook-id"), ts, body) ||
			!json.Valid(body) {
			t.Errorf("a delivery not signed over its body: %s", body)
		}
		if seen.Add(1)%4 == 0 { // every fourth: a 503 as serve's deadline answers
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"outcome":"error","reason":"deadline-exceeded"}`)
			return
		}
		_, _ = io.WriteString(w, `{"outcome":"applied","reason":"first-sighting"}`)
	}))
	t.Cleanup(srv.Close)

	r, rep := benchJSON(t, nil, "--url", srv.URL, "--secret", secret, "--requests", "40", "--concurrency", "3", "--repeat", "0")
	tg := rep.Target
	if r.code != command.ExitError || tg.Deliveries != 40 || tg.Status["200"] != 30 || tg.Status["503"] != 10 ||
		tg.Outcomes["applied"] != 30 || tg.Outcomes["error"] != 10 || tg.Failed != 10 || tg.DistinctIDs != 40 ||
		!strings.Contains(tg.FirstError, "HTTP 503") || rep.Bare != nil || rep.Ratio != nil {
		t.Fatalf("exit %d, %s", r.code, r.stdout)
	}

	seen.Store(1) // from here every answer is 200 but those at multiples of 4
	r = run(t, nil, "bench", "--url", srv.URL, "--secret", secret, "--requests", "6", "--rate", "1000", "--concurrency", "2")
	for _, want := range []string{"target " + srv.URL, "deliveries   6 sent in", "operations   5 distinct (1 deliveries repeated", "latency      p50",
		"p99.9", "achieved of 1000/s scheduled (open loop)", "service time p50", "completions  0 operations completed",
		"status       200: ", "outcomes     applied: ", "first error  HTTP 503"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout+r.stderr, strings.TrimPrefix(secret, "whsec_")) {
		t.Error("bench printed the secret")
	}

	r = run(t, nil, "bench", "--url", srv.URL, "--secret", secret, "--duration", "200ms", "--concurrency", "2", "--json")
	var rep2 benchReport
	if err := json.Unmarshal([]byte(r.stdout), &rep2); err != nil || rep2.Target == nil || rep2.Target.Deliveries == 0 {
		t.Fatalf("--duration alone: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestBenchBadFlags: a bad flag or value, or no secret, is exit 2 with one
// line naming it, and nothing is sent.
func TestBenchBadFlags(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	secret := webhooktest.NewSecret()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "0"}, "--concurrency"},
		{[]string{"--concurrency", "10001"}, "--concurrency"},
		{[]string{"--duration", "0s"}, "--duration"},
		{[]string{"--duration", "11m"}, "--duration"},
		{[]string{"--requests", "-1"}, "--requests"},
		{[]string{"--repeat", "1"}, "--repeat"},
		{[]string{"--repeat", "-0.1"}, "--repeat"},
		{[]string{"--rate", "-5"}, "--rate"},
		{[]string{"--rate", "NaN"}, "--rate"},
		{[]string{"--event", " "}, "--event"},
		{[]string{"--event", "batch.succeded"}, `--event "batch.succeded" is not an event type Gemini sends; did you mean batch.succeeded?`},
		{[]string{"--url", "ftp://127.0.0.1/x"}, "--url"},
		{[]string{"--concurrency", "many"}, "--concurrency"},
		{[]string{"--secret", "whsec_!!"}, "--secret"},
		{[]string{"--frobnicate"}, "frobnicate"},
	} {
		args := append([]string{"bench", "--url", srv.URL, "--secret", secret, "--requests", "1"}, tc.args...)
		r := run(t, nil, args...)
		if r.code != command.ExitUsage || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want 2 naming %s", tc.args, r.code, r.stderr, r.stdout, tc.want)
		}
	}
	if r := run(t, nil, "bench", "--url", srv.URL, "--requests", "1"); r.code != command.ExitUsage || !strings.Contains(r.stderr, "LROSINK_WEBHOOK_SECRETS") {
		t.Errorf("no secret: exit %d, stderr %q", r.code, r.stderr)
	}
	if hits.Load() != 0 {
		t.Errorf("%d deliveries sent by rejected command lines", hits.Load())
	}
}

// TestServePprofOptIn: LROSINK_PPROF_ADDR serves the profiles on a loopback
// listener of their own, never on serve's address; unset, nothing is
// served; a non-loopback address is exit 2 naming the variable.
func TestServePprofOptIn(t *testing.T) {
	env := storeEnv(t)
	env["LROSINK_PPROF_ADDR"] = "127.0.0.1:0"
	s := startServe(t, env)
	m := regexp.MustCompile(`(?m)^lrosink: pprof on (http://127\.0\.0\.1:\d+/debug/pprof/)$`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("no pprof line:\n%s", s.stderr.String())
	}
	get := func(u string) (int, string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(m[1] + "heap?debug=1"); code != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Errorf("pprof heap: %d %.80q", code, body)
	}
	if code, _ := get(s.base + "/debug/pprof/"); code == http.StatusOK {
		t.Error("serve's own address serves the profiles")
	}

	plain := startServe(t, storeEnv(t))
	if strings.Contains(plain.stderr.String(), "pprof") {
		t.Errorf("pprof without %s:\n%s", pprofEnv, plain.stderr.String())
	}

	bad := storeEnv(t)
	bad["LROSINK_PPROF_ADDR"] = "0.0.0.0:6060"
	r := run(t, bad, "serve", "--addr", "127.0.0.1:0")
	if r.code != command.ExitUsage || !strings.Contains(r.stderr, "LROSINK_PPROF_ADDR") || !strings.Contains(r.stderr, "loopback") {
		t.Errorf("non-loopback pprof address: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestBenchRounds: --rounds alternates the bare and the target load; the
// figures add up over the rounds, each round's ids are its own (even under
// one --id-prefix), and the ratio is the median of the rounds'.
func TestBenchRounds(t *testing.T) {
	secret := webhooktest.NewSecret()
	var mu sync.Mutex
	ids := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct{ Data struct{ ID string } }
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		mu.Lock()
		ids[ev.Data.ID]++
		mu.Unlock()
		_, _ = io.WriteString(w, `{"outcome":"completed"}`)
	}))
	t.Cleanup(srv.Close)
	r, rep := benchJSON(t, nil, "--url", srv.URL, "--secret", secret, "--bare", "--rounds", "3", "--requests", "30",
		"--repeat", "0.5", "--concurrency", "4", "--id-prefix", "batches/rounds_")
	if r.code != command.ExitOK || rep.Bare == nil || rep.Ratio == nil || len(rep.RoundRatios) != 3 {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if rep.Target.Deliveries != 90 || rep.Target.DistinctIDs != 45 || rep.Target.Status["200"] != 90 ||
		rep.Bare.Deliveries != 90 || rep.Bare.Outcomes["verified"] != 90 {
		t.Errorf("target %+v\nbare %+v", *rep.Target, *rep.Bare)
	}
	if len(ids) != 45 {
		t.Errorf("%d distinct ids reached the target, want 45 (15 per round): %v", len(ids), ids)
	}
	for id := range ids {
		if !strings.HasPrefix(id, "batches/rounds_r") {
			t.Fatalf("id %q: want the prefix and the round", id)
		}
	}
	if want := median(slices.Clone(rep.RoundRatios)); *rep.Ratio != want {
		t.Errorf("ratio %v, want the median %v of %v", *rep.Ratio, want, rep.RoundRatios)
	}
	if r := run(t, nil, "bench", "--url", srv.URL, "--secret", secret, "--rounds", "0"); r.code != command.ExitUsage || !strings.Contains(r.stderr, "--rounds") {
		t.Errorf("--rounds 0: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{0.3, 0.1, 0.2}, 0.2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

// TestBenchLeavesTheLedgerAlone: `lrosink bench --duration 1s` in a
// directory holding a serve's ledger and results file, with the variables
// pointing at them, loads a throwaway serve of its own: the ledger and the
// results file are byte for byte as before, nothing is added beside them,
// and the throwaway's temporary directory is gone. Its report counts each
// operation once: completions equal operations and its results messages,
// every other delivery is a duplicate.
func TestBenchLeavesTheLedgerAlone(t *testing.T) {
	env := storeEnv(t)
	dir := filepath.Dir(strings.TrimPrefix(env["LROSINK_STORE"], "sqlite:"))
	env["LROSINK_RESULTS"] = "file:" + filepath.Join(dir, "results.jsonl")
	env["LROSINK_WEBHOOK_SECRETS"] = webhooktest.NewSecret()
	if r := run(t, env, "register", "batches/mine"); r.code != command.ExitOK {
		t.Fatalf("register: %d %s", r.code, r.stderr)
	}
	settle(t, env["LROSINK_STORE"], "batches/mine", lifecycle.Succeeded, &recorder{})
	if err := os.WriteFile(filepath.Join(dir, "results.jsonl"), []byte(`{"operation":"batches/mine"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := testutil.DirState(t, dir)
	t.Chdir(dir) // as a user runs it, beside the serve's ledger
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the throwaway's directory goes

	r, rep := benchJSON(t, env, "--duration", "1s", "--concurrency", "4")
	if r.code != command.ExitOK {
		t.Fatalf("bench: exit %d, stderr %q", r.code, r.stderr)
	}
	if after := testutil.DirState(t, dir); !maps.Equal(before, after) {
		t.Errorf("bench changed the serve's directory:\nbefore %v\nafter  %v", before, after)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the throwaway serve left %v in TMPDIR", left)
	}
	tg := rep.Target
	if rep.Ledger != "throwaway" || rep.ResultsMessages == nil || !strings.HasPrefix(tg.URL, "http://127.0.0.1:") || tg.Deliveries == 0 {
		t.Fatalf("report %s", r.stdout)
	}
	if tg.Completions != tg.Operations || *rep.ResultsMessages != tg.Operations || tg.Duplicates != tg.Repeats ||
		tg.Operations+tg.Repeats != tg.Deliveries || tg.Status["200"] != tg.Deliveries || len(rep.NamePrefixes) != 0 {
		t.Errorf("operations %d, completions %d, results messages %d, repeats %d, duplicates %d, deliveries %d, status %v",
			tg.Operations, tg.Completions, *rep.ResultsMessages, tg.Repeats, tg.Duplicates, tg.Deliveries, tg.Status)
	}
	r = run(t, env, "bench", "--requests", "20", "--concurrency", "2")
	if r.code != command.ExitOK || !strings.Contains(r.stdout, "throwaway serve (this process; temporary ledger and results file, deleted)") ||
		strings.Contains(r.stdout, "went to the target's ledger") {
		t.Errorf("text report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after := testutil.DirState(t, dir); !maps.Equal(before, after) {
		t.Errorf("the second bench changed the serve's directory")
	}
}

// TestBenchOpenLoopShowsAStall: against a target that stalls once for
// 200 ms (a lock every request takes, held by one of them: a pause of the
// whole server), --rate's open loop counts every delivery the stall held
// back from its due time, so its p99 shows the stall. The service time of
// the same run (a closed loop's figure) sees it only in the few requests
// in flight: no bound on its p99, which a loaded machine can raise, but a
// count that holds however slow the machine is: a delivery's latency is at
// least its service time, so the deliveries at 150 ms or more by latency
// but not by service time are those the stall held back before their send,
// some 20 of them. The only property of time assumed is that 1,200 trivial
// loopback requests do not take 150 ms each a dozen times.
func TestBenchOpenLoopShowsAStall(t *testing.T) {
	const stall, over = 200 * time.Millisecond, 150 * time.Millisecond
	url := stallingServer(t, 100, stall)
	// 400/s for 3 s: the stall holds back some 80 due deliveries, 20 of
	// them by 150 ms or more (1.7 %, above the 1 % p99 looks past).
	cfg := benchConfig{event: "batch.succeeded", concurrency: 4, duration: 10 * time.Second, requests: 1200,
		rate: 400, secret: webhooktest.NewSecret()}
	tg, samples, err := benchLoad(t.Context(), cfg, url, "target", "")
	if err != nil || tg.Deliveries != 1200 || !tg.OpenLoop || tg.RateTarget != 400 || tg.Rate <= 0 || tg.Failed != 0 {
		t.Fatalf("bench: %v; %+v", err, tg)
	}
	if tg.ServiceMax < ms(stall) {
		t.Fatalf("service max %.1f ms: the stall did not happen", tg.ServiceMax)
	}
	if tg.P99ms < ms(over) || tg.P999ms < tg.P99ms {
		t.Errorf("open-loop p99 %.1f ms (p99.9 %.1f): the 200 ms stall does not show", tg.P99ms, tg.P999ms)
	}
	atLeast := func(ds []time.Duration) int {
		n := 0
		for _, d := range ds {
			if d >= over {
				n++
			}
		}
		return n
	}
	if byLat, bySvc := atLeast(samples.lat), atLeast(samples.svc); byLat-bySvc < 12 {
		t.Errorf("%d deliveries at 150 ms or more from their due time, %d from their send: want at least 12 (1 %%) held back by the stall before their send",
			byLat, bySvc)
	}
}

// stallingServer answers every delivery "completed" under one lock, held
// for stall by the at-th request: a pause of the whole server.
func stallingServer(t *testing.T, at int64, stall time.Duration) string {
	t.Helper()
	var mu sync.Mutex
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		if n.Add(1) == at {
			time.Sleep(stall) // the one stall: everyone waits on the lock
		}
		mu.Unlock()
		_, _ = io.WriteString(w, `{"outcome":"completed"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestBenchOpenLoopStallAtTheEnd: a 200 ms stall just before --duration
// ends still shows in the open loop's p99: the schedule, not the clock,
// ends the run, so the deliveries due before the deadline that the stall
// held back are sent after it and counted from their due time (before, the
// deadline dropped them and p99 stayed at a few ms).
func TestBenchOpenLoopStallAtTheEnd(t *testing.T) {
	const stall = 200 * time.Millisecond
	secret := webhooktest.NewSecret()
	// 400/s for 3 s is 1,200 slots; request 1,150 is due at 2.875 s, so the
	// stall holds back the ~50 due after it, 20 of them by 150 ms or more
	// (1.7 %, above the 1 % p99 looks past). A loaded machine that falls
	// behind the schedule only holds back more.
	url := stallingServer(t, 1150, stall)
	r, rep := benchJSON(t, nil, "--url", url, "--secret", secret, "--rate", "400", "--duration", "3s",
		"--concurrency", "4", "--repeat", "0")
	tg := rep.Target
	if r.code != command.ExitOK || !tg.OpenLoop || tg.Unsent != 0 {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if tg.Deliveries != 1200 {
		t.Errorf("%d deliveries, want every one of the 1,200 slots due before the deadline", tg.Deliveries)
	}
	if tg.ServiceMax < ms(stall) {
		t.Fatalf("service max %.1f ms: the stall did not happen", tg.ServiceMax)
	}
	if tg.P99ms < 150 {
		t.Errorf("open-loop p99 %.1f ms: the 200 ms stall at the end does not show", tg.P99ms)
	}
}

// TestBenchURLReportSaysWhatReachedTheLedger: the --url report claims the
// target's ledger holds only what it answered 2xx: nothing when every
// delivery failed, the answered ones when some did; and its cleanup hint
// does not promise a retention that is unset by default.
func TestBenchURLReportSaysWhatReachedTheLedger(t *testing.T) {
	secret := webhooktest.NewSecret()
	var refuse atomic.Int64 // every refuse-th answer is a 503 (1: all)
	refuse.Store(1)
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if seen.Add(1)%refuse.Load() == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"outcome":"error","reason":"deadline-exceeded"}`)
			return
		}
		_, _ = io.WriteString(w, `{"outcome":"completed"}`)
	}))
	t.Cleanup(srv.Close)
	bench := func() string {
		t.Helper()
		seen.Store(0)
		r := run(t, nil, "bench", "--url", srv.URL, "--secret", secret, "--requests", "8", "--concurrency", "1", "--repeat", "0")
		if r.code != command.ExitError {
			t.Fatalf("exit %d, want %d (failed deliveries)\n%s%s", r.code, command.ExitError, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "if LROSINK_RETENTION is set, it deletes them in time (unset, the ledger keeps them for ever)") ||
			strings.Contains(r.stdout, "(at least 7d) deletes") {
			t.Errorf("cleanup hint promises a retention:\n%s", r.stdout)
		}
		return r.stdout
	}

	out := bench()
	if strings.Contains(out, "went to the target's ledger") ||
		!strings.Contains(out, "No delivery was answered 2xx: none of this run's operations is known to have reached the target's ledger (their names would start with batches/bench_") {
		t.Errorf("every delivery failed, the report says otherwise:\n%s", out)
	}
	refuse.Store(4)
	out = bench()
	if !strings.Contains(out, "The operations of this run's 6 deliveries answered 2xx went to the target's ledger (not those of the 2 that failed): their names start with batches/bench_") ||
		strings.Contains(out, "This run's operations went") {
		t.Errorf("2 of 8 deliveries failed, the report does not say which reached the ledger:\n%s", out)
	}
}

// TestBenchOpenLoopCountsUnsentSlots: slots due before --duration that
// the drain bound (the request timeout past the deadline; here 100 ms)
// leaves unsent are not dropped: they count as unsent, and in the latency
// figures up to the end. One sender, 400/s for 1 s, and a 1 s stall at
// request 350: slots 350 to 399 cannot be sent before it ends, after the
// bound, however slow the machine.
func TestBenchOpenLoopCountsUnsentSlots(t *testing.T) {
	url := stallingServer(t, 350, time.Second)
	cfg := benchConfig{event: "batch.succeeded", concurrency: 1, duration: time.Second, rate: 400,
		secret: webhooktest.NewSecret(), drain: 100 * time.Millisecond}
	tg, samples, err := benchLoad(t.Context(), cfg, url, "target", "")
	if err != nil || !tg.OpenLoop || tg.Failed != 0 {
		t.Fatalf("bench: %v; %+v", err, tg)
	}
	if tg.Unsent < 50 || tg.Deliveries+tg.Unsent != 400 || len(samples.lat) != 400 || len(samples.svc) != tg.Deliveries {
		t.Errorf("%d delivered, %d unsent, %d latencies, %d service times: want all 400 due slots counted, at least the 50 after the stall unsent",
			tg.Deliveries, tg.Unsent, len(samples.lat), len(samples.svc))
	}
	// The last slot, due at 0.9975 s, waited until the end, after the stall.
	if tg.MaxMs < 800 || tg.MaxMs < tg.ServiceMax {
		t.Errorf("latency max %.1f ms, service max %.1f ms: the unsent slots' wait does not show", tg.MaxMs, tg.ServiceMax)
	}
	var b strings.Builder
	benchReport{Ledger: "url", Target: &tg}.write(&b)
	if want := fmt.Sprintf("  unsent       %d were due before the deadline but not sent", tg.Unsent); !strings.Contains(b.String(), want) {
		t.Errorf("text report lacks %q:\n%s", want, b.String())
	}
}
