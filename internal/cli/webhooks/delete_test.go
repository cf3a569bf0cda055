package webhooks_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/cli/webhooks"
)

// TestDelete removes the webhook through the SDK's DELETE and says so; the
// "webhooks/ID" form is accepted; an unknown id is exit 1.
func TestDelete(t *testing.T) {
	e := newEnv(t)
	keep := e.create(t, "https://example.com/keep")
	id := e.create(t, "https://example.com/hook")
	res := e.run(t, webhooks.Deps{}, "delete", "webhooks/"+id)
	if res.code != 0 || !strings.Contains(res.stdout, id) {
		t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if n := len(e.requestsTo(http.MethodDelete, "/v1beta/webhooks/"+id)); n != 1 {
		t.Fatalf("%d DELETE requests, want 1", n)
	}
	if _, ok := e.fake.Webhook(id); ok {
		t.Fatal("the webhook is still there")
	}
	if _, ok := e.fake.Webhook(keep); !ok {
		t.Fatal("the other webhook was deleted too")
	}
	res = e.run(t, webhooks.Deps{}, "delete", id)
	if res.code != 1 || !strings.Contains(res.stderr, "no such webhook") {
		t.Fatalf("second delete: exit %d, stderr %q", res.code, res.stderr)
	}
}
