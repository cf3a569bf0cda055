package cli

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestSendVideoPublishesAPIName: `lrosink send video.generated --id
// models/veo-3.0-generate-001/operations/vid1` against serve publishes one
// message whose api_name (data and attribute) keeps the model path, which
// operations.get needs, beside the canonical operations/vid1.
func TestSendVideoPublishesAPIName(t *testing.T) {
	secret := webhooktest.NewSecret()
	env := storeEnv(t)
	env["LROSINK_WEBHOOK_SECRETS"] = secret
	s := startServe(t, env)
	const apiName = "models/veo-3.0-generate-001/operations/vid1"

	r := run(t, map[string]string{"LROSINK_WEBHOOK_SECRETS": secret}, "send", "video.generated", "--id", apiName, "--url", s.base+"/Webhook")
	if r.code != command.ExitOK || !strings.Contains(r.stdout, `"outcome":"completed"`) {
		t.Fatalf("send: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "the results line", func() bool { return strings.Count(s.stdout.String(), "\n") >= 1 })
	if code := s.stop(); code != command.ExitOK {
		t.Fatalf("serve exit %d", code)
	}
	if lines := resultLines(t, s.stdout.String()); len(lines) != 1 || lines[0].Operation != "operations/vid1" {
		t.Fatalf("results %+v, want one for operations/vid1", lines)
	}
	sc := bufio.NewScanner(strings.NewReader(s.stdout.String()))
	sc.Scan()
	var line struct {
		APIName    *string           `json:"api_name"`
		Attributes map[string]string `json:"attributes"`
	}
	if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line.APIName == nil || *line.APIName != apiName || line.Attributes["api_name"] != apiName {
		t.Fatalf("api_name %v, attribute %q, want %s in both:\n%s", line.APIName, line.Attributes["api_name"], apiName, sc.Text())
	}
}
