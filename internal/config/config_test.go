package config

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := Load(env(nil), Serve())
	if err != nil {
		t.Fatal(err)
	}
	if c.Store != "sqlite:lrosink.db" || c.Results != "stdout" || c.Grace != 90*time.Second || c.StuckAfter != 6*time.Hour ||
		c.ClaimLease != 10*time.Minute || c.ReconcileEvery != time.Minute || c.MaxBody != 1048576 || c.JWKSURL != DefaultJWKSURL ||
		c.FirestoreDatabase != "(default)" || len(c.WebhookSecrets) != 0 || c.WebhookDeadline != 10*time.Second || c.AdminToken != "" {
		t.Fatalf("defaults %+v", c)
	}
	if _, err := Load(env(map[string]string{"GOOGLE_CLOUD_PROJECT": "p"}), Container()); err == nil || !strings.Contains(err.Error(), "LROSINK_RESULTS") {
		t.Fatalf("container without LROSINK_RESULTS: %v", err)
	}
}

func TestValues(t *testing.T) {
	c, err := Load(env(map[string]string{
		"LROSINK_STORE": "firestore", "GOOGLE_CLOUD_PROJECT": "p1", "LROSINK_RESULTS": "pubsub:projects/p1/topics/results",
		"LROSINK_WEBHOOK_SECRETS": " whsec_a , whsec_b ,", "LROSINK_GRACE": "2m", "LROSINK_MAX_BODY": "2048",
		"LROSINK_WEBHOOK_DEADLINE": "3s", "LROSINK_ADMIN_TOKEN": " 0123456789abcdef-_.~+/= ",
	}), Container())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.WebhookSecrets) != 2 || c.WebhookSecrets[1] != "whsec_b" || c.Grace != 2*time.Minute || c.MaxBody != 2048 ||
		c.WebhookDeadline != 3*time.Second || c.AdminToken != "0123456789abcdef-_.~+/=" {
		t.Fatalf("%+v", c)
	}
}

func TestInvalidNamesTheVariable(t *testing.T) {
	for k, v := range map[string]string{
		"LROSINK_STORE":            "mysql:x",
		"LROSINK_RESULTS":          "kafka:x",
		"LROSINK_GRACE":            "soon",
		"LROSINK_STUCK_AFTER":      "-1h",
		"LROSINK_CLAIM_LEASE":      "0s",
		"LROSINK_RECONCILE_EVERY":  "1",
		"LROSINK_MAX_BODY":         "lots",
		"LROSINK_JWKS_URL":         "ftp://x",
		"LROSINK_WEBHOOK_SECRETS":  "supersecretvalue",
		"GOOGLE_GEMINI_BASE_URL":   "::",
		"LROSINK_WEBHOOK_DEADLINE": "0s",
		"LROSINK_ADMIN_TOKEN":      "short-secret",
	} {
		_, err := Load(env(map[string]string{k: v}), Serve())
		if err == nil || !strings.HasPrefix(err.Error(), k+":") {
			t.Errorf("%s=%q: error %v, want one naming %s", k, v, err, k)
		}
		if (k == "LROSINK_WEBHOOK_SECRETS" || k == "LROSINK_ADMIN_TOKEN") && err != nil && strings.Contains(err.Error(), v) {
			t.Errorf("the error reveals the secret: %v", err)
		}
	}
	if _, err := Load(env(map[string]string{"LROSINK_RESULTS": "pubsub:projects/p/subscriptions/s"}), Serve()); err == nil {
		t.Error("a subscription name accepted as a topic")
	}
}

// TestWebhookDeadlineAndAdminToken: the deadline is a positive duration; the
// admin token is long enough to resist guessing and can be sent in an
// Authorization header as it is (RFC 6750 token characters). An error names
// the variable and never echoes the token.
func TestWebhookDeadlineAndAdminToken(t *testing.T) {
	for _, v := range []string{"-1s", "soon", "10"} {
		if _, err := Load(env(map[string]string{"LROSINK_WEBHOOK_DEADLINE": v}), Serve()); err == nil || !strings.HasPrefix(err.Error(), "LROSINK_WEBHOOK_DEADLINE:") {
			t.Errorf("LROSINK_WEBHOOK_DEADLINE=%q: %v", v, err)
		}
	}
	for _, v := range []string{"0123456789abcde", "0123456789 abcdef", "0123456789abcdef\"x", "0123456789abcdéf"} {
		_, err := Load(env(map[string]string{"LROSINK_ADMIN_TOKEN": v}), Serve())
		if err == nil || !strings.HasPrefix(err.Error(), "LROSINK_ADMIN_TOKEN:") {
			t.Errorf("LROSINK_ADMIN_TOKEN=%q: %v", v, err)
		}
		if err != nil && strings.Contains(err.Error(), v) {
			t.Errorf("the error reveals the token: %v", err)
		}
	}
}
