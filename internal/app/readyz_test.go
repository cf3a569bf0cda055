package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/sink"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/urlopen"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// failingStore is a real SQLite ledger whose writes fail while down is set:
// SQLite cannot be made to refuse writes on demand (a full disk refuses
// only those that need a new page).
type failingStore struct {
	ledger.Ledger
	down *atomic.Bool
}

func (s failingStore) Apply(ctx context.Context, w ...ledger.Write) ([]ledger.Revision, error) {
	if s.down.Load() {
		return nil, errors.New("injected: disk I/O error")
	}
	return s.Ledger.Apply(ctx, w...)
}

// failingFile is the real file sink, whose writes fail while down is set:
// where the test cannot mount a small filesystem to fill (not root).
type failingFile struct {
	*sink.File
	down *atomic.Bool
}

var errInjectedFull = errors.New("injected: no space left on device")

func (f failingFile) Publish(ctx context.Context, m results.Message) error {
	if f.down.Load() {
		return errInjectedFull
	}
	return f.File.Publish(ctx, m)
}

func (f failingFile) ProbeWrite(ctx context.Context) error {
	if f.down.Load() {
		return errInjectedFull
	}
	return f.File.ProbeWrite(ctx)
}

// TestReadyzWhileWritesFail (issue #47, item 1): while the results file's
// writes fail (a full disk: a real 64 KiB tmpfs when root), /readyz answers
// 503 results-writes-failing naming the error; once there is room again and
// no traffic comes, its probe write after ReadyFor makes it ready. The
// same for the ledger's writes (ledger-writes-failing); a write that
// succeeds makes it ready at once.
func TestReadyzWhileWritesFail(t *testing.T) {
	clk := testutil.NewClock(now)
	var ledgerDown, resultsDown atomic.Bool
	dir := testutil.SmallFS(t, "64k")
	results, fill, free := "file:"+filepath.Join(dir, "results.jsonl"), func() {}, func() {}
	wantErr := "no space left on device"
	if dir != "" {
		filler := filepath.Join(dir, "filler")
		fill = func() { testutil.FillFS(t, filler) }
		free = func() {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		t.Log("the results file's writes fail by injection")
		results = "failing-file:" + filepath.Join(t.TempDir(), "results.jsonl")
		fill, free, wantErr = func() { resultsDown.Store(true) }, func() { resultsDown.Store(false) }, errInjectedFull.Error()
	}
	secret := webhooktest.NewSecret()
	cfg := testConfig(t, "", func(c *config.Config) {
		c.WebhookSecrets = []string{secret}
		c.Store, c.Results = "failing-sqlite:"+filepath.Join(t.TempDir(), "l.db"), results
		c.Openers = urlopen.Openers{
			Stores: urlopen.NewRegistry(urlopen.StoreVar, urlopen.Scheme[ledger.Ledger]{Name: "failing-sqlite", Form: "failing-sqlite:PATH",
				Check: func(string, urlopen.Env) error { return nil },
				Open: func(ctx context.Context, path string, _ urlopen.Env) (ledger.Ledger, func() error, error) {
					s, err := sqliteledger.Open(ctx, path)
					if err != nil {
						return nil, nil, err
					}
					return failingStore{s, &ledgerDown}, s.Close, nil
				}}),
			Results: urlopen.NewRegistry(urlopen.ResultsVar, urlopen.File(), urlopen.Scheme[sink.Sink]{Name: "failing-file", Form: "failing-file:PATH",
				Check: func(string, urlopen.Env) error { return nil },
				Open: func(_ context.Context, path string, env urlopen.Env) (sink.Sink, func() error, error) {
					f, err := sink.NewFile(path, env.Log)
					if err != nil {
						return nil, nil, err
					}
					return failingFile{f, &resultsDown}, f.Close, nil
				}}),
		}
	})
	a := newApp(t, cfg, nil, io.Discard, clk.Now)
	srv := httptest.NewServer(a.Mux())
	t.Cleanup(srv.Close)
	h := &hookServer{t: t, a: a, url: srv.URL, secret: secret, clk: clk}
	ready := func() (int, string, string) {
		t.Helper()
		code, b := h.get("/readyz")
		var body struct{ Status, Detail string }
		if err := json.Unmarshal([]byte(b), &body); err != nil {
			t.Fatalf("/readyz: %q: %v", b, err)
		}
		return code, body.Status, body.Detail
	}
	completion := func(id string) string {
		return `{"type":"batch.succeeded","version":"v1","timestamp":"` + clk.Now().Format("2006-01-02T15:04:05Z07:00") + `","data":{"id":"` + id + `"}}`
	}

	if code, status, detail := ready(); code != http.StatusOK {
		t.Fatalf("a healthy serve: %d %s %s", code, status, detail)
	}

	// The disk fills up: the publish fails, and so does readiness.
	fill()
	if code := h.deliver("msg_full", completion("full"), secret); code != http.StatusServiceUnavailable {
		t.Fatalf("a delivery on a full disk: %d, want 503", code)
	}
	code, status, detail := ready()
	if code != http.StatusServiceUnavailable || status != "results-writes-failing" || !strings.Contains(detail, wantErr) {
		t.Fatalf("/readyz while the results file's writes fail: %d %s %q", code, status, detail)
	}
	// Room again, and no traffic: not yet ready (nothing says so), then the
	// probe write, ReadyFor after the failure, does.
	free()
	if code, status, _ := ready(); code != http.StatusServiceUnavailable || status != "results-writes-failing" {
		t.Fatalf("/readyz with room again, before the probe: %d %s", code, status)
	}
	clk.Advance(httpapi.ReadyFor)
	if code, status, detail := ready(); code != http.StatusOK {
		t.Fatalf("/readyz after the probe write: %d %s %q", code, status, detail)
	}

	// The ledger refuses writes: the next delivery's commit fails.
	ledgerDown.Store(true)
	if code := h.deliver("msg_down", completion("down"), secret); code != http.StatusServiceUnavailable {
		t.Fatalf("a delivery while the ledger refuses writes: %d, want 503", code)
	}
	if code, status, detail := ready(); code != http.StatusServiceUnavailable || status != "ledger-writes-failing" || !strings.Contains(detail, "disk I/O error") {
		t.Fatalf("/readyz while the ledger's writes fail: %d %s %q", code, status, detail)
	}
	clk.Advance(httpapi.ReadyFor)
	if code, status, _ := ready(); code != http.StatusServiceUnavailable || status != "ledger-writes-failing" {
		t.Fatalf("/readyz after a probe write the ledger refused too: %d %s", code, status)
	}
	ledgerDown.Store(false)
	clk.Advance(httpapi.ReadyFor)
	if code, status, detail := ready(); code != http.StatusOK {
		t.Fatalf("/readyz once the ledger takes the probe write: %d %s %q", code, status, detail)
	}

	// A write that succeeds clears a failure at once.
	fill()
	if code := h.deliver("msg_full2", completion("full2"), secret); code != http.StatusServiceUnavailable {
		t.Fatalf("a delivery on a full disk: %d, want 503", code)
	}
	if code, _, _ := ready(); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz on a full disk again: %d", code)
	}
	free()
	if code := h.deliver("msg_after", completion("after"), secret); code != http.StatusOK {
		t.Fatalf("a delivery with room again: %d, want 200", code)
	}
	if code, status, detail := ready(); code != http.StatusOK {
		t.Fatalf("/readyz after a publish succeeded: %d %s %q", code, status, detail)
	}
}
