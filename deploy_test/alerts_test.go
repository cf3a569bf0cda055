package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// operatorAlerts are the "alert" values lrosink logs for an operator to act
// on (docs/OPERATIONS.md has an "Alert:" section for each). Every one needs a
// log-based metric and an alert policy, or a deployment would log the alert
// and page nobody.
var operatorAlerts = []string{"stuck", "webhook-disabled", "claim-missing"}

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
			for _, b := range c.ofType("google_logging_metric") {
				f := attr(bodyOf(b.Block), "filter")
				if f != nil && strings.Contains(b.text(f.Expr), `jsonPayload.alert=\"`+alert+`\"`) {
					metric = b.addr()
				}
			}
			if metric == "" {
				t.Fatalf(`no google_logging_metric filters on jsonPayload.alert="%s"`, alert)
			}
			for _, p := range c.ofType("google_monitoring_alert_policy") {
				if !strings.Contains(string(p.src[p.Range().Start.Byte:p.Range().End.Byte]), metric+".name") {
					continue
				}
				doc := child(bodyOf(p.Block), "documentation")
				if doc == nil || attr(doc.Body, "content") == nil || !strings.Contains(p.text(attr(doc.Body, "content").Expr), "local.runbook") {
					t.Errorf("%s: documentation must point at the runbook (local.runbook)", p)
				}
				return
			}
			t.Errorf("no google_monitoring_alert_policy uses %s", metric)
		})
	}
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
