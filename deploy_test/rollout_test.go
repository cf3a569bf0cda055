package deploy_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	"go.yaml.in/yaml/v3"
)

// iamGrant is one role for one member on one object, from any _iam_member
// or one member of any _iam_binding of the configuration.
type iamGrant struct {
	from                 instance
	object, role, member string
}

// iamObjectAttrs name the object an IAM resource grants on, by the suffix
// of its type.
var iamObjectAttrs = []string{"name", "topic", "subscription", "secret_id", "service_account_id", "repository", "bucket", "project"}

func iamGrants(t *testing.T, e *evaluator) []iamGrant {
	t.Helper()
	var out []iamGrant
	for _, b := range mapValues(e.c.resources) {
		typ := b.Labels[0]
		member, binding := strings.HasSuffix(typ, "_iam_member"), strings.HasSuffix(typ, "_iam_binding")
		if !member && !binding {
			continue
		}
		is, ok := e.instances(b)
		if !ok {
			t.Errorf("%s: for_each cannot be evaluated", b)
			continue
		}
		for _, in := range is {
			object := ""
			for _, a := range iamObjectAttrs {
				if v, ok := in.str(nil, a); ok {
					object = typ + " " + v
					break
				}
			}
			role, _ := in.str(nil, "role")
			if member {
				m, _ := in.str(nil, "member")
				out = append(out, iamGrant{in, object, role, m})
				continue
			}
			for _, m := range stringList(t, in, "members") {
				out = append(out, iamGrant{in, object, role, m})
			}
		}
	}
	return out
}

// accountOfOutput is the google_service_account an output names (its id).
func accountOfOutput(t *testing.T, c *config, output string) string {
	t.Helper()
	for _, o := range c.outputs {
		if o.Labels[0] == output {
			for _, r := range refs(attr(o.Body, "value").Expr) {
				if strings.HasPrefix(r, "google_service_account.") {
					return resourceOf(r)
				}
			}
		}
	}
	t.Fatalf("no output %s naming a google_service_account", output)
	return ""
}

