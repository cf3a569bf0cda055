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

// TestDeleteUsage: nothing is sent for a bad command line or without a key.
func TestDeleteUsage(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"delete"}, 2, "exactly one webhook ID"},
		{[]string{"delete", "a/b"}, 2, "invalid webhook ID"},
		{[]string{"delete", "--help"}, 0, "lrosink webhooks delete wh_123"},
	} {
		res := e.run(t, webhooks.Deps{}, tc.args...)
		out := res.stderr
		if tc.code == 0 {
			out = res.stdout
		}
		if res.code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%q: exit %d, want %d with %q in:\n%s", tc.args, res.code, tc.code, tc.want, out)
		}
	}
	e.apiKey = ""
	if res := e.run(t, webhooks.Deps{}, "delete", "wh1"); res.code != 1 || !strings.Contains(res.stderr, "GEMINI_API_KEY") {
		t.Errorf("without a key: exit %d, stderr %q", res.code, res.stderr)
	}
	if n := e.fake.TotalCalls(); n != 0 {
		t.Errorf("%d calls to Gemini", n)
	}
}
