package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/cli/command"
)

// TestRegisterKnownMergesMetadata: registering a known operation with new
// metadata keys says they were merged and keeps the keys already stored.
func TestRegisterKnownMergesMetadata(t *testing.T) {
	env := storeEnv(t)
	if r := run(t, env, "register", "batches/merge1", "--meta", "job=nightly"); r.code != command.ExitOK || !strings.Contains(r.stdout, "created batches/merge1") {
		t.Fatalf("register: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r := run(t, env, "register", "batches/merge1", "--meta", "job=other", "--meta", "owner=data")
	if r.code != command.ExitOK || !strings.Contains(r.stdout, "already known batches/merge1 (PENDING, state untouched; metadata keys it lacked added)") {
		t.Fatalf("register again with a new key: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r = run(t, env, "register", "batches/merge1", "--meta", "owner=x"); r.code != command.ExitOK || strings.Contains(r.stdout, "added") {
		t.Fatalf("register adding nothing: %d %q", r.code, r.stdout)
	}
	var v opView
	r = run(t, env, "ops", "show", "batches/merge1", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.UserMetadata["job"] != "nightly" || v.UserMetadata["owner"] != "data" || v.Version != 2 {
		t.Fatalf("ops show: %v %q", err, r.stdout)
	}
}
