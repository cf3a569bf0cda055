package config

import (
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/urlopen"
	"github.com/lrosink/lrosink/internal/urlopen/sqliteurl"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// local is cmd/lrosink's set of schemes.
func local() urlopen.Openers { return urlopen.Cloud(sqliteurl.Scheme(false)) }

func TestDefaults(t *testing.T) {
	c, err := Load(env(nil), Serve(local()))
	if err != nil {
		t.Fatal(err)
	}
	if c.Store != "sqlite:lrosink.db" || c.Results != "stdout" || c.Grace != 90*time.Second || c.StuckAfter != 6*time.Hour ||
		c.ClaimLease != 10*time.Minute || c.ReconcileEvery != time.Minute || c.MaxBody != 1048576 || c.JWKSURL != DefaultJWKSURL ||
		c.FirestoreDatabase != "(default)" || len(c.WebhookSecrets) != 0 || c.WebhookDeadline != 10*time.Second || c.AdminToken != "" ||
		c.ReconcileDeadline != 270*time.Second || c.GeminiQPS != 0 || c.ReconcileShards != 1 || c.Retention != 0 {
		t.Fatalf("defaults %+v", c)
	}
	if _, err := Load(env(map[string]string{"GOOGLE_CLOUD_PROJECT": "p"}), Container()); err == nil || !strings.Contains(err.Error(), "LROSINK_RESULTS") {
		t.Fatalf("container without LROSINK_RESULTS: %v", err)
	}
}

func TestValues(t *testing.T) {
	secretA, secretB := webhooktest.NewSecret(), webhooktest.NewSecret()
	c, err := Load(env(map[string]string{
		"LROSINK_STORE": "firestore", "GOOGLE_CLOUD_PROJECT": "p1", "LROSINK_RESULTS": "pubsub:projects/p1/topics/results",
		"LROSINK_WEBHOOK_SECRETS": " " + secretA + " , " + secretB + " ,", "LROSINK_GRACE": "2m", "LROSINK_MAX_BODY": "2048",
		"LROSINK_WEBHOOK_DEADLINE": "3s", "LROSINK_ADMIN_TOKEN": " 0123456789abcdef-_.~+/= ", "LROSINK_RECONCILE_DEADLINE": "100s",
		"LROSINK_GEMINI_QPS": "2.5", "LROSINK_RETENTION": "400d",
	}), Container())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.WebhookSecrets) != 2 || c.WebhookSecrets[1] != secretB || c.Grace != 2*time.Minute || c.MaxBody != 2048 ||
		c.WebhookDeadline != 3*time.Second || c.AdminToken != "0123456789abcdef-_.~+/=" || c.ReconcileDeadline != 100*time.Second ||
		c.GeminiQPS != 2.5 || c.ReconcileShards != 1 || c.Retention != 400*24*time.Hour {
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
		"LROSINK_GEMINI_QPS":       "-1",
		"LROSINK_RECONCILE_SHARDS": "1.5",
		"LROSINK_RETENTION":        "6d",
		"LROSINK_INTENT_GRACE":     "59s",
		// A whsec_ secret given as a public key: refused without quoting it.
		"LROSINK_WEBHOOK_PUBLIC_KEYS": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	} {
		_, err := Load(env(map[string]string{k: v}), Serve(local()))
		if err == nil || !strings.HasPrefix(err.Error(), k+":") {
			t.Errorf("%s=%q: error %v, want one naming %s", k, v, err, k)
		}
		if (k == "LROSINK_WEBHOOK_SECRETS" || k == "LROSINK_ADMIN_TOKEN" || k == "LROSINK_WEBHOOK_PUBLIC_KEYS") && err != nil && strings.Contains(err.Error(), v) {
			t.Errorf("the error reveals the secret: %v", err)
		}
	}
	if _, err := Load(env(map[string]string{"LROSINK_RESULTS": "pubsub:projects/p/subscriptions/s"}), Serve(local())); err == nil {
		t.Error("a subscription name accepted as a topic")
	}
	// More shards than buckets (package shard): a shard is a bucket range.
	if _, err := Load(env(map[string]string{"LROSINK_RECONCILE_SHARDS": "65"}), Serve(local())); err == nil || !strings.HasPrefix(err.Error(), "LROSINK_RECONCILE_SHARDS:") {
		t.Errorf("LROSINK_RECONCILE_SHARDS=65: error %v, want one naming it", err)
	}
}

