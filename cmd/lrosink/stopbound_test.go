package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// holdWriteLock takes the SQLite database's write lock from this process
// (BEGIN IMMEDIATE on a connection of its own), as another writer on the
// same file would, until release is called or the test ends: serve's
// writer then waits in its own BEGIN IMMEDIATE for up to busy_timeout
// (10 s), past any stop's bound.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("take the write lock: %v", err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
			_ = conn.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// timedStop sends serve SIGTERM and returns how long it took to exit and
// its exit status. The figure is logged: the tests' output is where the
// measured worst case in docs/OPERATIONS.md comes from.
func timedStop(t *testing.T, p *proc) (time.Duration, int) {
	t.Helper()
	took := testutil.SIGTERMToExit(t, p.cmd.Process, p.exited)
	t.Logf("SIGTERM to exit: %v (bound %v + %v slack)", took.Round(time.Millisecond), app.StopTimeout, testutil.ExitSlack)
	return took, p.exitCode(t)
}

// testStopBoundWriteLockedLedger: another process holds the SQLite
// ledger's write lock while deliveries wait on the door, their writes
// queued behind serve's writer, which waits for the lock. SIGTERM: the
// deliveries are answered 503 stopping (Gemini redelivers), the drain and
// the ledger's close are cut off, and serve exits 1 naming both, within
// the documented bound (app.StopTimeout, the close included). The lock
// released, the same ledger serves the redelivery.
func testStopBoundWriteLockedLedger(t *testing.T, bin string) {
	dir, secret := t.TempDir(), webhooktest.NewSecret()
	db := filepath.Join(dir, "ledger.db")
	args := []string{"--store", "sqlite:" + db, "--results", "file:" + filepath.Join(dir, "results.jsonl")}
	p := serve(t, bin, dir, []string{"LROSINK_WEBHOOK_SECRETS=" + secret}, args...)
	release := holdWriteLock(t, db)
	var answers []<-chan testutil.Answer
	for i := range 3 {
		b := body(fmt.Sprintf("locked%d", i))
		answers = append(answers, testutil.PostInHandler(t, p.base+"/Webhook", webhooktest.Headers(fmt.Sprintf("msg_locked%d", i), time.Now(), b, secret), b))
	}
	took, code := timedStop(t, p)
	if took > app.StopTimeout+testutil.ExitSlack {
		t.Errorf("a stop with the ledger write-locked took %v from SIGTERM to exit; the bound is %v (+%v to exit)", took, app.StopTimeout, testutil.ExitSlack)
	}
	stderr := p.stderr.String()
	if code != 1 || !strings.Contains(stderr, "drain: 3 in flight") || !strings.Contains(stderr, "closing the clients outlasted the stop's budget") {
		t.Fatalf("exit %d, want 1 naming the drain and the close cut off:\n%s", code, stderr)
	}
	for i, c := range answers {
		if a := <-c; a.Err != nil || a.Status != http.StatusServiceUnavailable || a.Reason != "stopping" || a.RetryAfter == "" {
			t.Errorf("delivery %d waiting on the locked ledger was answered %+v, want 503 stopping with Retry-After", i, a)
		}
	}

	// Gemini's redelivery, once the lock is gone, finds a ledger that works.
	release()
	p = serve(t, bin, dir, []string{"LROSINK_WEBHOOK_SECRETS=" + secret}, args...)
	mustDeliver(t, p.base, secret, "locked0", "msg_locked0", "completed")
}

// testStopBoundSlowBody: a client that sent its headers and dribbles its
// body holds a request in serve's handler (the body's read deadline is the
// webhook deadline, 10 s). SIGTERM: the request is cut off when the
// requests' part of the budget ends, and serve exits 1 naming it, within
// the documented bound.
func testStopBoundSlowBody(t *testing.T, bin string) {
	dir, secret := t.TempDir(), webhooktest.NewSecret()
	p := serve(t, bin, dir, []string{"LROSINK_WEBHOOK_SECRETS=" + secret})
	b := body("slow")
	testutil.Dribble(t, strings.TrimPrefix(p.base, "http://"), "/Webhook", webhooktest.Headers("msg_slow", time.Now(), b, secret), len(b))
	took, code := timedStop(t, p)
	if took > app.StopTimeout+testutil.ExitSlack {
		t.Errorf("a stop with a body still arriving took %v from SIGTERM to exit; the bound is %v (+%v to exit)", took, app.StopTimeout, testutil.ExitSlack)
	}
	if stderr := p.stderr.String(); code != 1 || !strings.Contains(stderr, "requests still running were cut off") {
		t.Fatalf("exit %d, want 1 naming the request cut off:\n%s", code, stderr)
	}
}
