package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestOpsShowDeliveryLog: deliveries sent to serve (a completion, a
// duplicate, a late interaction.requires_action) all appear in `ops show`'s
// delivery log with their outcome and reason, newest first, in the table and
// in --json.
func TestOpsShowDeliveryLog(t *testing.T) {
	secret := webhooktest.NewSecret()
	env := storeEnv(t)
	env["LROSINK_WEBHOOK_SECRETS"] = secret
	s := startServe(t, env)
	url := s.base + "/Webhook"
	sendEnv := map[string]string{"LROSINK_WEBHOOK_SECRETS": secret}
	for _, c := range []struct{ event, outcome string }{
		{"interaction.completed", `"outcome":"completed"`},
		{"interaction.completed", `"outcome":"duplicate"`},
		{"interaction.requires_action", `"reason":"regress-from-terminal"`},
	} {
		r := run(t, sendEnv, "send", c.event, "--id", "interactions/log1", "--url", url)
		if r.code != command.ExitOK || !strings.Contains(r.stdout, c.outcome) {
			t.Fatalf("send %s: exit %d\n%s%s", c.event, r.code, r.stdout, r.stderr)
		}
	}
	// Stopping serve writes the delivery log's queue.
	if code := s.stop(); code != command.ExitOK {
		t.Fatalf("serve exit %d", code)
	}

	r := run(t, env, "ops", "show", "interactions/log1")
	if r.code != command.ExitOK {
		t.Fatalf("ops show: exit %d %s", r.code, r.stderr)
	}
	_, log, ok := strings.Cut(r.stdout, "Deliveries (newest first")
	if !ok {
		t.Fatalf("ops show has no delivery log:\n%s", r.stdout)
	}
	table, _, _ := strings.Cut(strings.SplitN(log, "\n", 2)[1], "\n\n")
	rows := checkTable(t, table, []string{"RECEIVED", "SOURCE", "DELIVERY_ID", "STATUS", "AUTH", "OUTCOME", "REASON", "ANSWER", "LATENCY"})
	if len(rows) != 3 {
		t.Fatalf("%d delivery rows, want 3:\n%s", len(rows), log)
	}
	for i, want := range [][]string{
		{"webhook", "interaction.requires_action", "v1", "dropped", "regress-from-terminal", "200"},
		{"webhook", "interaction.completed", "v1", "duplicate"},
		{"webhook", "interaction.completed", "v1", "completed", "first-sighting", "200"},
	} {
		for _, w := range want {
			if !strings.Contains(strings.Join(rows[i], " "), w) {
				t.Errorf("row %d %v lacks %q", i, rows[i], w)
			}
		}
	}

	r = run(t, env, "ops", "show", "interactions/log1", "--json")
	var v struct {
		Deliveries []struct {
			Outcome, Reason, Status, Auth string
			DeliveryID                    string `json:"delivery_id"`
			Answer                        int
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("ops show --json: %v\n%s", err, r.stdout)
	}
	if len(v.Deliveries) != 3 || v.Deliveries[0].Reason != "regress-from-terminal" || v.Deliveries[1].Outcome != "duplicate" ||
		v.Deliveries[0].DeliveryID == "" || v.Deliveries[0].Answer != 200 {
		t.Errorf("--json deliveries = %+v", v.Deliveries)
	}
}