// TestShardsAndFanOut: LROSINK_RECONCILE_SHARDS is 1 to 64 (the buckets);
// above 1 the shard requests need LROSINK_RECONCILE_FANOUT_TOPIC, a full
// topic name, which the admin token would lock out.
func TestShardsAndFanOut(t *testing.T) {
	const topic = "projects/p1/topics/lrosink-reconcile-fanout"
	c, err := Load(env(map[string]string{"LROSINK_RECONCILE_SHARDS": "64", "LROSINK_RECONCILE_FANOUT_TOPIC": " " + topic + " "}), Serve(local()))
	if err != nil || c.ReconcileShards != 64 || c.FanOutTopic != topic {
		t.Fatalf("64 shards with a topic: %+v, %v", c, err)
	}
	// One shard needs no topic; a topic with one shard is accepted (unused).
	for _, m := range []map[string]string{{"LROSINK_RECONCILE_SHARDS": "1"}, {"LROSINK_RECONCILE_FANOUT_TOPIC": topic}} {
		if _, err := Load(env(m), Serve(local())); err != nil {
			t.Errorf("%v: %v", m, err)
		}
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"LROSINK_RECONCILE_SHARDS": "0"}, "LROSINK_RECONCILE_SHARDS:"},
		{map[string]string{"LROSINK_RECONCILE_SHARDS": "65", "LROSINK_RECONCILE_FANOUT_TOPIC": topic}, "LROSINK_RECONCILE_SHARDS:"},
		{map[string]string{"LROSINK_RECONCILE_SHARDS": "4"}, "LROSINK_RECONCILE_FANOUT_TOPIC: required"},
		{map[string]string{"LROSINK_RECONCILE_SHARDS": "4", "LROSINK_RECONCILE_FANOUT_TOPIC": "lrosink-reconcile-fanout"}, "LROSINK_RECONCILE_FANOUT_TOPIC:"},
		{map[string]string{"LROSINK_RECONCILE_SHARDS": "4", "LROSINK_RECONCILE_FANOUT_TOPIC": topic, "LROSINK_ADMIN_TOKEN": "0123456789abcdef-admin"}, "LROSINK_RECONCILE_FANOUT_TOPIC: cannot be used with LROSINK_ADMIN_TOKEN"},
	} {
		_, err := Load(env(c.env), Serve(local()))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line starting %q", c.env, err, c.want)
		}
	}
}

// TestEachBinaryOpensItsOwnSchemes: the container refuses sqlite: with one
// line naming the variable and what it can open; cmd/lrosink accepts it.
func TestEachBinaryOpensItsOwnSchemes(t *testing.T) {
	vars := map[string]string{"LROSINK_STORE": "sqlite:/tmp/x.db", "LROSINK_RESULTS": "stdout"}
	_, err := Load(env(vars), Container())
	want := `LROSINK_STORE: scheme "sqlite" is not available in this binary (available: firestore)`
	if err == nil || err.Error() != want {
		t.Fatalf("container with sqlite: %v, want %q", err, want)
	}
	if c, err := Load(env(vars), Serve(local())); err != nil || c.Store != "sqlite:/tmp/x.db" {
		t.Fatalf("lrosink with sqlite: %+v %v", c, err)
	}
}

