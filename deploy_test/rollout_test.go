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

	"go.yaml.in/yaml/v3"
)

// rolledOut reads the services cloudbuild.yaml's deploy step updates: the
// words of its `for fn in ...; do` loop, each prefixed with the
// _SERVICE_PREFIX substitution's default, as `gcloud run services update`
// names them.
func rolledOut(t *testing.T) []string {
	t.Helper()
	var cb struct {
		Substitutions map[string]string `yaml:"substitutions"`
	}
	src := readFile(t, "../cloudbuild.yaml")
	if err := yaml.Unmarshal([]byte(src), &cb); err != nil {
		t.Fatal(err)
	}
	step := cloudBuildStep(t, "../cloudbuild.yaml", "deploy")
	if !strings.Contains(step.script, `gcloud run services update "${_SERVICE_PREFIX}-$$fn"`) {
		t.Fatalf("the deploy step no longer runs gcloud run services update \"${_SERVICE_PREFIX}-$$fn\": update this test's parser\n%s", step.script)
	}
	m := regexp.MustCompile(`(?m)^\s*for fn in ([a-z0-9 -]+); do`).FindStringSubmatch(step.script)
	if m == nil {
		t.Fatalf("the deploy step has no `for fn in ...; do` loop over the services:\n%s", step.script)
	}
	var out []string
	for _, fn := range strings.Fields(m[1]) {
		out = append(out, cb.Substitutions["_SERVICE_PREFIX"]+"-"+fn)
	}
	return out
}

// Every service cloudbuild.yaml rolls out exists in Terraform, the two lists
// are the same, and the build account may deploy each one: run.developer on
// the service and iam.serviceAccountUser on the account its revisions run
// as. A missing grant fails the rollout with PERMISSION_DENIED after the
// services before it in the loop already run the new image.
func TestCloudBuildRollsOutEveryServiceWithGrants(t *testing.T) {
	c := loadConfig(t)
	build := ""
	for _, o := range c.outputs {
		if o.Labels[0] == "build_service_account" {
			build = "google_service_account." + strings.Split(o.text(attr(o.Body, "value").Expr), ".")[1]
		}
	}
	if build == "" {
		t.Fatal("no output build_service_account naming the Cloud Build account")
	}
	byName := map[string]instance{}
	for _, svc := range c.services() {
		name, ok := svc.str(nil, "name")
		if !ok {
			t.Fatalf("%s: name cannot be evaluated", svc)
		}
		byName[name] = svc
	}
	rolled := rolledOut(t)
	if got, want := slices.Sorted(slices.Values(rolled)), slices.Sorted(maps.Keys(byName)); !slices.Equal(got, want) {
		t.Errorf("cloudbuild.yaml rolls out %v; Terraform declares %v: they must be the same list (local.services)", got, want)
	}
	deployer := map[string]bool{} // service symbol -> run.developer granted to build
	for _, g := range c.eval.ofType("google_cloud_run_v2_service_iam_member") {
		role, _ := g.str(nil, "role")
		member, _ := g.str(nil, "member")
		name, _ := g.str(nil, "name")
		if role == "roles/run.developer" && resourceOf(member) == build {
			deployer[resourceOf(name)] = true
		}
	}
	actAs := map[string]bool{} // account symbol -> serviceAccountUser granted to build
	for _, g := range c.eval.ofType("google_service_account_iam_member") {
		role, _ := g.str(nil, "role")
		member, _ := g.str(nil, "member")
		sa, _ := g.str(nil, "service_account_id")
		if role == "roles/iam.serviceAccountUser" && resourceOf(member) == build {
			actAs[resourceOf(sa)] = true
		}
	}
	for _, name := range rolled {
		svc, ok := byName[name]
		if !ok {
			t.Errorf("cloudbuild.yaml rolls out %s, which Terraform does not declare", name)
			continue
		}
		if !deployer[svc.addr()] {
			t.Errorf("cloudbuild.yaml rolls out %s (%s), but %s has no roles/run.developer on it", name, svc.addr(), build)
		}
		runAs, _ := svc.str(bodyOf(child(svc.Body, "template")), "service_account")
		if !actAs[resourceOf(runAs)] {
			t.Errorf("cloudbuild.yaml rolls out %s, but %s has no roles/iam.serviceAccountUser on %s, the account its revisions run as", name, build, resourceOf(runAs))
		}
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
