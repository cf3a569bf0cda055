package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// An existing deployment keeps its objects across a refactoring only if
// every address it has is still declared, or a `moved` block maps it to one
// that is, or a `removed` block forgets it without destroying it. Anything
// else is destroyed by the next apply (a service re-created under a new
// URL, a database abandoned, a grant revoked), which must be on purpose.

// baseCommit is the configuration before issue 51 (deploy hardening);
// testdata/addresses-<commit>.txt lists its resource instances (evaluated
// with everyOptional), as a deployment of it has them in its state.
const baseCommit = "d8b0c45"

// destroyedOnPurpose: addresses of baseCommit the new configuration
// deletes deliberately, and why.
var destroyedOnPurpose = map[string]string{
	// The build account ran `make test` with deploy rights; build and
	// rollout are separate accounts now (build.tf), and these grants are
	// revoked, not moved to the deployer (a different member, a different
	// role).
	"google_cloud_run_v2_service_iam_member.build_deployer": "the build account no longer deploys",
	"google_service_account_iam_member.build_act_as":        "the build account no longer acts as the runtime accounts",
}

// everyOptional are variable values under which the resources that exist
// only for some settings exist too (an allUsers grant, invokers,
// subscribers and approvers keyed by member), so that their addresses are
// compared as well. Both configurations are evaluated with those of them
// they declare.
var everyOptional = map[string]string{
	"webhook_public_access": `"allUsers"`,
	"register_invokers":     `["serviceAccount:submitter@p.iam.gserviceaccount.com"]`,
	"console_invokers":      `["group:oncall@example.com"]`,
	"results_subscribers":   `["serviceAccount:worker@p.iam.gserviceaccount.com"]`,
	"rollout_approvers":     `["group:release@example.com"]`,
}

// instanceAddrs lists every resource instance of c evaluated with
// everyOptional, as Terraform names them in the state. It fails when a
// for_each or count cannot be expanded: the comparison would then be blind
// to that resource.
func instanceAddrs(t *testing.T, c *config) []string {
	t.Helper()
	// Only the variables c declares: the base configuration predates some.
	overrides := map[string]string{}
	for _, v := range c.variables {
		if x, ok := everyOptional[v.Labels[0]]; ok {
			overrides[v.Labels[0]] = x
		}
	}
	e, err := newEvaluator(c, overrides)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range mapValues(c.resources) {
		is, ok := e.instances(b)
		if !ok {
			t.Fatalf("%s: for_each/count cannot be evaluated without a provider: its addresses are unknown", b)
		}
		for _, i := range is {
			out = append(out, e.stateAddr(i))
		}
	}
	slices.Sort(out)
	return out
}

// refactoring is the configuration's moved and removed blocks.
type refactoring struct {
	moved   [][2]string // from, to
	removed []string
}

func refactorings(c *config) refactoring {
	var r refactoring
	addr := func(b block, name string) string {
		a := attr(b.Body, name)
		if a == nil {
			return ""
		}
		return strings.Join(strings.Fields(b.text(a.Expr)), "")
	}
	for _, b := range c.all {
		switch b.Type {
		case "moved":
			r.moved = append(r.moved, [2]string{addr(b, "from"), addr(b, "to")})
		case "removed":
			r.removed = append(r.removed, addr(b, "from"))
		}
	}
	return r
}

// splitAddr splits `type.name["key"]` into `type.name` and `["key"]`.
func splitAddr(a string) (res, key string) {
	if i := strings.Index(a, "["); i >= 0 {
		return a[:i], a[i:]
	}
	return a, ""
}

// follow applies the moved blocks to an address until none applies: an
// instance moves on its own, or with its resource (`from = a.b, to = a.c`
// carries a.b["k"] to a.c["k"]; `to = a.c["k"]` is where the un-keyed
// a.b goes).
func (r refactoring) follow(a string) string {
	for range 10 {
		res, key := splitAddr(a)
		next := ""
		for _, m := range r.moved {
			switch {
			case m[0] == a:
				next = m[1]
			case key != "" && m[0] == res && !strings.Contains(m[1], "["):
				next = m[1] + key
			}
		}
		if next == "" {
			return a
		}
		a = next
	}
	return a
}

func (r refactoring) forgets(a string) bool {
	res, _ := splitAddr(a)
	return slices.Contains(r.removed, a) || slices.Contains(r.removed, res)
}

func TestMovedBlocksCoverEveryRenamedAddress(t *testing.T) {
	c := loadConfig(t)
	now := instanceAddrs(t, c)
	r := refactorings(c)
	old := strings.Fields(readFile(t, filepath.Join("testdata", "addresses-"+baseCommit+".txt")))
	if len(old) < 50 {
		t.Fatalf("testdata lists %d addresses of %s: the list is broken", len(old), baseCommit)
	}
	for _, a := range old {
		to := r.follow(a)
		res, _ := splitAddr(to)
		switch {
		case slices.Contains(now, to):
		case r.forgets(to):
		case destroyedOnPurpose[res] != "":
		case to != a:
			t.Errorf("%s moves to %s, which the configuration does not declare: the next apply destroys it", a, to)
		default:
			t.Errorf("%s (in the state of a %s deployment) is no longer declared and no moved block says where it went: the next apply destroys it", a, baseCommit)
		}
	}
	// Each moved block leads to a declared resource, never into a removed
	// one (forget the old address itself instead).
	for _, m := range r.moved {
		to := r.follow(m[1])
		res, _ := splitAddr(to)
		if c.resources[res].Block == nil {
			t.Errorf("moved { from = %s, to = %s }: %s is not declared", m[0], m[1], res)
		}
		if r.forgets(to) {
			t.Errorf("moved { from = %s, to = %s } ends in a removed block: remove %s itself", m[0], m[1], m[0])
		}
	}
	for _, f := range r.removed {
		if c.resources[f].Block != nil {
			t.Errorf("removed { from = %s } names a resource the configuration still declares", f)
		}
	}
	for res := range destroyedOnPurpose {
		if !slices.ContainsFunc(old, func(a string) bool { r, _ := splitAddr(a); return r == res }) {
			t.Errorf("destroyedOnPurpose names %s, which %s did not have", res, baseCommit)
		}
	}
}

// TestAddressListIsTheBaseConfiguration: testdata's list is what
// baseCommit's terraform/ evaluates to, not a hand-made one. It needs the
// git history, which a Cloud Build upload does not carry (.gcloudignore);
// there it says so in one line.
func TestAddressListIsTheBaseConfiguration(t *testing.T) {
	if err := exec.Command("git", "cat-file", "-e", baseCommit+"^{commit}").Run(); err != nil {
		t.Logf("no git history with %s here (%v): testdata/addresses-%s.txt is used as committed", baseCommit, err, baseCommit)
		return
	}
	git := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	dir := t.TempDir()
	files := strings.Fields(string(git("ls-tree", "--name-only", baseCommit, "terraform/")))
	for _, f := range files {
		if !strings.HasSuffix(f, ".tf") {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), git("show", baseCommit+":"+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Contains(files, "terraform/moved.tf") {
		t.Fatalf("%s's terraform/ has no moved.tf (%v): wrong commit?", baseCommit, files)
	}
	got := instanceAddrs(t, loadConfigDir(t, dir))
	want := strings.Fields(readFile(t, filepath.Join("testdata", "addresses-"+baseCommit+".txt")))
	if !slices.Equal(got, want) {
		t.Errorf("testdata/addresses-%s.txt differs from %s's terraform/; it should read:\n%s", baseCommit, baseCommit, strings.Join(got, "\n"))
	}
}
