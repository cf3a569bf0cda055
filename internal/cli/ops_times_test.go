package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/lifecycle"
)

// TestOpsShowTimesMeanWhatTheySay: a registered, never-observed operation
// has no state time ("—" in text, null in JSON), never 1970; a next check
// in the past reads "overdue", not as a countdown; a DONE claim says when
// it was done, not a lease.
func TestOpsShowTimesMeanWhatTheySay(t *testing.T) {
	env := storeEnv(t)
	env["LROSINK_GRACE"] = "1s" // the next check is due a second after registration
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
	if !strings.Contains(r.stdout, "Update time:  —") {
		t.Fatalf("ops show: no \"Update time:  —\":\n%s", r.stdout)
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
	if !strings.Contains(r.stdout, "Claim:            DONE at 20") || strings.Contains(r.stdout, "lease until") {
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
