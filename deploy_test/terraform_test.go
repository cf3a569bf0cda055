package deploy_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

var functions = []string{"Webhook", "Reconcile", "Register", "Console"}

// Every Cloud Run service runs as its own service account: a compromised
// or buggy function can only do what its own account may do.
func TestEachServiceHasItsOwnServiceAccount(t *testing.T) {
	c := loadConfig(t)
	byTarget := c.serviceByTarget(t)
	for _, f := range functions {
		if byTarget[f].Block == nil {
			t.Errorf("no google_cloud_run_v2_service with FUNCTION_TARGET=%s", f)
		}
	}
	owner := map[string]string{} // service account -> service
	for _, svc := range c.services() {
		sa, ok := svc.str(bodyOf(child(svc.Body, "template")), "service_account")
		if !ok {
			t.Errorf("%s: template has no service_account (it would run as the Compute Engine default account)", svc)
			continue
		}
		if !strings.HasPrefix(sa, "google_service_account.") || !strings.HasSuffix(sa, ".email") {
			t.Errorf("%s: template.service_account = %s, want the email of a google_service_account", svc, sa)
			continue
		}
		acct := resourceOf(sa)
		if prev, dup := owner[acct]; dup {
			t.Errorf("%s and %s share %s: each service needs its own", prev, svc.addr(), acct)
		}
		owner[acct] = svc.addr()
	}
}