// TestStartUpChecks are the values that used to pass Load and fail only
// later: a secret that does not decode, a topic id Pub/Sub refuses, a
// firestore store without a project.
func TestStartUpChecks(t *testing.T) {
	for _, c := range []struct {
		name     string
		vars     map[string]string
		variable string
	}{
		{"secret tail not base64", map[string]string{"LROSINK_WEBHOOK_SECRETS": "whsec_%%%not-base64%%%"}, "LROSINK_WEBHOOK_SECRETS"},
		{"empty secret tail", map[string]string{"LROSINK_WEBHOOK_SECRETS": "whsec_"}, "LROSINK_WEBHOOK_SECRETS"},
		{"topic id too short", map[string]string{"LROSINK_RESULTS": "pubsub:projects/p/topics/ab"}, "LROSINK_RESULTS"},
		{"topic id not starting with a letter", map[string]string{"LROSINK_RESULTS": "pubsub:projects/p/topics/9ab"}, "LROSINK_RESULTS"},
		{"firestore without a project", map[string]string{"LROSINK_STORE": "firestore"}, "GOOGLE_CLOUD_PROJECT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(env(c.vars), Serve(local()))
			if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), c.variable+":") {
				t.Fatalf("error %v, want one line naming %s", err, c.variable)
			}
			if strings.Contains(err.Error(), "not-base64") {
				t.Fatalf("the error quotes the secret: %v", err)
			}
		})
	}
	// Against the emulator no project is needed: the one fallback applies.
	if _, err := Load(env(map[string]string{"LROSINK_STORE": "firestore", "FIRESTORE_EMULATOR_HOST": "localhost:1"}), Serve(local())); err != nil {
		t.Fatalf("firestore on the emulator without a project: %v", err)
	}
}

// TestValidateAfterChanges: an entry point that changes the configuration
// after Load (serve's generated dev secret, a flag) can check it again.
func TestValidateAfterChanges(t *testing.T) {
	c, err := Load(env(nil), Serve(local()))
	if err != nil {
		t.Fatal(err)
	}
	c.WebhookSecrets = []string{webhooktest.NewSecret()}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid secret: %v", err)
	}
	c.Results = "kafka:x"
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "LROSINK_RESULTS:") {
		t.Fatalf("Validate after setting a bad LROSINK_RESULTS: %v", err)
	}
}

// TestWebhookDeadlineAndAdminToken: the deadline is a positive duration; the
// admin token is long enough to resist guessing and can be sent in an
// Authorization header as it is (RFC 6750 token characters). An error names
// the variable and never echoes the token.
func TestWebhookDeadlineAndAdminToken(t *testing.T) {
	for _, k := range []string{"LROSINK_WEBHOOK_DEADLINE", "LROSINK_RECONCILE_DEADLINE"} {
		for _, v := range []string{"-1s", "soon", "10"} {
			if _, err := Load(env(map[string]string{k: v}), Serve(local())); err == nil || !strings.HasPrefix(err.Error(), k+":") {
				t.Errorf("%s=%q: %v", k, v, err)
			}
		}
	}
	for _, v := range []string{"0123456789abcde", "0123456789 abcdef", "0123456789abcdef\"x", "0123456789abcdéf"} {
		_, err := Load(env(map[string]string{"LROSINK_ADMIN_TOKEN": v}), Serve(local()))
		if err == nil || !strings.HasPrefix(err.Error(), "LROSINK_ADMIN_TOKEN:") {
			t.Errorf("LROSINK_ADMIN_TOKEN=%q: %v", v, err)
		}
		if err != nil && strings.Contains(err.Error(), v) {
			t.Errorf("the error reveals the token: %v", err)
		}
	}
}

