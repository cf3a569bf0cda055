package deploy_test

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// The Console service's actions (Replay, Check now, Publish now) are
// carried out by the Reconcile service, which the Console calls as itself:
// its runtime account holds roles/run.invoker on the Reconcile service and
// on nothing else, and keeps its read-only ledger role, with no write
// role, no topic and no secret of its own. LROSINK_RECONCILE_URL tells it
// where Reconcile is, and Reconcile has an instance to spare for it.
func TestConsoleInvokesReconcileOnly(t *testing.T) {
	c := loadConfig(t)
	const console = `google_service_account.runtime["console"].member`
	const reconcile = `google_cloud_run_v2_service.service["reconcile"]`
	for _, overrides := range []map[string]string{nil, everyOptional} {
		e, err := newEvaluator(c, overrides)
		if err != nil {
			t.Fatal(err)
		}
		invoker := 0
		for _, g := range runGrants(t, e) {
			if g.member != console {
				continue
			}
			if g.role != "roles/run.invoker" || g.service != reconcile {
				t.Errorf("%s: the Console's account holds %s on %s: it may only invoke Reconcile", g.from, g.role, g.service)
				continue
			}
			invoker++
		}
		if invoker != 1 {
			t.Errorf("the Console's account has roles/run.invoker on %s %d times, want once: its actions could not reach Reconcile", reconcile, invoker)
		}
		var roles []string
		for _, typ := range []string{"google_project_iam_member", "google_project_iam_binding", "google_pubsub_topic_iam_member",
			"google_pubsub_topic_iam_binding", "google_secret_manager_secret_iam_member", "google_firestore_database_iam_member"} {
			for _, g := range e.ofType(typ) {
				role, _ := g.str(nil, "role")
				members := []string{}
				if m, ok := g.str(nil, "member"); ok {
					members = append(members, m)
				} else if attr(g.Body, "members") != nil {
					members = stringList(t, g, "members")
				}
				for _, m := range members {
					if m == console {
						roles = append(roles, typ+" "+role)
					}
				}
			}
		}
		if len(roles) != 1 || roles[0] != "google_project_iam_member roles/datastore.viewer" {
			t.Errorf("the Console's account holds %v; want the read-only ledger role (roles/datastore.viewer) alone: no write role, topic or secret", roles)
		}
		url := ""
		for _, svc := range e.ofType("google_cloud_run_v2_service") {
			if functionTarget(svc) == "Reconcile" {
				// One instance beside a pass, for an action: with
				// concurrency 1 it would wait for the pass to end.
				maxi := svc.val(bodyOf(child(bodyOf(child(svc.Body, "template")), "scaling")), "max_instance_count")
				if maxi == cty.NilVal || maxi.Type() != cty.Number {
					t.Errorf("%s: max_instance_count cannot be evaluated", svc)
				} else if n, _ := maxi.AsBigFloat().Int64(); n < 2 {
					t.Errorf("%s: max_instance_count %d: a console action would wait for a running pass; want at least 2", svc, n)
				}
			}
			if functionTarget(svc) != "Console" {
				continue
			}
			for _, v := range envs(svc) {
				if v.name == "LROSINK_RECONCILE_URL" {
					url = v.value
				}
			}
		}
		if !strings.HasPrefix(url, "https://") || !strings.Contains(url, "-reconcile-") || !strings.HasSuffix(url, ".run.app") {
			t.Errorf("the Console's LROSINK_RECONCILE_URL is %q, want the Reconcile service's https://…-reconcile-….run.app", url)
		}
	}
}
