package deploy_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// runGrant is one role on one Cloud Run service for one member: a
// google_cloud_run_v2_service_iam_member, or one member of a
// google_cloud_run_v2_service_iam_binding (authoritative for its role).
type runGrant struct {
	from          instance
	service       string // the service's symbol, google_cloud_run_v2_service.service["webhook"]
	role, member  string
	authoritative bool
}

// runGrants lists the grants on Cloud Run services as e evaluates them; a
// binding whose members cannot be evaluated is reported.
func runGrants(t *testing.T, e *evaluator) []runGrant {
	t.Helper()
	var out []runGrant
	for _, g := range e.ofType("google_cloud_run_v2_service_iam_member") {
		role, _ := g.str(nil, "role")
		member, _ := g.str(nil, "member")
		name, _ := g.str(nil, "name")
		out = append(out, runGrant{from: g, service: resourceOf(name), role: role, member: member})
	}
	for _, g := range e.ofType("google_cloud_run_v2_service_iam_binding") {
		role, _ := g.str(nil, "role")
		name, _ := g.str(nil, "name")
		for _, m := range stringList(t, g, "members") {
			out = append(out, runGrant{from: g, service: resourceOf(name), role: role, member: m, authoritative: true})
		}
	}
	return out
}

// stringList evaluates a list or set attribute of strings (symbols
// included).
func stringList(t *testing.T, in instance, name string) []string {
	t.Helper()
	v := in.val(nil, name)
	if v == cty.NilVal || !v.IsWhollyKnown() || !v.CanIterateElements() {
		t.Errorf("%s: %s cannot be evaluated", in, name)
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, x := it.Element()
		if x.Type() != cty.String {
			t.Errorf("%s: %s holds a %s", in, name, x.Type().FriendlyName())
			continue
		}
		out = append(out, x.AsString())
	}
	return out
}

// roleGrants is what the configuration declares for one role on one
// service: whether a binding owns it (and its members), and the members
// granted additively.
type roleGrants struct {
	bound    bool
	members  []string // the binding's
	additive []string // _iam_member grants
}

// planDrift says whether `terraform plan` shows a change for the role when
// its members found in the service's IAM policy are found: a binding owns
// the role's whole member list (any other member is drift, removed by the
// next apply), an _iam_member owns its one member (present: nothing to do,
// whatever else holds the role). These are the google provider's
// documented semantics of the two resources ("authoritative for a given
// role" and "non-authoritative", registry.terraform.io/providers/hashicorp/google/latest/docs/resources/cloud_run_v2_service_iam).
func planDrift(g roleGrants, found []string) bool {
	for _, m := range g.additive {
		if !slices.Contains(found, m) {
			return true
		}
	}
	if !g.bound {
		return false
	}
	want := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(g.members), g.additive...))))
	have := slices.Compact(slices.Sorted(slices.Values(found)))
	return !slices.Equal(want, have)
}

// invokerGrants gathers roles/run.invoker per service symbol.
func invokerGrants(t *testing.T, e *evaluator) map[string]*roleGrants {
	t.Helper()
	out := map[string]*roleGrants{}
	at := func(svc string) *roleGrants {
		if out[svc] == nil {
			out[svc] = &roleGrants{}
		}
		return out[svc]
	}
	for _, b := range e.ofType("google_cloud_run_v2_service_iam_binding") {
		if role, _ := b.str(nil, "role"); role == "roles/run.invoker" {
			name, _ := b.str(nil, "name")
			g := at(resourceOf(name))
			if g.bound {
				t.Errorf("%s: a second roles/run.invoker binding on %s: two authoritative owners of one role fight", b, resourceOf(name))
			}
			g.bound = true
			g.members = append(g.members, stringList(t, b, "members")...)
		}
	}
	for _, m := range e.ofType("google_cloud_run_v2_service_iam_member") {
		if role, _ := m.str(nil, "role"); role == "roles/run.invoker" {
			name, _ := m.str(nil, "name")
			member, _ := m.str(nil, "member")
			at(resourceOf(name)).additive = append(at(resourceOf(name)).additive, member)
		}
	}
	return out
}

