// Package deploy_test checks the rules of the deployment files that a
// reviewer would otherwise have to remember: it parses every terraform/*.tf
// file with github.com/hashicorp/hcl/v2 (hclparse + hclsyntax, no provider,
// no network) and reads internal/ledger/fsledger/firestore.go with
// go/parser. scripts/check-deploy.sh and `make test` run it.
//
// This file loads the configuration (eval_test.go evaluates it); the rules
// are in the other files: terraform_test.go (accounts, public access,
// secrets, hygiene), queries_test.go (indexes), schema_test.go (the
// provider's schema), invokers_test.go, firestore_access_test.go,
// rollout_test.go (build and rollout accounts), instances_test.go (two
// instances), moved_test.go (upgrades), alerts_test.go and loglines_test.go
// (filters against the code's lines and answers).
package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

const (
	tfDir       = "../terraform"
	queriesFile = "../terraform/queries.json"
	firestoreGo = "../internal/ledger/fsledger/firestore.go"
)

// block is a top-level block (resource, data, variable, output, ...) with the
// source of the file it is in.
type block struct {
	*hclsyntax.Block
	file string
	src  []byte
}

// addr is "type.name" for resources and data sources, the label otherwise.
func (b block) addr() string { return strings.Join(b.Labels, ".") }

func (b block) String() string {
	return fmt.Sprintf("%s %s (%s:%d)", b.Type, b.addr(), filepath.Base(b.file), b.DefRange().Start.Line)
}

// text is the source of an expression, as written.
func (b block) text(e hclsyntax.Expression) string {
	r := e.Range()
	return string(b.src[r.Start.Byte:r.End.Byte])
}

type config struct {
	resources map[string]block // "google_x.name"
	data      map[string]block
	variables []block
	outputs   []block
	locals    map[string]*hclsyntax.Attribute
	localsSrc map[string]block // the locals block each local is defined in
	terraform []block
	all       []block // every top-level block
	// literalLocals are the locals that evaluate without any reference
	// (pure literals).
	literalLocals map[string]cty.Value
	// eval is the configuration evaluated with the variables' defaults
	// (eval_test.go).
	eval *evaluator
}

func loadConfig(t *testing.T) *config {
	t.Helper()
	return loadConfigDir(t, tfDir)
}

// loadConfigDir loads the configuration in dir (a copy of terraform/ in
// the tests that change one on purpose).
func loadConfigDir(t *testing.T, dir string) *config {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no .tf files in %s (err %v)", dir, err)
	}
	c := &config{
		resources: map[string]block{}, data: map[string]block{},
		locals: map[string]*hclsyntax.Attribute{}, localsSrc: map[string]block{},
		literalLocals: map[string]cty.Value{},
	}
	p := hclparse.NewParser()
	for _, path := range paths {
		f, diags := p.ParseHCLFile(path)
		if diags.HasErrors() {
			t.Fatalf("parse %s: %s", path, diags.Error())
		}
		body := f.Body.(*hclsyntax.Body)
		for _, b := range body.Blocks {
			bl := block{Block: b, file: path, src: f.Bytes}
			c.all = append(c.all, bl)
			switch b.Type {
			case "resource":
				if _, dup := c.resources[bl.addr()]; dup {
					t.Fatalf("%s declared twice", bl)
				}
				c.resources[bl.addr()] = bl
			case "data":
				c.data[bl.addr()] = bl
			case "variable":
				c.variables = append(c.variables, bl)
			case "output":
				c.outputs = append(c.outputs, bl)
			case "locals":
				for name, a := range b.Body.Attributes {
					c.locals[name] = a
					c.localsSrc[name] = bl
				}
			case "terraform":
				c.terraform = append(c.terraform, bl)
			}
		}
	}
	for name, a := range c.locals {
		if v, diags := a.Expr.Value(nil); !diags.HasErrors() {
			c.literalLocals[name] = v
		}
	}
	e, err := newEvaluator(c, nil)
	if err != nil {
		t.Fatalf("evaluate %s: %v", dir, err)
	}
	c.eval = e
	return c
}

// ofType returns the resources of one type, sorted by name.
func (c *config) ofType(typ string) []block {
	var out []block
	for _, b := range c.resources {
		if b.Labels[0] == typ {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].addr() < out[j].addr() })
	return out
}

func attr(body *hclsyntax.Body, name string) *hclsyntax.Attribute {
	if body == nil {
		return nil
	}
	return body.Attributes[name]
}