// TestEveryProblemOneLineInOrder: with several bad values Load reports
// each, one line per variable, in a fixed order (the order an operator
// reads them in start-up logs), with the valid values still read.
func TestEveryProblemOneLineInOrder(t *testing.T) {
	c, err := Load(env(map[string]string{
		"LROSINK_MAX_BODY":         "lots",
		"LROSINK_ADMIN_TOKEN":      "short-secret",
		"LROSINK_WEBHOOK_DEADLINE": "0s",
		"LROSINK_GRACE":            "soon",
		"LROSINK_CLAIM_LEASE":      "5m",
		"GOOGLE_GEMINI_BASE_URL":   "::",
		"LROSINK_JWKS_URL":         "ftp://x",
		"LROSINK_WEBHOOK_SECRETS":  "supersecretvalue",
	}), Serve(local()))
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{"LROSINK_WEBHOOK_SECRETS:", "LROSINK_JWKS_URL:", "GOOGLE_GEMINI_BASE_URL:", "LROSINK_GRACE:",
		"LROSINK_WEBHOOK_DEADLINE:", "LROSINK_ADMIN_TOKEN:", "LROSINK_MAX_BODY:"}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%v", len(lines), len(want), err)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, want[i]) {
			t.Errorf("line %d = %q, want it to start with %s", i+1, l, want[i])
		}
	}
	if c.ClaimLease != 5*time.Minute || c.Grace != 90*time.Second || c.MaxBody != 1<<20 {
		t.Errorf("lease %s, grace %s, max body %d: want the valid value read and defaults for the bad ones", c.ClaimLease, c.Grace, c.MaxBody)
	}
}

// TestV1AKeySources: LROSINK_WEBHOOK_PUBLIC_KEYS is read as a list of
// whpk_ keys, and LROSINK_JWKS_URL may name a local file.
func TestV1AKeySources(t *testing.T) {
	pk := "whpk_" + strings.Repeat("A", 43) + "="
	c, err := Load(env(map[string]string{"LROSINK_WEBHOOK_PUBLIC_KEYS": " " + pk + ", ," + pk,
		"LROSINK_JWKS_URL": "file:///etc/lrosink/jwks.json"}), Serve(local()))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.WebhookPublicKeys) != 2 || c.WebhookPublicKeys[0] != pk || c.JWKSURL != "file:///etc/lrosink/jwks.json" {
		t.Fatalf("%+v", c)
	}
	_, err = Load(env(map[string]string{"LROSINK_JWKS_URL": "file:jwks.json"}), Serve(local()))
	if err == nil || !strings.HasPrefix(err.Error(), "LROSINK_JWKS_URL:") {
		t.Fatalf("a relative file URL: %v", err)
	}
}

// TestDefaultsAreTheComponents: each default is the one its component
// exports, not a copy that could drift from it.
func TestDefaultsAreTheComponents(t *testing.T) {
	c, err := Load(env(nil), Serve(local()))
	if err != nil {
		t.Fatal(err)
	}
	if c.ClaimLease != ingest.DefaultLease || c.StuckAfter != reconcile.DefaultStuckAfter || c.WebhookDeadline != webhook.DefaultDeadline {
		t.Fatalf("lease %s, stuck after %s, webhook deadline %s: want ingest.DefaultLease, reconcile.DefaultStuckAfter, webhook.DefaultDeadline",
			c.ClaimLease, c.StuckAfter, c.WebhookDeadline)
	}
}

// TestClaimLeaseFloor: a lease under twice the webhook deadline would let
// a redelivery seize a claim whose holder is still at work; it is refused
// at start-up, naming the variable and the floor.
func TestClaimLeaseFloor(t *testing.T) {
	for _, c := range []struct {
		lease, deadline string
		ok              bool
	}{
		{"1ns", "", false},
		{"1ms", "", false},
		{"19s", "", false},
		{"20s", "", true},
		{"1m", "31s", false},
		{"1m", "30s", true},
		{"999ms", "100ms", false}, // never under 1s, however short the deadline
		{"1s", "500ms", true},
	} {
		_, err := Load(env(map[string]string{"LROSINK_CLAIM_LEASE": c.lease, "LROSINK_WEBHOOK_DEADLINE": c.deadline}), Serve(local()))
		switch {
		case c.ok && err != nil:
			t.Errorf("lease %s, deadline %q: %v", c.lease, c.deadline, err)
		case !c.ok && (err == nil || !strings.HasPrefix(err.Error(), "LROSINK_CLAIM_LEASE: ") || !strings.Contains(err.Error(), "floor")):
			t.Errorf("lease %s, deadline %q: %v; want one line naming LROSINK_CLAIM_LEASE and its floor", c.lease, c.deadline, err)
		}
	}
}

