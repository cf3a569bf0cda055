// Package deploy_test checks the rules of the deployment files that a
// reviewer would otherwise have to remember: it parses every terraform/*.tf
// file with github.com/hashicorp/hcl/v2 (hclparse + hclsyntax, no provider,
// no network) and reads internal/ledger/firestore/firestore.go with
// go/parser. scripts/check-deploy.sh and `make test` run it.
//
// This file loads the configuration; the rules are in terraform_test.go and
// queries_test.go.
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
	firestoreGo = "../internal/ledger/firestore/firestore.go"
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
	// literalLocals are the locals that evaluate without any reference
	// (pure literals), for for_each expansion.
	literalLocals map[string]cty.Value
}

func loadConfig(t *testing.T) *config {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(tfDir, "*.tf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no .tf files in %s (err %v)", tfDir, err)
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
// static env block or from a dynamic "env" block over an object.
type envVar struct {
	name        string
	value       hclsyntax.Expression // nil when it comes from value_source
	valueSource *hclsyntax.Block
}

// envs lists the container env vars of a Cloud Run v2 service.
func (c *config) envs(svc block) []envVar {
	var out []envVar
	for _, ct := range children(bodyOf(child(svc.Body, "template")), "containers") {
		for _, e := range children(ct.Body, "env") {
			name, _ := literal(attr(e.Body, "name"))
			v := envVar{name: name, valueSource: child(e.Body, "value_source")}
			if a := attr(e.Body, "value"); a != nil {
				v.value = a.Expr
			}
			out = append(out, v)
		}
		for _, d := range children(ct.Body, "dynamic") {
			if len(d.Labels) != 1 || d.Labels[0] != "env" {
				continue
			}
			fe := attr(d.Body, "for_each")
			if fe == nil {
				continue
			}
			for _, item := range c.objectItems(fe.Expr, 0) {
				out = append(out, envVar{name: item.key, value: item.value})
			}
		}
	}
	return out
}

type objItem struct {
	key   string
	value hclsyntax.Expression
}

// objectItems collects the literal-keyed items of the object constructors
// in e, following local.X references (merge(local.a, {...}) and the like).
func (c *config) objectItems(e hclsyntax.Expression, depth int) []objItem {
	if depth > 8 {
		return nil
	}
	var out []objItem
	hclsyntax.VisitAll(e, func(n hclsyntax.Node) hcl.Diagnostics {
		switch x := n.(type) {
		case *hclsyntax.ObjectConsExpr:
			for _, it := range x.Items {
				k, diags := it.KeyExpr.Value(nil)
				if diags.HasErrors() || k.Type() != cty.String {
					continue
				}
				out = append(out, objItem{key: k.AsString(), value: it.ValueExpr})
			}
		case *hclsyntax.ScopeTraversalExpr:
			if x.Traversal.RootName() == "local" && len(x.Traversal) >= 2 {
				if a, ok := x.Traversal[1].(hcl.TraverseAttr); ok {
					if l := c.locals[a.Name]; l != nil {
						out = append(out, c.objectItems(l.Expr, depth+1)...)
					}
				}
			}
		}
		return nil
	})
	return out
}

// functionTarget is the FUNCTION_TARGET literal of a Cloud Run service.
func (c *config) functionTarget(svc block) string {
	for _, e := range c.envs(svc) {
		if e.name == "FUNCTION_TARGET" && e.value != nil {
			if v, diags := e.value.Value(nil); !diags.HasErrors() && v.Type() == cty.String {
				return v.AsString()
			}
		}
	}
	return ""
}

// serviceByTarget maps FUNCTION_TARGET to the service's resource name.
func (c *config) serviceByTarget(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, svc := range c.ofType("google_cloud_run_v2_service") {
		ft := c.functionTarget(svc)
		if ft == "" {
			t.Errorf("%s: no literal FUNCTION_TARGET env var", svc)
			continue
		}
		if prev, dup := out[ft]; dup {
			t.Errorf("FUNCTION_TARGET=%s is served by both %s and %s", ft, prev, svc.Labels[1])
		}
		out[ft] = svc.Labels[1]
	}
	return out
}

// instances expands a resource's for_each over a literal local (or a
// literal map/set) and returns the evaluation context of each instance;
// a resource without for_each has one instance. ok is false when for_each
// cannot be evaluated without a provider.
func (c *config) instances(b block) (ctxs []*hcl.EvalContext, ok bool) {
	vars := map[string]cty.Value{}
	if len(c.literalLocals) > 0 {
		vars["local"] = cty.ObjectVal(c.literalLocals)
	}
	base := &hcl.EvalContext{Variables: vars}
	fe := attr(b.Body, "for_each")
	if fe == nil {
		return []*hcl.EvalContext{base}, true
	}
	v, diags := fe.Expr.Value(base)
	if diags.HasErrors() || !v.IsWhollyKnown() || !v.CanIterateElements() {
		return nil, false
	}
	for it := v.ElementIterator(); it.Next(); {
		k, val := it.Element()
		if v.Type().IsSetType() {
			k = val
		}
		ctx := base.NewChild()
		ctx.Variables = map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{"key": k, "value": val})}
		ctxs = append(ctxs, ctx)
	}
	return ctxs, true
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