func child(body *hclsyntax.Body, typ string) *hclsyntax.Block {
	if body == nil {
		return nil
	}
	for _, b := range body.Blocks {
		if b.Type == typ {
			return b
		}
	}
	return nil
}

func children(body *hclsyntax.Body, typ string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	if body == nil {
		return out
	}
	for _, b := range body.Blocks {
		if b.Type == typ {
			out = append(out, b)
		}
	}
	return out
}

func bodyOf(b *hclsyntax.Block) *hclsyntax.Body {
	if b == nil {
		return nil
	}
	return b.Body
}

// literal evaluates an expression that references nothing.
func literal(a *hclsyntax.Attribute) (string, bool) {
	if a == nil {
		return "", false
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}

// refs lists the references of an expression as dotted paths, e.g.
// "google_service_account.webhook.email" (index steps are dropped).
func refs(e hclsyntax.Expression) []string {
	var out []string
	for _, tr := range e.Variables() {
		parts := []string{tr.RootName()}
		for _, step := range tr[1:] {
			if a, ok := step.(hcl.TraverseAttr); ok {
				parts = append(parts, a.Name)
			}
		}
		out = append(out, strings.Join(parts, "."))
	}
	return out
}

// refTo returns the names X of the references "<typ>.X.<attrName>" in e.
func refTo(e hclsyntax.Expression, typ, attrName string) []string {
	var out []string
	for _, r := range refs(e) {
		p := strings.Split(r, ".")
		if len(p) >= 3 && p[0] == typ && (attrName == "" || p[2] == attrName) {
			out = append(out, p[1])
		}
	}
	return out
}

// envVar is one environment variable of a Cloud Run container, from a
// static env block or from a dynamic "env" block, evaluated.
type envVar struct {
	name  string
	value string // "" when it comes from value_source
	// secret is the evaluated value_source.secret_key_ref.secret (the
	// symbol of a secret's attribute), "" for a plain value.
	secret      string
	valueSource bool
}

// envs lists the container env vars of one Cloud Run v2 service instance.
func envs(svc instance) []envVar {
	var out []envVar
	for _, ct := range children(bodyOf(child(svc.Body, "template")), "containers") {
		for _, e := range dynBlocks(ct.Body, "env", svc.ctx) {
			name, _ := evalString(attr(e.body, "name"), e.ctx)
			v := envVar{name: name}
			if vs := child(e.body, "value_source"); vs != nil {
				v.valueSource = true
				v.secret, _ = evalString(attr(bodyOf(child(vs.Body, "secret_key_ref")), "secret"), e.ctx)
			} else {
				v.value, _ = evalString(attr(e.body, "value"), e.ctx)
			}
			out = append(out, v)
		}
	}
	return out
}

// services expands the Cloud Run services.
func (c *config) services() []instance { return c.eval.ofType("google_cloud_run_v2_service") }

// functionTarget is the FUNCTION_TARGET of a Cloud Run service instance.
func functionTarget(svc instance) string {
	for _, e := range envs(svc) {
		if e.name == "FUNCTION_TARGET" {
			return e.value
		}
	}
	return ""
}

// serviceByTarget maps FUNCTION_TARGET to the service instance.
func (c *config) serviceByTarget(t *testing.T) map[string]instance {
	t.Helper()
	out := map[string]instance{}
	for _, svc := range c.services() {
		ft := functionTarget(svc)
		if ft == "" {
			t.Errorf("%s: no FUNCTION_TARGET env var", svc)
			continue
		}
		if prev, dup := out[ft]; dup {
			t.Errorf("FUNCTION_TARGET=%s is served by both %s and %s", ft, prev.addr(), svc.addr())
		}
		out[ft] = svc
	}
	return out
}

// instances expands a resource's for_each or count (eval_test.go) and
// returns the evaluation context of each instance; a resource without
// either has one instance. ok is false when for_each cannot be evaluated
// without a provider.
func (c *config) instances(b block) (ctxs []*hcl.EvalContext, ok bool) {
	is, ok := c.eval.instances(b)
	for _, i := range is {
		ctxs = append(ctxs, i.ctx)
	}
	return ctxs, ok
}

func evalString(a *hclsyntax.Attribute, ctx *hcl.EvalContext) (string, bool) {
	if a == nil {
		return "", false
	}
	v, diags := a.Expr.Value(ctx)
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
