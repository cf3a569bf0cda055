package cli

import (
	"encoding/json"
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
)

// TestOpsShowTimesMeanWhatTheySay: a registered, never-observed operation
// has no state time ("—" in text, null in JSON), never 1970; a next check
// in the past reads "overdue", not as a countdown; a DONE claim says when
// it was done, not a lease.
func TestOpsShowTimesMeanWhatTheySay(t *testing.T) {
	env := storeEnv(t)
	env["LROSINK_GRACE"] = "1s" // the next check is due a second after registration
	// Polling is on (a key is set), so the next check is a time; without
	// one it is never (TestOpsShowNextCheckNeverWithoutKey).
	env["GEMINI_API_KEY"] = "test-key"
	if r := run(t, env, "register", "batches/never-seen"); r.code != command.ExitOK {
		t.Fatalf("register: %d %q", r.code, r.stderr)
	}
	waitFor(t, "the first check to be due", func() bool {
		r := run(t, env, "ops", "show", "batches/never-seen")
		return strings.Contains(r.stdout, "overdue)")
	})
	r := run(t, env, "ops", "show", "batches/never-seen")
	if r.code != command.ExitOK {
		t.Fatalf("ops show: %d %q", r.code, r.stderr)
	}
	for _, bad := range []string{"1970", "lease until"} {
		if strings.Contains(r.stdout, bad) {
			t.Fatalf("ops show says %q:\n%s", bad, r.stdout)
		}
	}
	if !strings.Contains(squash(r.stdout), "Update time: —\n") {
		t.Fatalf("ops show: no \"Update time: —\":\n%s", r.stdout)
	}

	r = run(t, env, "ops", "show", "batches/never-seen", "--json")
	var raw map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatalf("ops show --json: %v %q", err, r.stdout)
	}
	if v, ok := raw["update_time"]; !ok || v != nil {
		t.Fatalf("update_time = %v (present %v), want null", v, ok)
	}
	if raw["submitted_at"] == nil || raw["next_check_at"] == nil {
		t.Fatalf("observed times missing: %q", r.stdout)
	}

	settle(t, env["LROSINK_STORE"], "batches/never-seen", lifecycle.Succeeded, &recorder{})
	r = run(t, env, "ops", "show", "batches/never-seen")
	if !strings.Contains(squash(r.stdout), "Claim: DONE at 20") || strings.Contains(r.stdout, "lease until") {
		t.Fatalf("a DONE claim shows a lease or no done time:\n%s", r.stdout)
	}
	r = run(t, env, "ops", "show", "batches/never-seen", "--json")
	var done struct {
		Claim map[string]any `json:"claim"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &done); err != nil {
		t.Fatal(err)
	}
	if v, ok := done.Claim["lease_until"]; !ok || v != nil || done.Claim["done_at"] == nil {
		t.Fatalf("DONE claim JSON: %v", done.Claim)
	}
}

// TestOpsShowNextCheckNeverWithoutKey: without GEMINI_API_KEY no pass asks
// Gemini, so a pending operation's next check is "never: no
// GEMINI_API_KEY", not a countdown to a check that never comes; once it is
// settled the field is its plain value again. The operation's error is
// labelled with its google.rpc name, and ops show and ops list name a Veo
// operation by its model path, the canonical name still shown as the key.
func TestOpsShowNextCheckNeverWithoutKey(t *testing.T) {
	env := storeEnv(t)
	delete(env, "GEMINI_API_KEY")
	const veo = "models/veo-3.0-generate-001/operations/vid_never"
	if r := run(t, env, "register", veo); r.code != command.ExitOK || r.stdout != "created "+veo+"\n" {
		t.Fatalf("register: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r := run(t, env, "ops", "show", "operations/vid_never")
	if r.code != command.ExitOK {
		t.Fatalf("ops show: %d %q", r.code, r.stderr)
	}
	for _, want := range []string{"Next check: never: no GEMINI_API_KEY\n", "Operation: " + veo + "\n", "Canonical name: operations/vid_never\n"} {
		if !strings.Contains(squash(r.stdout), want) {
			t.Errorf("ops show lacks %q:\n%s", want, r.stdout)
		}
	}
	if l := run(t, env, "ops", "list"); !strings.Contains(l.stdout, "\n"+veo+" ") {
		t.Errorf("ops list does not name the operation by its model path:\n%s", l.stdout)
	}
	env["GEMINI_API_KEY"] = "test-key"
	if r := run(t, env, "ops", "show", "operations/vid_never"); strings.Contains(r.stdout, "never: no GEMINI_API_KEY") {
		t.Errorf("with a key, ops show still says never:\n%s", r.stdout)
	}

	// Failed with google.rpc code 3: labelled, and settled, so no "never".
	delete(env, "GEMINI_API_KEY")
	s, err := sqliteledger.Open(t.Context(), strings.TrimPrefix(env["LROSINK_STORE"], "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: &recorder{}, Log: logging.Discard(), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Ingest(t.Context(), event.Event{Name: veo, State: lifecycle.Failed, UpdateTime: time.Now(), Source: event.SourceWebhook,
		DeliveryID: "msg_failed", Error: &event.ErrorInfo{Code: 3, Message: "The prompt could not be read"}})
	if cerr := s.Close(); err != nil || cerr != nil || res.Outcome != ingest.OutcomeCompleted {
		t.Fatalf("settle FAILED: %+v %v %v", res, err, cerr)
	}
	r = run(t, env, "ops", "show", veo)
	if !strings.Contains(squash(r.stdout), "Error: code 3 · INVALID_ARGUMENT: The prompt could not be read\n") ||
		strings.Contains(r.stdout, "never: no GEMINI_API_KEY") {
		t.Errorf("a failed operation: want its labelled error and no \"never\":\n%s", r.stdout)
	}
}

// squash collapses runs of spaces (tabwriter's alignment) to one.
func squash(s string) string {
	for strings.Contains(s, "  ") {
		s = strings.ReplaceAll(s, "  ", " ")
	}
	return s
}
