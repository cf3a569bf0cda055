package deploy_test

import (
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	lroconfig "github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/urlopen"
)

// TestVariablesRefuseWhatTheBinaryRefuses: a value a Terraform variable's
// validation accepts must be one the container accepts at start-up, or
// terraform apply succeeds and every revision then fails to start (a 0s
// lease, a retention of 40,000 days). Each variable that becomes an
// environment variable is probed with values around the binary's bounds.
// (The lease's floor, twice the webhook deadline, is the binary's alone: a
// regular expression cannot compare durations.)
func TestVariablesRefuseWhatTheBinaryRefuses(t *testing.T) {
	probes := map[string]struct {
		env    string
		values []string
	}{
		"grace":       {"LROSINK_GRACE", []string{"0s", "0", "0.0m", "1ns", "90s", "1h30m", "-1s"}},
		"stuck_after": {"LROSINK_STUCK_AFTER", []string{"0s", "0h0m", "6h", "90m"}},
		"claim_lease": {"LROSINK_CLAIM_LEASE", []string{"0s", "20s", "10m"}},
		"retention":   {"LROSINK_RETENTION", []string{"", "6d", "7d", "400d", "36500d", "36501d"}},
		"gemini_qps":  {"LROSINK_GEMINI_QPS", []string{"0", "1.5", "1000000", "1000001", "-1"}},
	}
	conditions := validations(t)
	for name, p := range probes {
		conds := conditions[name]
		if len(conds) == 0 {
			t.Errorf("variable %q has no validation", name)
			continue
		}
		for _, v := range p.values {
			if !accepts(t, conds, name, v) {
				continue
			}
			env := map[string]string{p.env: v, "LROSINK_STORE": "firestore", "GOOGLE_CLOUD_PROJECT": "p", "LROSINK_RESULTS": "stdout"}
			if _, err := lroconfig.Load(func(k string) string { return env[k] }, lroconfig.Defaults{Store: "firestore", Openers: urlopen.Cloud()}); err != nil {
				t.Errorf("variable %s accepts %q, which the binary refuses at start-up: %v", name, v, err)
			}
		}
	}
}

// validations are the condition expressions of each variable's
// validation blocks.
func validations(t *testing.T) map[string][]hcl.Expression {
	t.Helper()
	f, diags := hclparse.NewParser().ParseHCLFile(filepath.Join(tfDir, "variables.tf"))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	out := map[string][]hcl.Expression{}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "variable" {
			continue
		}
		for _, v := range b.Body.Blocks {
			if v.Type == "validation" {
				if a, ok := v.Body.Attributes["condition"]; ok {
					out[b.Labels[0]] = append(out[b.Labels[0]], a.Expr)
				}
			}
		}
	}
	return out
}

// accepts evaluates conds with var.name = value: true if all hold.
func accepts(t *testing.T, conds []hcl.Expression, name, value string) bool {
	t.Helper()
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{name: cty.StringVal(value)})},
		Functions: hclFunctions()}
	for _, c := range conds {
		v, diags := c.Value(ctx)
		if diags.HasErrors() {
			t.Fatalf("variable %s = %q: evaluating its validation: %s", name, value, diags.Error())
		}
		if v.IsNull() || !v.IsKnown() || v.False() {
			return false
		}
	}
	return true
}