// Every invoker grant is authoritative: each service has one
// roles/run.invoker binding holding exactly its entry's invokers, and no
// _iam_member grants the role. So an allUsers (or any) member added by
// hand on a service shows as drift in the plan and is removed by the next
// apply: the test replays what the plan compares, for every service, with
// and without invokers configured.
func TestEveryInvokerGrantIsAuthoritative(t *testing.T) {
	c := loadConfig(t)
	for _, overrides := range []map[string]string{nil, everyOptional} {
		label := "defaults"
		if overrides != nil {
			label = "with invokers"
		}
		e, err := newEvaluator(c, overrides)
		if err != nil {
			t.Fatal(err)
		}
		grants := invokerGrants(t, e)
		svcs := e.ofType("google_cloud_run_v2_service")
		if len(svcs) == 0 {
			t.Fatal("no services")
		}
		for _, svc := range svcs {
			g := grants[svc.addr()]
			if g == nil || !g.bound {
				t.Errorf("%s: %s has no roles/run.invoker binding: its invokers are not authoritative", label, svc.addr())
				continue
			}
			if len(g.additive) > 0 {
				t.Errorf("%s: %s: roles/run.invoker also granted by _iam_member to %v: additive grants beside the binding", label, svc.addr(), g.additive)
			}
			if planDrift(*g, g.members) {
				t.Errorf("%s: %s: the plan shows drift on the policy it declares", label, svc.addr())
			}
			for _, handAdded := range []string{"allUsers", "allAuthenticatedUsers", "user:someone@example.com"} {
				if slices.Contains(g.members, handAdded) {
					continue // declared (the Webhook's allUsers, when chosen)
				}
				if !planDrift(*g, append(slices.Clone(g.members), handAdded)) {
					t.Errorf("%s: %s: %s added by hand as an invoker would not show in terraform plan", label, svc.addr(), handAdded)
				}
			}
		}
	}
	// The members are the entries' invokers: the Scheduler's, the
	// fan-out's and the Console's accounts on Reconcile, the configured ones on Register and
	// the Console, allUsers on the Webhook only when chosen.
	e, err := newEvaluator(c, everyOptional)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for svc, g := range invokerGrants(t, e) {
		got[svc] = slices.Sorted(slices.Values(g.members))
	}
	want := map[string][]string{
		`google_cloud_run_v2_service.service["webhook"]`:   {"allUsers"},
		`google_cloud_run_v2_service.service["reconcile"]`: {"google_service_account.reconcile_fanout.member", `google_service_account.runtime["console"].member`, "google_service_account.scheduler.member"},
		`google_cloud_run_v2_service.service["register"]`:  {"serviceAccount:submitter@p.iam.gserviceaccount.com"},
		`google_cloud_run_v2_service.service["console"]`:   {"group:oncall@example.com"},
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("invokers %v, want %v", got, want)
	}
}

// The drift model itself: an additive grant does not see a hand-added
// member, a binding does, an empty binding too.
func TestPlanDriftModel(t *testing.T) {
	member := roleGrants{additive: []string{"serviceAccount:a"}}
	binding := roleGrants{bound: true, members: []string{"serviceAccount:a"}}
	empty := roleGrants{bound: true}
	for _, c := range []struct {
		g     roleGrants
		found []string
		drift bool
	}{
		{member, []string{"serviceAccount:a"}, false},
		{member, []string{"serviceAccount:a", "allUsers"}, false},
		{member, nil, true},
		{binding, []string{"serviceAccount:a"}, false},
		{binding, []string{"serviceAccount:a", "allUsers"}, true},
		{binding, nil, true},
		{empty, nil, false},
		{empty, []string{"allUsers"}, true},
		{roleGrants{}, []string{"allUsers"}, false},
	} {
		if got := planDrift(c.g, c.found); got != c.drift {
			t.Errorf("%+v with %v found: drift %v, want %v", c.g, c.found, got, c.drift)
		}
	}
}