// cloudBuildSteps are the steps of cloudbuild.yaml (id and script).
func cloudBuildSteps(t *testing.T) map[string]string {
	t.Helper()
	var cb struct {
		Steps []struct {
			ID   string   `yaml:"id"`
			Args []string `yaml:"args"`
		} `yaml:"steps"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "../cloudbuild.yaml")), &cb); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range cb.Steps {
		out[s.ID] = strings.Join(s.Args, "\n")
	}
	return out
}

// The build account runs `make test`, third-party code included: it may
// push the image and write logs, and holds nothing on Cloud Run and no
// actAs, so it cannot deploy. The deployer may update the services' image
// and act as their runtime accounts, and cannot create or delete a
// service (nor change who may invoke it).
func TestBuildCannotDeployAndDeployerCannotDelete(t *testing.T) {
	c := loadConfig(t)
	e, err := newEvaluator(c, map[string]string{"build_trigger": `{repository = "projects/p/locations/europe-west1/connections/github/repositories/lrosink", branch = "^main$"}`})
	if err != nil {
		t.Fatal(err)
	}
	build := accountOfOutput(t, c, "build_service_account")
	deployer := accountOfOutput(t, c, "deployer_service_account")
	if build == deployer {
		t.Fatalf("the build and the rollout run as the same account %s", build)
	}
	role := "google_project_iam_custom_role.deployer.name"
	allowed := map[string][]string{
		build: {
			"roles/artifactregistry.writer on google_artifact_registry_repository_iam_member google_artifact_registry_repository.images.name",
			"roles/logging.logWriter on google_project_iam_member var.project_id",
			"roles/storage.objectViewer on google_storage_bucket_iam_member google_storage_bucket.build_source.name",
		},
		deployer: {"roles/logging.logWriter on google_project_iam_member var.project_id"},
	}
	for _, svc := range e.ofType("google_cloud_run_v2_service") {
		sa, _ := svc.str(bodyOf(child(svc.Body, "template")), "service_account")
		allowed[deployer] = append(allowed[deployer],
			role+" on google_cloud_run_v2_service_iam_member "+svc.addr()+".name",
			"roles/iam.serviceAccountUser on google_service_account_iam_member "+resourceOf(sa)+".name")
	}
	got := map[string][]string{}
	for _, g := range iamGrants(t, e) {
		acct := resourceOf(g.member)
		if acct != build && acct != deployer {
			continue
		}
		got[acct] = append(got[acct], g.role+" on "+g.object)
		switch {
		case acct == build && (strings.HasPrefix(g.role, "roles/run.") || strings.HasPrefix(g.role, "google_project_iam_custom_role.")):
			t.Errorf("%s: the build account holds %s on %s: it could deploy", g.from, g.role, g.object)
		case acct == build && strings.HasPrefix(g.role, "roles/iam."):
			t.Errorf("%s: the build account holds %s on %s: it could act as another account", g.from, g.role, g.object)
		}
	}
	for acct, want := range allowed {
		slices.Sort(want)
		g := slices.Sorted(slices.Values(got[acct]))
		if !slices.Equal(g, want) {
			t.Errorf("%s holds\n  %s\nwant exactly\n  %s", acct, strings.Join(g, "\n  "), strings.Join(want, "\n  "))
		}
	}
	// The deployer's role: get and update, never create, delete or IAM.
	roles := e.ofType("google_project_iam_custom_role")
	if len(roles) != 1 {
		t.Fatalf("want the one custom role of the deployer, got %d", len(roles))
	}
	perms := stringList(t, roles[0], "permissions")
	for _, need := range []string{"run.services.get", "run.services.update"} {
		if !slices.Contains(perms, need) {
			t.Errorf("%s lacks %s: the rollout could not update a service", roles[0], need)
		}
	}
	for _, p := range perms {
		if !strings.HasPrefix(p, "run.") || strings.HasSuffix(p, ".delete") || strings.HasSuffix(p, ".create") || strings.Contains(p, "IamPolicy") || strings.HasPrefix(p, "run.jobs.") {
			t.Errorf("%s grants %s: the deployer gets and updates services, revisions and operations only", roles[0], p)
		}
	}
	// Nothing in cloudbuild.yaml, which the build account runs, deploys.
	for id, script := range cloudBuildSteps(t) {
		if strings.Contains(script, "gcloud run") || strings.Contains(script, "gcloud deploy") {
			t.Errorf("cloudbuild.yaml step %s deploys (%q): the build account runs it; the rollout trigger deploys", id, script)
		}
	}
	// The build trigger runs cloudbuild.yaml as the build account.
	for _, tr := range e.ofType("google_cloudbuild_trigger") {
		sa, _ := tr.str(nil, "service_account")
		if f, _ := tr.str(nil, "filename"); f == "cloudbuild.yaml" && sa != build+".id" {
			t.Errorf("%s runs cloudbuild.yaml as %q, want the build account %s", tr, sa, build)
		}
	}
}

// The rollout trigger runs as the deployer on Artifact Registry's
// notification of this instance's image, held for approval by default, and
// updates every service of local.services to the pushed digest: the list
// of services is written once.
func TestRolloutUpdatesEveryService(t *testing.T) {
	c := loadConfig(t)
	deployer := accountOfOutput(t, c, "deployer_service_account")
	var rollout []instance
	for _, tr := range c.eval.ofType("google_cloudbuild_trigger") {
		if child(tr.Body, "pubsub_config") != nil {
			rollout = append(rollout, tr)
		}
	}
	if len(rollout) != 1 {
		t.Fatalf("want one Pub/Sub-started rollout trigger, got %d", len(rollout))
	}
	tr := rollout[0]
	if sa, _ := tr.str(nil, "service_account"); sa != deployer+".id" {
		t.Errorf("%s runs as %q, want the deployer %s", tr, sa, deployer)
	}
	if topic, _ := tr.str(bodyOf(child(tr.Body, "pubsub_config")), "topic"); topic != "projects/var.project_id/topics/gcr" {
		t.Errorf("%s listens on %q, want Artifact Registry's gcr topic of the project", tr, topic)
	}
	image := c.eval.locals["image"].AsString()
	filter, _ := tr.str(nil, "filter")
	for _, want := range []string{`_ACTION == "INSERT"`, `_IMAGE_TAG.startsWith("` + image + `:")`, `_IMAGE_DIGEST.startsWith("` + image + `@sha256:")`} {
		if !strings.Contains(filter, want) {
			t.Errorf("%s: filter %q lacks %s: another image pushed to the project would roll out", tr, filter, want)
		}
	}
	if v := tr.val(bodyOf(child(tr.Body, "approval_config")), "approval_required"); v == cty.NilVal || !v.True() {
		t.Errorf("%s: approval_required is not true by default: any image pushed would go out unseen", tr)
	}
	subs := tr.val(nil, "substitutions")
	if subs == cty.NilVal || !subs.Type().IsObjectType() || !subs.Type().HasAttribute("_IMAGE_DIGEST") || subs.GetAttr("_IMAGE_DIGEST").AsString() != "$(body.message.data.digest)" {
		t.Errorf("%s: _IMAGE_DIGEST is not the notification's digest", tr)
	}
	updated := map[string]bool{}
	for _, st := range dynBlocks(bodyOf(child(tr.Body, "build")), "step", tr.ctx) {
		a := attr(st.body, "args")
		if a == nil {
			continue
		}
		v, diags := a.Expr.Value(st.ctx)
		if diags.HasErrors() {
			t.Errorf("%s: step args: %s", tr, diags.Error())
			continue
		}
		var args []string
		for it := v.ElementIterator(); it.Next(); {
			_, x := it.Element()
			args = append(args, x.AsString())
		}
		if len(args) < 4 || !slices.Equal(args[:3], []string{"run", "services", "update"}) || !slices.Contains(args, "--image=$_IMAGE_DIGEST") {
			t.Errorf("%s: step %v does not update one service to the pushed digest", tr, args)
			continue
		}
		updated[resourceOf(args[3])] = true
	}
	var services []string
	for _, svc := range c.services() {
		services = append(services, svc.addr())
	}
	if got := slices.Sorted(maps.Keys(updated)); !slices.Equal(got, slices.Sorted(slices.Values(services))) {
		t.Errorf("%s updates %v; the services are %v", tr, got, services)
	}
}

// cloudbuild.yaml types none of the values Terraform derives: its
// substitutions that are not tool pins default to empty, and the build
// trigger passes every one of them from local.build_substitutions, which
// the build_substitutions output gives a build submitted by hand.
func TestCloudBuildSubstitutionsComeFromTerraform(t *testing.T) {
	var cb struct {
		Substitutions map[string]string `yaml:"substitutions"`
	}
	src := readFile(t, "../cloudbuild.yaml")
	if err := yaml.Unmarshal([]byte(src), &cb); err != nil {
		t.Fatal(err)
	}
	c := loadConfig(t)
	e, err := newEvaluator(c, map[string]string{"build_trigger": `{repository = "projects/p/locations/europe-west1/connections/github/repositories/lrosink", branch = "^main$"}`})
	if err != nil {
		t.Fatal(err)
	}
	var trigger instance
	for _, tr := range e.ofType("google_cloudbuild_trigger") {
		if f, _ := tr.str(nil, "filename"); f == "cloudbuild.yaml" {
			trigger = tr
		}
	}
	if trigger.Block == nil {
		t.Fatal("no google_cloudbuild_trigger runs cloudbuild.yaml (with var.build_trigger set)")
	}
	passed := trigger.val(nil, "substitutions")
	used := regexp.MustCompile(`\$\{?(_[A-Z0-9_]+)`).FindAllStringSubmatch(src, -1)
	if len(used) == 0 {
		t.Fatal("cloudbuild.yaml uses no user substitution: the parser is broken")
	}
	for _, m := range used {
		name := m[1]
		if strings.HasSuffix(name, "_VERSION") {
			continue // tool pins of the test step, a build concern
		}
		if d := cb.Substitutions[name]; d != "" {
			t.Errorf("cloudbuild.yaml types %s: %q; Terraform derives it (local.build_substitutions)", name, d)
		}
		if passed == cty.NilVal || !passed.Type().IsObjectType() || !passed.Type().HasAttribute(name) {
			t.Errorf("cloudbuild.yaml uses %s, which the build trigger does not pass", name)
			continue
		}
		if name == "_IMAGE" && passed.GetAttr(name).AsString() != e.locals["image"].AsString() {
			t.Errorf("the build trigger passes _IMAGE = %q, the rollout deploys %q", passed.GetAttr(name).AsString(), e.locals["image"].AsString())
		}
	}
	out := ""
	for _, o := range c.outputs {
		if o.Labels[0] == "build_substitutions" {
			out = o.text(attr(o.Body, "value").Expr)
		}
	}
	if !strings.Contains(out, "local.build_substitutions") {
		t.Errorf("output build_substitutions (%q) is not local.build_substitutions: a build by hand would differ from the trigger's", out)
	}
}

// numberWords are the counts written out in prose.
var numberWords = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}

// countClaims finds "<n> [Cloud Run] services" and "<n> alert policies" in
// text: what a document says the deployment has.
var countClaims = regexp.MustCompile(`(?i)\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten)\s+(Cloud Run services|services|alert policies)\b`)

// The documents and comments that count the services or the alert
// policies say what the configuration has.
func TestDocCountsMatchTheCode(t *testing.T) {
	c := loadConfig(t)
	want := map[string]int{
		"services":       len(c.services()),
		"alert policies": len(c.eval.ofType("google_monitoring_alert_policy")),
	}
	files := []string{"../docs/DEPLOY.md", "../docs/OPERATIONS.md", "../docs/ARCHITECTURE.md", "../README.md", "../cloudbuild.yaml", "../Dockerfile"}
	tf, _ := filepath.Glob(filepath.Join(tfDir, "*.tf"))
	files = append(files, tf...)
	checked := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range countClaims.FindAllStringSubmatch(line, -1) {
				n, ok := numberWords[strings.ToLower(m[1])]
				if !ok {
					n, _ = strconv.Atoi(m[1])
				}
				what := strings.ToLower(m[2])
				if what == "cloud run services" {
					what = "services"
				}
				checked++
				if n != want[what] {
					t.Errorf("%s:%d says %q; the configuration has %d %s", filepath.Base(f), i+1, m[0], want[what], what)
				}
			}
		}
	}
	if checked == 0 {
		t.Error(`no document states the number of services or alert policies: DEPLOY.md's table should ("N Cloud Run services", "N alert policies")`)
	}
}
