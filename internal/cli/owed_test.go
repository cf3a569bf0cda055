package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/results"
)

type failingSink struct{}

func (failingSink) Publish(context.Context, results.Message) error {
	return errors.New("topic unreachable")
}

// TestRegisterLeavesAnOwedMessageWithoutASink: registering a settled
// operation whose message is owed (its claim RELEASED after a failed
// publish) publishes nothing when no results sink is configured (it says
// the next reconcile pass will; the claim stays owed), and publishes to the
// configured sink when there is one.
func TestRegisterLeavesAnOwedMessageWithoutASink(t *testing.T) {
	env := storeEnv(t)
	s, err := sqliteledger.Open(t.Context(), strings.TrimPrefix(env["LROSINK_STORE"], "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: failingSink{}, Log: logging.Discard(), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Ingest(t.Context(), event.Event{Name: "batches/owed1", State: lifecycle.Succeeded, UpdateTime: time.Now(),
		Source: event.SourceWebhook}); !errors.Is(err, ingest.ErrSideEffect) {
		t.Fatalf("settle with a failing sink: %v", err)
	}
	_ = s.Close()

	r := run(t, env, "register", "batches/owed1")
	if r.code != command.ExitOK || strings.Contains(r.stdout, "{") || !strings.Contains(r.stdout, "still owed") ||
		!strings.Contains(r.stdout, "next reconcile pass") {
		t.Fatalf("register without LROSINK_RESULTS: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, env, "ops", "show", "batches/owed1"); !strings.Contains(r.stdout, "RELEASED") {
		t.Fatalf("the claim is no longer owed after a register without a sink:\n%s", r.stdout)
	}

	out := filepath.Join(t.TempDir(), "results.jsonl")
	env["LROSINK_RESULTS"] = "file:" + out
	if r := run(t, env, "register", "batches/owed1"); r.code != command.ExitOK || !strings.Contains(r.stdout, "was published") {
		t.Fatalf("register with LROSINK_RESULTS: %d %q %q", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if lines := resultLines(t, string(b)); len(lines) != 1 || lines[0].Operation != "batches/owed1" {
		t.Fatalf("configured sink got %q", b)
	}
}