// TestRetentionFloor: under 7 days is refused (start-up exits 2), days and
// Go durations are read alike.
func TestRetentionFloor(t *testing.T) {
	for v, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "168h": 7 * 24 * time.Hour, "400d": 400 * 24 * time.Hour} {
		c, err := Load(env(map[string]string{"LROSINK_RETENTION": v}), Serve(local()))
		if err != nil || c.Retention != want {
			t.Errorf("LROSINK_RETENTION=%s: %v, %v; want %v", v, c.Retention, err, want)
		}
	}
	for _, v := range []string{"6d", "167h", "24h", "0d", "-5d", "forever", "1.5d"} {
		if _, err := Load(env(map[string]string{"LROSINK_RETENTION": v}), Serve(local())); err == nil || !strings.HasPrefix(err.Error(), "LROSINK_RETENTION:") {
			t.Errorf("LROSINK_RETENTION=%s: error %v, want one naming the variable", v, err)
		}
	}
}

// TestIntentGrace: LROSINK_INTENT_GRACE defaults to an hour, takes a Go
// duration of at least a minute, and anything else is one line naming it.
func TestIntentGrace(t *testing.T) {
	if c, err := Load(env(nil), Serve(local())); err != nil || c.IntentGrace != time.Hour {
		t.Fatalf("default: %v, %v; want 1h", c.IntentGrace, err)
	}
	for v, want := range map[string]time.Duration{"1m": time.Minute, "90m": 90 * time.Minute, " 24h ": 24 * time.Hour} {
		if c, err := Load(env(map[string]string{"LROSINK_INTENT_GRACE": v}), Serve(local())); err != nil || c.IntentGrace != want {
			t.Errorf("LROSINK_INTENT_GRACE=%q: %v, %v; want %v", v, c.IntentGrace, err, want)
		}
	}
	for _, v := range []string{"59s", "0s", "-1h", "1", "an hour"} {
		_, err := Load(env(map[string]string{"LROSINK_INTENT_GRACE": v}), Serve(local()))
		if err == nil || !strings.HasPrefix(err.Error(), "LROSINK_INTENT_GRACE: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("LROSINK_INTENT_GRACE=%q: error %v, want one line naming the variable", v, err)
		}
	}
}

// TestReconcileURL: LROSINK_RECONCILE_URL is an absolute http(s) URL with
// a host; anything else names the variable and is refused at start-up.
func TestReconcileURL(t *testing.T) {
	const u = "https://lrosink-reconcile-123.europe-west1.run.app"
	c, err := Load(env(map[string]string{"LROSINK_RECONCILE_URL": " " + u + " "}), Serve(local()))
	if err != nil || c.ReconcileURL != u {
		t.Fatalf("%s: %q, %v", u, c.ReconcileURL, err)
	}
	for _, bad := range []string{"lrosink-reconcile", "ftp://host/x", "https://", "https://user:pw@host/"} {
		_, err := Load(env(map[string]string{"LROSINK_RECONCILE_URL": bad}), Serve(local()))
		if err == nil || !strings.Contains(err.Error(), "LROSINK_RECONCILE_URL") || strings.Contains(err.Error(), "pw") {
			t.Errorf("%q: %v, want a refusal naming LROSINK_RECONCILE_URL", bad, err)
		}
	}
}
