package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/reconcile"
)

func withNow(now func() time.Time) Option { return func(e *env) { e.now = now } }

// TestReconcileCommand: `lrosink reconcile` runs one pass against the
// configured store: a registered batch that Gemini reports SUCCEEDED is
// settled and published to the configured sink, and the summary is printed
// as JSON on stdout.
func TestReconcileCommand(t *testing.T) {
	fake := fakegemini.New()
	fake.SetBatch("rec1", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: time.Now(), ResponsesFile: fakegemini.ResponsesFile("rec1")})
	env := storeEnv(t)
	results := filepath.Join(t.TempDir(), "results.jsonl")
	env["LROSINK_RESULTS"] = "file:" + results
	env["GEMINI_API_KEY"], env["GOOGLE_GEMINI_BASE_URL"] = fakegemini.DefaultAPIKey, fake.Start(t).URL
	if r := run(t, env, "register", "batches/rec1"); r.code != command.ExitOK {
		t.Fatalf("register: %d %s", r.code, r.stderr)
	}
	// After the grace period, the operation is due.
	later := func() time.Time { return time.Now().Add(time.Hour) }
	var out, errb bytes.Buffer
	code := Run(t.Context(), []string{"reconcile"}, strings.NewReader(""), &out, &errb, mapEnv(env), withNow(later))
	if code != command.ExitOK {
		t.Fatalf("reconcile: exit %d\n%s%s", code, out.String(), errb.String())
	}
	var s reconcile.Summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("stdout is not the summary: %q (%v)", out.String(), err)
	}
	if s.Checked != 1 || s.Settled != 1 || s.Errors != 0 || s.StillPending != 0 {
		t.Fatalf("summary %+v", s)
	}
	b, err := os.ReadFile(results)
	if err != nil {
		t.Fatal(err)
	}
	if lines := resultLines(t, string(b)); len(lines) != 1 || lines[0].Operation != "batches/rec1" || lines[0].SettledBy != "reconcile" {
		t.Fatalf("results %+v", lines)
	}
	// A second pass finds nothing due.
	out.Reset()
	if code := Run(t.Context(), []string{"reconcile"}, strings.NewReader(""), &out, &errb, mapEnv(env), withNow(later)); code != command.ExitOK ||
		!strings.Contains(out.String(), `"checked":0`) {
		t.Fatalf("second pass: exit %d %s", code, out.String())
	}
}

// TestReconcileNeedsALedger: pointed at a SQLite file that does not exist,
// reconcile fails instead of creating an empty ledger.
func TestReconcileNeedsALedger(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.db")
	r := run(t, map[string]string{"LROSINK_STORE": "sqlite:" + missing, "LROSINK_RESULTS": "stdout"}, "reconcile")
	if r.code != command.ExitUsage || !strings.Contains(r.stderr, "no ledger at "+missing+": start `lrosink serve` there or set LROSINK_STORE") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("reconcile created the database")
	}
}
