package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/results/resultstest"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestFileResultsExactlyOnceAcrossSIGKILLs (issue #47, item 1): `serve`
// with `file:` results, under a steady stream of completions, is killed
// with SIGKILL until three kills came while claims were in flight, most of
// them with their line written and their DONE commit not yet made (the
// crash window every other sink keeps). Each restarted serve recovers the dead holders'
// claims after their lease, through the redeliveries and its reconcile
// passes. In the end every operation was answered 2xx, every claim is
// DONE, and the file holds exactly one whole line per operation: 0 extra
// lines.
func TestFileResultsExactlyOnceAcrossSIGKILLs(t *testing.T) {
	bin := build(t, "")
	dir, secret := t.TempDir(), webhooktest.NewSecret()
	resultsPath := filepath.Join(dir, "results.jsonl")
	env := []string{"LROSINK_WEBHOOK_SECRETS=" + secret, "LROSINK_RESULTS=file:" + resultsPath}
	// A dead holder's claim is seized 5 s after it took it (the lease floor
	// is twice the webhook deadline).
	args := []string{"--claim-lease", "5s", "--webhook-deadline", "2s", "--reconcile-every", "1s"}

	// A kill lands wherever it lands: now and then between two groups of
	// commits, with no claim in flight. So serve is killed until three
	// kills came with claims in flight (at most maxKills times).
	const ops, perRound, wantKills, maxKills = 400, 40, 3, 8
	w := &webhookSender{secret: secret, pending: map[string]bool{}}
	for i := range ops {
		w.pending[fmt.Sprintf("kill_%03d", i)] = true
	}

	var kills, withClaims, inFlight, windowHits int
	seen := map[string]bool{} // claim holders found in flight at an earlier kill
	for ; withClaims < wantKills; kills++ {
		if kills == maxKills {
			t.Fatalf("%d kills, %d of them with claims in flight: want %d", kills, withClaims, wantKills)
		}
		round := kills
		p := serve(t, bin, dir, env, args...)
		before := len(wholeLines(t, resultsPath))
		stop, _ := w.start(p.base, 16)
		// Killed once perRound more lines are in the file: the process is
		// busy, publishing and committing.
		testutil.WaitFor(t, fmt.Sprintf("round %d: %d more results lines", round, perRound), 2*time.Minute, func() bool {
			return len(wholeLines(t, resultsPath)) >= before+perRound
		})
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.exited
		stop()
		if strings.Contains(p.stderr.String(), "results file ended in an incomplete line") {
			t.Logf("round %d started on a results file its predecessor's kill had torn: repaired", round)
		}
		held, published := claimsInFlight(t, filepath.Join(dir, "lrosink.db"), resultsPath, seen)
		t.Logf("kill %d: %d claims in flight in the killed process, %d of them with their line written and no DONE", round+1, held, published)
		if held > 0 {
			withClaims++
		}
		inFlight, windowHits = inFlight+held, windowHits+published
	}
	if windowHits == 0 {
		t.Fatalf("no kill of %d landed between a line's write and its DONE commit (%d claims in flight in all): the run proves nothing", kills, inFlight)
	}

	// The last serve settles everything: what was never answered 2xx is
	// redelivered, and the dead holders' claims are recovered.
	p := serve(t, bin, dir, env, args...)
	stop, delivered := w.start(p.base, 16)
	select {
	case <-delivered:
	case <-time.After(2 * time.Minute): // a bound on a hang
	}
	stop()
	if left := w.left(); left != 0 {
		t.Fatalf("%d operations never answered 2xx", left)
	}
	l, err := sqliteledger.Open(t.Context(), filepath.Join(dir, "lrosink.db"))
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "every claim DONE", 2*time.Minute, func() bool {
		due, err := l.DueClaims(t.Context(), time.Now().Add(24*time.Hour), ledger.ClaimCursor{}, 1000)
		return err == nil && len(due) == 0
	})
	_ = l.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("the last serve exited %d", code)
	}

	raw, err := os.ReadFile(resultsPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) == 0 || raw[len(raw)-1] != '\n' {
		t.Fatal("the results file does not end on a whole line")
	}
	lines := wholeLines(t, resultsPath)
	perKey := map[string]int{}
	for i, line := range lines {
		var m struct {
			Key   string            `json:"idempotency_key"`
			Attrs map[string]string `json:"attributes"`
		}
		if err := json.Unmarshal(line, &m); err != nil || m.Key == "" || m.Attrs["idempotency_key"] != m.Key {
			t.Fatalf("line %d is not a results line (%v): %.100q", i+1, err, line)
		}
		resultstest.Check(t, line)
		perKey[m.Key]++
	}
	for k, n := range perKey {
		if n != 1 {
			t.Errorf("%s: %d lines", k, n)
		}
	}
	t.Logf("%d kills, %d claims in flight at them (%d with their line written and no DONE); %d lines for %d operations",
		kills, inFlight, windowHits, len(lines), len(perKey))
	if len(perKey) != ops || len(lines) != ops {
		t.Fatalf("%d lines for %d keys, want %d lines, one per operation: %d extra", len(lines), len(perKey), ops, len(lines)-len(perKey))
	}
}

