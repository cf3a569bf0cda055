package deploy_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// operatorAlerts are the "alert" values lrosink logs for an operator to act
// on (docs/OPERATIONS.md has an "Alert:" section for each). Every one needs a
// log-based metric and an alert policy, or a deployment would log the alert
// and page nobody.
var operatorAlerts = []string{"stuck", "intent-unbound", "webhook-disabled", "claim-missing"}

// TestOperatorAlertsArePaged checks that each alert value is logged by the
// Go code, has a logging metric filtering on exactly it, and an alert policy
// on that metric whose documentation points at the runbook.
func TestOperatorAlertsArePaged(t *testing.T) {
	c := loadConfig(t)
	src := goSource(t, "../internal")
	for _, alert := range operatorAlerts {
		t.Run(alert, func(t *testing.T) {
			if !strings.Contains(src, `"`+alert+`"`) {
				t.Fatalf("no Go source under internal/ logs the alert %q: remove it from operatorAlerts or log it", alert)
			}
			metric := ""
			for _, m := range c.eval.ofType("google_logging_metric") {
				if f, _ := m.str(nil, "filter"); strings.Contains(f, `jsonPayload.alert="`+alert+`"`) {
					metric = m.addr()
				}
			}
			if metric == "" {
				t.Fatalf(`no google_logging_metric filters on jsonPayload.alert="%s"`, alert)
			}
			for _, p := range alertPolicies(c) {
				if !slices.Contains(p.metrics, metric) {
					continue
				}
				if !strings.Contains(p.doc, "docs/OPERATIONS.md") || len(p.anchors) == 0 {
					t.Errorf("%s: documentation must link the runbook section (local.runbook#anchor): %q", p, p.doc)
				}
				return
			}
			t.Errorf("no google_monitoring_alert_policy uses %s", metric)
		})
	}
}

// policy is one alert policy instance, evaluated.
type policy struct {
	instance
	metrics []string // the google_logging_metric instances of its conditions
	doc     string
	anchors []string // #anchors in its documentation
	absent  bool     // has a metric-absence condition
}

func alertPolicies(c *config) []policy {
	var out []policy
	metricRef := regexp.MustCompile(`logging\.googleapis\.com/user/(google_logging_metric\.[A-Za-z0-9_]+(?:\["[^"]+"\])?)\.name`)
	anchor := regexp.MustCompile(`#([a-z0-9-]+)`)
	for _, in := range c.eval.ofType("google_monitoring_alert_policy") {
		p := policy{instance: in}
		for _, cond := range children(in.Body, "conditions") {
			for _, kind := range []string{"condition_threshold", "condition_absent"} {
				if b := child(cond.Body, kind); b != nil {
					f, _ := in.str(b.Body, "filter")
					for _, m := range metricRef.FindAllStringSubmatch(f, -1) {
						p.metrics = append(p.metrics, m[1])
					}
					p.absent = p.absent || kind == "condition_absent"
				}
			}
		}
		p.doc, _ = in.str(bodyOf(child(in.Body, "documentation")), "content")
		for _, m := range anchor.FindAllStringSubmatch(p.doc, -1) {
			p.anchors = append(p.anchors, m[1])
		}
		out = append(out, p)
	}
	return out
}

// Every alert policy's documentation links a section of docs/OPERATIONS.md
// that exists: the anchor is the GitHub slug of one of its headings.
func TestRunbookAnchorsAreHeadings(t *testing.T) {
	c := loadConfig(t)
	slugs := headingSlugs(readFile(t, "../docs/OPERATIONS.md"))
	ps := alertPolicies(c)
	if len(ps) == 0 {
		t.Fatal("no alert policies")
	}
	for _, p := range ps {
		if len(p.anchors) != 1 {
			t.Errorf("%s: documentation links %d runbook sections %v, want exactly one (local.runbook#anchor)", p, len(p.anchors), p.anchors)
		}
		for _, a := range p.anchors {
			if !slugs[a] {
				t.Errorf("%s: runbook anchor #%s is no heading of docs/OPERATIONS.md (headings: %v)", p, a, slices.Sorted(maps.Keys(slugs)))
			}
		}
	}
}

// headingSlugs are the anchors GitHub gives a Markdown file's headings:
// lower case, punctuation but hyphens and underscores dropped, spaces to
// hyphens (code fences skipped).
func headingSlugs(md string) map[string]bool {
	out := map[string]bool{}
	fence := false
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
	}
	return out
}

// Nothing pages when Reconcile stops running altogether (Scheduler paused
// or deleted: no failed attempt either): a metric-absence alert on the
// reconcile-pass metric covers it.
func TestReconcileAbsenceIsAlerted(t *testing.T) {
	c := loadConfig(t)
	passes := ""
	for _, m := range c.eval.ofType("google_logging_metric") {
		f, _ := m.str(nil, "filter")
		// The count, not the lateness distribution of the same lines.
		if ve := m.val(nil, "value_extractor"); strings.Contains(f, `jsonPayload.message="reconcile pass"`) && (ve == cty.NilVal || ve.IsNull()) {
			passes = m.addr()
		}
	}
	if passes == "" {
		t.Fatal(`no google_logging_metric counts the "reconcile pass" line`)
	}
	for _, p := range alertPolicies(c) {
		if p.absent && slices.Contains(p.metrics, passes) {
			return
		}
	}
	t.Errorf("no alert policy has a condition_absent on %s", passes)
}

// goSource is every non-test .go file below dir, concatenated.
func goSource(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		b.Write(data)
		return err
	})
	if err != nil {
		t.Fatalf("read Go source: %v", err)
	}
	return b.String()
}