// publicAccess evaluates the configuration with one value of
// var.webhook_public_access and returns, per service, how it is public:
// "invoker_iam_disabled", "allUsers", "allAuthenticatedUsers" or "".
func publicAccess(t *testing.T, c *config, access string) map[string][]string {
	t.Helper()
	e, err := newEvaluator(c, map[string]string{"webhook_public_access": fmt.Sprintf("%q", access)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, svc := range e.ofType("google_cloud_run_v2_service") {
		if v := svc.val(nil, "invoker_iam_disabled"); v != cty.NilVal && v.Type() == cty.Bool && v.True() {
			out[svc.addr()] = append(out[svc.addr()], "invoker_iam_disabled")
		} else if v == cty.NilVal && attr(svc.Body, "invoker_iam_disabled") != nil {
			t.Errorf("%s: invoker_iam_disabled cannot be evaluated", svc)
		}
	}
	for _, g := range runGrants(t, e) {
		if g.member != "allUsers" && g.member != "allAuthenticatedUsers" {
			continue
		}
		if g.role != "roles/run.invoker" {
			t.Errorf("%s: %s granted %s", g.from, g.member, g.role)
		}
		out[g.service] = append(out[g.service], g.member)
	}
	return out
}

// Only the Webhook may be invoked without credentials: Gemini cannot present
// Google credentials and the handler verifies signatures. Reconcile,
// Register and Console are protected by IAM. The Webhook is public in
// exactly one way, chosen by var.webhook_public_access.
func TestOnlyWebhookIsPublic(t *testing.T) {
	c := loadConfig(t)
	webhook := c.serviceByTarget(t)["Webhook"].addr()
	for access, want := range map[string]string{"invoker-iam-disabled": "invoker_iam_disabled", "allUsers": "allUsers"} {
		got := publicAccess(t, c, access)
		if !slices.Equal(got[webhook], []string{want}) {
			t.Errorf("webhook_public_access=%q: the Webhook (%s) is public by %v, want exactly [%s]", access, webhook, got[webhook], want)
		}
		for svc, how := range got {
			if svc != webhook {
				t.Errorf("webhook_public_access=%q: %s is public (%v); only the Webhook may be", access, svc, how)
			}
		}
	}
	public := regexp.MustCompile(`\ball(Authenticated)?Users\b`)
	for _, r := range c.resources {
		if strings.HasPrefix(r.Labels[0], "google_cloud_run_v2_service_iam_") {
			continue // evaluated above
		}
		hclsyntax.VisitAll(r.Body, func(n hclsyntax.Node) hcl.Diagnostics {
			if a, ok := n.(*hclsyntax.Attribute); ok && public.MatchString(r.text(a.Expr)) {
				t.Errorf("%s grants something to allUsers/allAuthenticatedUsers: only the Webhook's run.invoker may be public", r)
			}
			return nil
		})
	}
	// Variables feeding invoker lists must not default to public members.
	for _, v := range c.variables {
		if d := attr(v.Body, "default"); d != nil && public.MatchString(v.text(d.Expr)) {
			t.Errorf("%s: default contains allUsers/allAuthenticatedUsers", v)
		}
	}
}

// Secret values never appear in the configuration (and so never in the
// state): no literal secret in variable defaults, env values, locals or
// outputs, no secret version with secret_data, and every secret-looking env
// var comes from Secret Manager through value_source.
func TestNoSecretValues(t *testing.T) {
	c := loadConfig(t)
	// Bare prefixes, checked where a value (not prose) is expected.
	prefixes := []string{"whsec_", "-----BEGIN", "AIza", "secret_data"}
	hasPrefix := func(s string) string {
		for _, p := range prefixes {
			if strings.Contains(s, p) {
				return p
			}
		}
		return ""
	}
	for _, v := range c.variables {
		if d := attr(v.Body, "default"); d != nil {
			if p := hasPrefix(v.text(d.Expr)); p != "" {
				t.Errorf("%s: default contains %q", v, p)
			}
		}
		if strings.Contains(strings.ToLower(v.addr()), "secret_value") || strings.Contains(strings.ToLower(v.addr()), "api_key_value") {
			t.Errorf("%s: a variable carrying a secret value would put it into the state", v)
		}
	}
	for name, a := range c.locals {
		b := c.localsSrc[name]
		if p := hasPrefix(b.text(a.Expr)); p != "" {
			t.Errorf("local.%s (%s): contains %q", name, b, p)
		}
	}
	for _, o := range c.outputs {
		a := attr(o.Body, "value")
		if a == nil {
			continue
		}
		if p := hasPrefix(o.text(a.Expr)); p != "" {
			t.Errorf("%s: value contains %q", o, p)
		}
		for _, r := range refs(a.Expr) {
			if strings.HasPrefix(r, "google_secret_manager_secret_version.") || strings.HasPrefix(r, "data.google_secret_manager_secret_version") {
				t.Errorf("%s: outputs a secret version (%s)", o, r)
			}
		}
	}
	secretName := regexp.MustCompile(`(?i)(SECRET|API_KEY|TOKEN|PASSWORD|PRIVATE)`)
	for _, svc := range c.services() {
		for _, e := range envs(svc) {
			if e.valueSource {
				continue
			}
			if p := hasPrefix(e.value); p != "" {
				t.Errorf("%s: env %s value contains %q", svc, e.name, p)
			}
			if secretName.MatchString(e.name) {
				t.Errorf("%s: env %s is set by value; a secret must come from value_source.secret_key_ref", svc, e.name)
			}
		}
	}
	for _, r := range c.ofType("google_secret_manager_secret_version") {
		if attr(r.Body, "secret_data") != nil {
			t.Errorf("%s: secret_data puts the secret value into the Terraform state; add versions with gcloud / lrosink webhooks instead", r)
		}
	}
	for _, d := range c.data {
		if strings.HasPrefix(d.Labels[0], "google_secret_manager_secret_version") {
			t.Errorf("%s: reading a secret version in Terraform stores its value in the state", d)
		}
	}
	// Anywhere in the files: nothing that looks like an actual secret.
	realSecret := regexp.MustCompile(`whsec_[A-Za-z0-9+/=]{8,}|-----BEGIN [A-Z ]*PRIVATE KEY-----|AIza[0-9A-Za-z_-]{30,}`)
	for _, r := range c.all {
		if m := realSecret.FindString(string(r.src[r.Range().Start.Byte:r.Range().End.Byte])); m != "" {
			t.Errorf("%s: contains something that looks like a secret (%.10s...)", r, m)
		}
	}
}

// Each secret is readable only by the accounts of the services that mount
// it, and every mounted secret is readable by its service.
func TestSecretAccessIsPerService(t *testing.T) {
	c := loadConfig(t)
	mounts := map[string][]string{} // secret -> service accounts mounting it
	for _, svc := range c.services() {
		sa, _ := svc.str(bodyOf(child(svc.Body, "template")), "service_account")
		for _, e := range envs(svc) {
			if !e.valueSource {
				continue
			}
			if !strings.HasPrefix(e.secret, "google_secret_manager_secret.") {
				t.Errorf("%s: env %s must reference one google_secret_manager_secret (got %q)", svc, e.name, e.secret)
				continue
			}
			mounts[resourceOf(e.secret)] = append(mounts[resourceOf(e.secret)], resourceOf(sa))
		}
	}
	targets := c.serviceByTarget(t)
	// The Webhook needs the API key too: it confirms dynamic-webhook hints.
	wantMount := map[string][]string{"Webhook": {"LROSINK_WEBHOOK_SECRETS", "GEMINI_API_KEY"}, "Reconcile": {"GEMINI_API_KEY"}}
	for fn, names := range wantMount {
		svc := targets[fn]
		for _, env := range names {
			found := false
			for _, e := range envs(svc) {
				if e.name == env && e.valueSource {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: %s must come from Secret Manager (value_source.secret_key_ref)", svc, env)
			}
		}
	}
	granted := map[string][]string{}
	for _, g := range c.eval.ofType("google_secret_manager_secret_iam_member") {
		secret, _ := g.str(nil, "secret_id")
		member, _ := g.str(nil, "member")
		if !strings.HasPrefix(secret, "google_secret_manager_secret.") || !strings.HasPrefix(member, "google_service_account.") {
			t.Errorf("%s: want one secret and one google_service_account member (got %q, %q)", g, secret, member)
			continue
		}
		s, m := resourceOf(secret), resourceOf(member)
		if !slices.Contains(mounts[s], m) {
			t.Errorf("%s: %s may read secret %s but runs no service that mounts it", g, m, s)
		}
		granted[s] = append(granted[s], m)
	}
	for s, sas := range mounts {
		for _, sa := range sas {
			if !slices.Contains(granted[s], sa) {
				t.Errorf("secret %s is mounted by %s's service but not granted to it (the revision would fail to start)", s, sa)
			}
		}
	}
	for _, g := range append(c.ofType("google_project_iam_member"), c.ofType("google_project_iam_binding")...) {
		if role, _ := literal(attr(g.Body, "role")); strings.HasPrefix(role, "roles/secretmanager.") {
			t.Errorf("%s: project-level %s would open every secret; grant it on the secret", g, role)
		}
	}
}

// Cloud Scheduler calls the Reconcile service, authenticated with an OIDC
// token of an account that may invoke exactly that service.
func TestSchedulerCallsReconcileWithOIDC(t *testing.T) {
	c := loadConfig(t)
	reconcile := c.serviceByTarget(t)["Reconcile"].addr()
	jobs := c.eval.ofType("google_cloud_scheduler_job")
	if len(jobs) == 0 {
		t.Fatal("no google_cloud_scheduler_job: nothing would run Reconcile")
	}
	for _, job := range jobs {
		ht := child(job.Body, "http_target")
		if ht == nil {
			t.Errorf("%s: no http_target", job)
			continue
		}
		if uri, _ := job.str(ht.Body, "uri"); uri != reconcile+".uri" {
			t.Errorf("%s: http_target.uri = %q, want %s.uri (the FUNCTION_TARGET=Reconcile service)", job, uri, reconcile)
		}
		if m, _ := job.str(ht.Body, "http_method"); m != "POST" {
			t.Errorf("%s: http_method = %q, want POST", job, m)
		}
		if child(ht.Body, "oauth_token") != nil {
			t.Errorf("%s: oauth_token is for Google APIs; Cloud Run needs oidc_token", job)
		}
		oidc := child(ht.Body, "oidc_token")
		if oidc == nil {
			t.Errorf("%s: http_target has no oidc_token: Reconcile would answer 403", job)
			continue
		}
		email, _ := job.str(oidc.Body, "service_account_email")
		if !strings.HasPrefix(email, "google_service_account.") {
			t.Errorf("%s: oidc_token.service_account_email must reference a google_service_account", job)
			continue
		}
		sa := resourceOf(email)
		if aud, ok := job.str(oidc.Body, "audience"); ok && aud != reconcile+".uri" {
			t.Errorf("%s: oidc_token.audience = %q, want the Reconcile service URL", job, aud)
		}
		for _, svc := range c.services() {
			if runAs, _ := svc.str(bodyOf(child(svc.Body, "template")), "service_account"); resourceOf(runAs) == sa {
				t.Errorf("%s: the scheduler uses %s's runtime account; give it its own", job, svc)
			}
		}
		// The scheduler account may invoke Reconcile, and nothing else.
		invokes := map[string]bool{}
		for _, g := range runGrants(t, c.eval) {
			if resourceOf(g.member) == sa {
				invokes[g.service] = g.role == "roles/run.invoker"
			}
		}
		if !invokes[reconcile] {
			t.Errorf("%s: %s has no roles/run.invoker on %s", job, sa, reconcile)
		}
		for s := range invokes {
			if s != reconcile {
				t.Errorf("%s: the scheduler account also has a role on %s", job, s)
			}
		}
	}
}

// Hygiene rules for the rest of the configuration.
func TestTerraformHygiene(t *testing.T) {
	c := loadConfig(t)

	pinned := false
	for _, tb := range c.terraform {
		rp := child(tb.Body, "required_providers")
		if a := attr(bodyOf(rp), "google"); a != nil && strings.Contains(tb.text(a.Expr), `"~> 7.45"`) {
			pinned = true
		}
	}
	if !pinned {
		t.Error(`the google provider must be pinned with version = "~> 7.45" in required_providers`)
	}

	for _, v := range c.variables {
		if _, ok := literal(attr(v.Body, "description")); !ok {
			t.Errorf("%s: no description", v)
		}
		if attr(v.Body, "type") == nil {
			t.Errorf("%s: no type", v)
		}
	}

	want := []string{"template[0].containers[0].image", "client", "client_version"}
	for _, svc := range c.ofType("google_cloud_run_v2_service") {
		var got []string
		if a := attr(bodyOf(child(svc.Body, "lifecycle")), "ignore_changes"); a != nil {
			if tup, ok := a.Expr.(*hclsyntax.TupleConsExpr); ok {
				for _, e := range tup.Exprs {
					got = append(got, strings.Join(strings.Fields(svc.text(e)), ""))
				}
			}
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: lifecycle.ignore_changes lacks %s (Cloud Build owns the image; Terraform would roll it back)", svc, w)
			}
		}
		if attr(svc.Body, "deletion_protection") == nil {
			t.Errorf("%s: set deletion_protection explicitly (var.deletion_protection)", svc)
		}
	}

	for _, r := range c.ofType("google_project_service") {
		if a := attr(r.Body, "disable_on_destroy"); a == nil || r.text(a.Expr) != "false" {
			t.Errorf("%s: disable_on_destroy must be false (this configuration does not own the project)", r)
		}
	}

	basic := regexp.MustCompile(`"roles/(owner|editor|viewer)"`)
	// Firestore has no data-plane IAM below the project: datastore.user
	// (read-write) for the ingest paths, datastore.viewer (read-only) for
	// the console.
	// Approving a held rollout is a permission on the project's builds.
	projectRoles := []string{"roles/datastore.user", "roles/datastore.viewer", "roles/logging.logWriter", "roles/cloudbuild.builds.approver"}
	for _, r := range c.resources {
		if m := basic.FindString(string(r.src[r.Range().Start.Byte:r.Range().End.Byte])); m != "" {
			t.Errorf("%s: basic role %s", r, m)
		}
		// Authoritative IAM removes grants made outside this configuration:
		// only where that is the point (who may invoke a service,
		// TestEveryInvokerGrantIsAuthoritative), and never a whole policy.
		if strings.HasSuffix(r.Labels[0], "_iam_policy") {
			t.Errorf("%s: a whole authoritative policy would remove every grant made outside this configuration", r)
		}
		if role, _ := literal(attr(r.Body, "role")); strings.HasSuffix(r.Labels[0], "_iam_binding") && (r.Labels[0] != "google_cloud_run_v2_service_iam_binding" || role != "roles/run.invoker") {
			t.Errorf("%s: authoritative binding of %q: only roles/run.invoker on the services is owned outright; use _iam_member", r, role)
		}
	}

	for _, g := range c.eval.ofType("google_project_iam_member") {
		if role, _ := g.str(nil, "role"); !slices.Contains(projectRoles, role) {
			t.Errorf("%s: project-level %q; grant it on the resource, or add it to this test's allowlist with a reason", g, role)
		}
	}

	db := c.eval.ofType("google_firestore_database")
	if len(db) != 1 {
		t.Fatalf("want one google_firestore_database, got %d", len(db))
	}
	// (default) with the default name_prefix: where deployments before the
	// names were derived keep their ledger.
	for name, want := range map[string]string{
		"name": "(default)", "type": "FIRESTORE_NATIVE", "concurrency_mode": "OPTIMISTIC",
		"delete_protection_state": "DELETE_PROTECTION_ENABLED", "deletion_policy": "ABANDON",
	} {
		if got, _ := db[0].str(nil, name); got != want {
			t.Errorf("%s: %s = %q, want %q", db[0], name, got, want)
		}
	}

	for _, s := range c.ofType("google_pubsub_subscription") {
		ep := child(s.Body, "expiration_policy")
		if ttl, _ := literal(attr(bodyOf(ep), "ttl")); ep == nil || ttl != "" || attr(ep.Body, "ttl") == nil {
			t.Errorf(`%s: expiration_policy { ttl = "" } missing: an idle subscription would be deleted after 31 days`, s)
		}
	}
	results := c.resources["google_pubsub_subscription.results"]
	if results.Block == nil {
		t.Fatal("no google_pubsub_subscription.results")
	}
	for _, a := range []string{"enable_exactly_once_delivery", "enable_message_ordering"} {
		if x := attr(results.Body, a); x == nil || results.text(x.Expr) != "true" {
			t.Errorf("%s: %s must be true", results, a)
		}
	}
	if child(results.Body, "dead_letter_policy") == nil || child(results.Body, "retry_policy") == nil {
		t.Errorf("%s: needs dead_letter_policy and retry_policy", results)
	}
}

// The build flags of the container binary are defined once, in
// scripts/build-flags.sh, which both the Dockerfile and check-deploy.sh use.
func TestContainerBuildFlagsDefinedOnce(t *testing.T) {
	docker := readFile(t, "../Dockerfile")
	check := readFile(t, "../scripts/check-deploy.sh")
	flags := readFile(t, "../scripts/build-flags.sh")
	if !strings.Contains(docker, "scripts/build-flags.sh") {
		t.Error("Dockerfile does not build with scripts/build-flags.sh")
	}
	if !regexp.MustCompile(`(?m)^\s*(source|\.) scripts/build-flags\.sh`).MatchString(check) {
		t.Error("scripts/check-deploy.sh does not source scripts/build-flags.sh")
	}
	goBuild := regexp.MustCompile(`(?m)^[^#\n]*\bgo build\b`)
	for name, s := range map[string]string{"Dockerfile": docker, "scripts/check-deploy.sh": check} {
		if goBuild.MatchString(s) {
			t.Errorf("%s runs go build itself; build through scripts/build-flags.sh", name)
		}
	}
	for _, f := range []string{"CGO_ENABLED=0", "-trimpath", "-s -w", "./cmd/server"} {
		if !strings.Contains(flags, f) {
			t.Errorf("scripts/build-flags.sh lacks %s", f)
		}
	}
	if !strings.Contains(docker, "gcr.io/distroless/static-debian12:nonroot") || !regexp.MustCompile(`(?m)^USER nonroot`).MatchString(docker) {
		t.Error("Dockerfile must run on gcr.io/distroless/static-debian12:nonroot as USER nonroot")
	}
}

func mapValues(m map[string]block) []block {
	out := make([]block, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// `terraform destroy` must not half-succeed: the resources holding data
// (results and dead letters, undelivered or kept for seeking back, the
// images, the ledger) stop it at plan time with prevent_destroy, before
// anything is deleted; the secrets and services refuse deletion while
// var.deletion_protection is on. docs/DEPLOY.md "Tearing down" has the
// steps to do it on purpose.
func TestDestroySafety(t *testing.T) {
	c := loadConfig(t)
	// The reconcile fan-out's topics and subscription hold only shard
	// requests, which the next tick publishes again: nothing to keep.
	fanout := fanOutTopic(c.serviceByTarget(t)["Reconcile"])
	worthless := map[string]bool{fanout: fanout != ""}
	for _, s := range c.ofType("google_pubsub_subscription") {
		if a := attr(s.Body, "topic"); a != nil && fanout != "" {
			if tp := refs(a.Expr); len(tp) == 1 && resourceOf(tp[0]) == fanout {
				worthless[s.addr()] = true
				if dl := attr(bodyOf(child(s.Body, "dead_letter_policy")), "dead_letter_topic"); dl != nil {
					for _, r := range refs(dl.Expr) {
						worthless[resourceOf(r)] = true
					}
				}
			}
		}
	}
	if len(worthless) < 3 {
		t.Errorf("found %d fan-out resources (%v): the fan-out topic, its push subscription and its dead-letter topic", len(worthless), worthless)
	}
	for _, typ := range []string{"google_pubsub_topic", "google_pubsub_subscription", "google_artifact_registry_repository", "google_firestore_database"} {
		rs := c.ofType(typ)
		if len(rs) == 0 {
			t.Errorf("no %s", typ)
		}
		for _, r := range rs {
			if worthless[r.addr()] {
				continue
			}
			if a := attr(bodyOf(child(r.Body, "lifecycle")), "prevent_destroy"); a == nil || r.text(a.Expr) != "true" {
				t.Errorf("%s: lifecycle { prevent_destroy = true } missing: it holds data `terraform destroy` would lose", r)
			}
		}
	}
	for _, typ := range []string{"google_secret_manager_secret", "google_cloud_run_v2_service"} {
		for _, r := range c.eval.ofType(typ) {
			if v := r.val(nil, "deletion_protection"); v == cty.NilVal || v.Type() != cty.Bool || !v.True() {
				t.Errorf("%s: deletion_protection must be on by default (var.deletion_protection)", r)
			}
		}
	}
	doc := readFile(t, "../docs/DEPLOY.md")
	if !strings.Contains(doc, "## Tearing down") || !strings.Contains(doc, "deletion_protection=false") || !strings.Contains(doc, "prevent_destroy") {
		t.Error(`docs/DEPLOY.md needs a "## Tearing down" section: deletion_protection=false, then prevent_destroy`)
	}
}

// The Webhook keeps CPU outside requests (its door work goes on after a 503
// deadline-exceeded answer), and a reconcile pass ends before Cloud
// Scheduler's attempt deadline.
func TestRuntimeSettings(t *testing.T) {
	c := loadConfig(t)
	targets := c.serviceByTarget(t)
	wh := targets["Webhook"]
	res := child(bodyOf(child(bodyOf(child(wh.Body, "template")), "containers")), "resources")
	if v := wh.val(bodyOf(res), "cpu_idle"); v == cty.NilVal || v.Type() != cty.Bool || v.True() {
		t.Errorf("%s: cpu_idle must be false: work detached from a 503 deadline-exceeded answer would run CPU-throttled", wh)
	}
	deadline := ""
	for _, e := range envs(targets["Reconcile"]) {
		if e.name == "LROSINK_RECONCILE_DEADLINE" {
			deadline = e.value
		}
	}
	jobs := c.eval.ofType("google_cloud_scheduler_job")
	if len(jobs) != 1 {
		t.Fatalf("want one scheduler job, got %d", len(jobs))
	}
	attempt, _ := jobs[0].str(nil, "attempt_deadline")
	d, err1 := time.ParseDuration(deadline)
	a, err2 := time.ParseDuration(attempt)
	if err1 != nil || err2 != nil || d <= 0 || d >= a {
		t.Errorf("Reconcile LROSINK_RECONCILE_DEADLINE = %q, Scheduler attempt_deadline = %q: the pass deadline must be a duration below the attempt deadline", deadline, attempt)
	}
	// Also for the shortest and the longest attempt deadline allowed.
	for _, ad := range []string{"15s", "1800s"} {
		e, err := newEvaluator(c, map[string]string{"reconcile_attempt_deadline": fmt.Sprintf("%q", ad)})
		if err != nil {
			t.Fatal(err)
		}
		for _, svc := range e.ofType("google_cloud_run_v2_service") {
			for _, ev := range envs(svc) {
				if ev.name != "LROSINK_RECONCILE_DEADLINE" {
					continue
				}
				d, err := time.ParseDuration(ev.value)
				a, _ := time.ParseDuration(ad)
				if err != nil || d <= 0 || d >= a {
					t.Errorf("reconcile_attempt_deadline=%s: LROSINK_RECONCILE_DEADLINE = %q, want a positive duration below it", ad, ev.value)
				}
			}
		}
	}
}