// webhookSender plays Gemini: it delivers each pending operation's
// completion until it is answered 2xx, with one webhook-id per operation.
type webhookSender struct {
	secret  string
	mu      sync.Mutex
	pending map[string]bool // id → not yet answered 2xx
}

// start delivers with n senders to base until every operation was answered
// 2xx (delivered closes) or stop is called (the process is gone); stop
// waits for the senders.
func (w *webhookSender) start(base string, n int) (stop func(), delivered <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	ids := make(chan string)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(ids)
		for ctx.Err() == nil {
			todo := w.todo()
			if len(todo) == 0 {
				return
			}
			for _, id := range todo {
				select {
				case ids <- id:
				case <-ctx.Done():
					return
				}
			}
		}
	})
	client := &http.Client{Timeout: 30 * time.Second}
	for range n {
		wg.Go(func() {
			for id := range ids {
				b := body(id)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/Webhook", bytes.NewReader(b))
				if err != nil {
					continue
				}
				req.Header = webhooktest.Headers("msg_"+id, time.Now(), b, w.secret)
				resp, err := client.Do(req)
				if err != nil {
					continue // the process is gone, or going: redelivered later
				}
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					w.mu.Lock()
					delete(w.pending, id)
					w.mu.Unlock()
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return func() { cancel(); <-done }, done
}

func (w *webhookSender) todo() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.pending))
	for id := range w.pending {
		out = append(out, id)
	}
	return out
}

func (w *webhookSender) left() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// wholeLines returns the lines of path a newline ends (a kill may have
// left part of one after them).
func wholeLines(t *testing.T, path string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.LastIndexByte(raw, '\n'); i >= 0 {
		return bytes.Split(raw[:i], []byte("\n"))
	}
	return nil
}

// claimsInFlight reads the ledger of a dead serve: how many claims it held
// (CLAIMED by a holder not in seen, which it then holds) when it died, and
// how many of those already had their line in the results file (written,
// DONE not yet committed).
func claimsInFlight(t *testing.T, dbPath, resultsPath string, seen map[string]bool) (held, published int) {
	t.Helper()
	l, err := sqliteledger.Open(t.Context(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	due, err := l.DueClaims(t.Context(), time.Now().Add(24*time.Hour), ledger.ClaimCursor{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	for _, line := range wholeLines(t, resultsPath) {
		var m struct {
			Key string `json:"idempotency_key"`
		}
		if json.Unmarshal(line, &m) == nil {
			written[m.Key] = true
		}
	}
	for _, c := range due {
		if c.Status != ledger.ClaimHeld || seen[c.Holder] {
			continue
		}
		seen[c.Holder] = true
		held++
		if written[c.Key] {
			published++
		}
	}
	return held, published
}
