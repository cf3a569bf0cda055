package deploy_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// Symbolic evaluation of the configuration, without a provider: variables
// take their defaults (or overrides; a variable without a default is the
// string "var.NAME"), and every attribute of a resource or data source is
// the string naming it, e.g. `google_service_account.runtime["webhook"].email`.
// for_each and count are expanded, so a rule can follow one service from
// the list in local.services to each grant derived from it.

// instance is one instance of a resource (one element of its for_each or
// count), with the context its expressions evaluate in.
type instance struct {
	block
	key string // "" without for_each/count
	ctx *hcl.EvalContext
}

// stateAddr is the instance's address as Terraform writes it: a count
// index unquoted (`type.name[0]`), a for_each key quoted.
func (e *evaluator) stateAddr(i instance) string {
	if i.key != "" && e.counted[i.block.addr()] {
		return fmt.Sprintf("%s[%s]", i.block.addr(), i.key)
	}
	return i.addr()
}

// addr is `type.name` or `type.name["key"]` (a count index is quoted too:
// stateAddr writes it as Terraform does).
func (i instance) addr() string {
	if i.key == "" {
		return i.block.addr()
	}
	return fmt.Sprintf("%s[%q]", i.block.addr(), i.key)
}

func (i instance) String() string {
	return fmt.Sprintf("%s (%s:%d)", i.addr(), i.file[strings.LastIndex(i.file, "/")+1:], i.DefRange().Start.Line)
}

// str evaluates an attribute of the instance (nil body: the instance's own
// body) to a string; ok is false when it is absent or not a known string.
func (i instance) str(body *hclsyntax.Body, name string) (string, bool) {
	if body == nil {
		body = i.Body
	}
	return evalString(attr(body, name), i.ctx)
}

// val evaluates an attribute; cty.NilVal when absent or not evaluable.
func (i instance) val(body *hclsyntax.Body, name string) cty.Value {
	if body == nil {
		body = i.Body
	}
	a := attr(body, name)
	if a == nil {
		return cty.NilVal
	}
	v, diags := a.Expr.Value(i.ctx)
	if diags.HasErrors() {
		return cty.NilVal
	}
	return v
}

// evaluator holds the symbolic values of one configuration.
type evaluator struct {
	c         *config
	vars      map[string]cty.Value
	locals    map[string]cty.Value
	resources map[string]map[string]cty.Value // type -> name -> value
	data      map[string]map[string]cty.Value
	attrNames []string
	keys      map[string][]string // resource addr -> instance keys (nil: single)
	counted   map[string]bool
}

func hclFunctions() map[string]function.Function {
	toset := function.New(&function.Spec{
		Params: []function.Parameter{{Name: "v", Type: cty.DynamicPseudoType}},
		Type:   func([]cty.Value) (cty.Type, error) { return cty.Set(cty.String), nil },
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return convert.Convert(args[0], cty.Set(cty.String))
		},
	})
	to := func(ty cty.Type) function.Function {
		return function.New(&function.Spec{
			Params: []function.Parameter{{Name: "v", Type: cty.DynamicPseudoType, AllowNull: true}},
			Type:   func([]cty.Value) (cty.Type, error) { return ty, nil },
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				return convert.Convert(args[0], ty)
			},
		})
	}
	startswith := function.New(&function.Spec{
		Params: []function.Parameter{{Name: "s", Type: cty.String}, {Name: "p", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.BoolVal(strings.HasPrefix(args[0].AsString(), args[1].AsString())), nil
		},
	})
	alltrue := function.New(&function.Spec{
		Params: []function.Parameter{{Name: "l", Type: cty.List(cty.Bool)}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			for it := args[0].ElementIterator(); it.Next(); {
				if _, v := it.Element(); v.False() {
					return cty.False, nil
				}
			}
			return cty.True, nil
		},
	})
	return map[string]function.Function{
		"merge": stdlib.MergeFunc, "keys": stdlib.KeysFunc, "values": stdlib.ValuesFunc,
		"join": stdlib.JoinFunc, "length": stdlib.LengthFunc, "contains": stdlib.ContainsFunc,
		"coalesce": stdlib.CoalesceFunc, "lookup": stdlib.LookupFunc, "flatten": stdlib.FlattenFunc,
		"concat": stdlib.ConcatFunc, "format": stdlib.FormatFunc, "max": stdlib.MaxFunc,
		"min": stdlib.MinFunc, "floor": stdlib.FloorFunc, "trimsuffix": stdlib.TrimSuffixFunc,
		"trimprefix": stdlib.TrimPrefixFunc, "regex": stdlib.RegexFunc, "regexall": stdlib.RegexAllFunc,
		"lower": stdlib.LowerFunc, "upper": stdlib.UpperFunc, "replace": stdlib.ReplaceFunc,
		"toset": toset, "tonumber": to(cty.Number), "tostring": to(cty.String), "tolist": to(cty.List(cty.String)),
		"startswith": startswith, "alltrue": alltrue, "try": tryfunc.TryFunc, "can": tryfunc.CanFunc,
		"sort": stdlib.SortFunc,
	}
}

// newEvaluator evaluates c with the variables' defaults, overridden by
// overrides (HCL expressions, e.g. `"allUsers"`).
func newEvaluator(c *config, overrides map[string]string) (*evaluator, error) {
	e := &evaluator{c: c, vars: map[string]cty.Value{}, locals: map[string]cty.Value{},
		keys: map[string][]string{}, counted: map[string]bool{}}
	for name := range overrides {
		if !slices.ContainsFunc(c.variables, func(v block) bool { return v.Labels[0] == name }) {
			return nil, fmt.Errorf("override of undeclared variable %q", name)
		}
	}
	for _, v := range c.variables {
		name := v.Labels[0]
		if src, ok := overrides[name]; ok {
			x, diags := hclsyntax.ParseExpression([]byte(src), "override", hcl.InitialPos)
			if diags.HasErrors() {
				return nil, fmt.Errorf("override %s: %s", name, diags.Error())
			}
			val, diags := x.Value(nil)
			if diags.HasErrors() {
				return nil, fmt.Errorf("override %s: %s", name, diags.Error())
			}
			e.vars[name] = val
			continue
		}
		if d := attr(v.Body, "default"); d != nil {
			val, diags := d.Expr.Value(nil)
			if diags.HasErrors() {
				return nil, fmt.Errorf("%s: default: %s", v, diags.Error())
			}
			e.vars[name] = val
			continue
		}
		e.vars[name] = cty.StringVal("var." + name)
	}
	// Every attribute name used anywhere, so any reference to a resource
	// attribute resolves (to its symbol).
	seen := map[string]bool{}
	visit := func(b block) {
		hclsyntax.VisitAll(b.Body, func(n hclsyntax.Node) hcl.Diagnostics {
			var tr hcl.Traversal
			switch x := n.(type) {
			case *hclsyntax.ScopeTraversalExpr:
				tr = x.Traversal
			case *hclsyntax.RelativeTraversalExpr:
				tr = x.Traversal
			}
			for _, s := range tr {
				if a, ok := s.(hcl.TraverseAttr); ok {
					seen[a.Name] = true
				}
			}
			return nil
		})
	}
	for _, b := range c.all {
		visit(b)
	}
	for n := range seen {
		e.attrNames = append(e.attrNames, n)
	}
	sort.Strings(e.attrNames)
	// Locals and for_each keys depend on each other (locals reference
	// resources, for_each references locals): a few rounds reach the fixed
	// point of a configuration Terraform itself accepts (no cycles).
	for range 6 {
		e.buildResources()
		for name, a := range c.locals {
			e.locals[name] = e.loose(a.Expr, e.ctx())
		}
		for _, b := range c.resources {
			e.expand(b)
		}
	}
	e.buildResources()
	return e, nil
}

func (e *evaluator) symbol(prefix string) cty.Value {
	attrs := map[string]cty.Value{}
	for _, n := range e.attrNames {
		attrs[n] = cty.StringVal(prefix + "." + n)
	}
	return cty.ObjectVal(attrs)
}

func (e *evaluator) buildResources() {
	e.resources = map[string]map[string]cty.Value{}
	e.data = map[string]map[string]cty.Value{}
	put := func(m map[string]map[string]cty.Value, b block, prefix string) {
		typ, name := b.Labels[0], b.Labels[1]
		if m[typ] == nil {
			m[typ] = map[string]cty.Value{}
		}
		addr := prefix + typ + "." + name
		keys, multi := e.keys[b.addr()]
		switch {
		case !multi && attr(b.Body, "for_each") == nil && attr(b.Body, "count") == nil:
			m[typ][name] = e.symbol(addr)
		case !multi:
			m[typ][name] = cty.DynamicVal
		case e.counted[b.addr()]:
			var l []cty.Value
			for _, k := range keys {
				l = append(l, e.symbol(addr+"["+k+"]"))
			}
			if len(l) == 0 {
				m[typ][name] = cty.EmptyTupleVal
			} else {
				m[typ][name] = cty.TupleVal(l)
			}
		default:
			o := map[string]cty.Value{}
			for _, k := range keys {
				o[k] = e.symbol(fmt.Sprintf("%s[%q]", addr, k))
			}
			m[typ][name] = cty.ObjectVal(o)
		}
	}
	for _, b := range e.c.resources {
		put(e.resources, b, "")
	}
	for _, b := range e.c.data {
		put(e.data, b, "data.")
	}
}

func (e *evaluator) ctx() *hcl.EvalContext {
	vars := map[string]cty.Value{
		"var":   cty.ObjectVal(e.vars),
		"local": cty.ObjectVal(e.locals),
	}
	for typ, m := range e.resources {
		vars[typ] = cty.ObjectVal(m)
	}
	d := map[string]cty.Value{}
	for typ, m := range e.data {
		d[typ] = cty.ObjectVal(m)
	}
	vars["data"] = cty.ObjectVal(d)
	return &hcl.EvalContext{Variables: vars, Functions: hclFunctions()}
}

// loose evaluates x, and where that fails, each item of an object
// constructor on its own (an unknown item stays unknown, the others known).
func (e *evaluator) loose(x hclsyntax.Expression, ctx *hcl.EvalContext) cty.Value {
	if v, diags := x.Value(ctx); !diags.HasErrors() {
		return v
	}
	o, ok := x.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return cty.DynamicVal
	}
	items := map[string]cty.Value{}
	for _, it := range o.Items {
		k, diags := it.KeyExpr.Value(ctx)
		if diags.HasErrors() || !k.IsKnown() || k.Type() != cty.String {
			return cty.DynamicVal
		}
		items[k.AsString()] = e.loose(it.ValueExpr, ctx)
	}
	return cty.ObjectVal(items)
}

// expand records the instance keys of b's for_each or count, if known.
func (e *evaluator) expand(b block) {
	ctx := e.ctx()
	if fe := attr(b.Body, "for_each"); fe != nil {
		v, diags := fe.Expr.Value(ctx)
		if diags.HasErrors() || v.IsNull() || !v.CanIterateElements() || !v.Type().IsSetType() && !v.IsKnown() {
			return
		}
		keys := []string{}
		for it := v.ElementIterator(); it.Next(); {
			k, val := it.Element()
			if v.Type().IsSetType() {
				k = val
			}
			if !k.IsKnown() || k.Type() != cty.String {
				return
			}
			keys = append(keys, k.AsString())
		}
		e.keys[b.addr()] = keys
		return
	}
	if cnt := attr(b.Body, "count"); cnt != nil {
		v, diags := cnt.Expr.Value(ctx)
		if diags.HasErrors() || !v.IsKnown() || v.Type() != cty.Number {
			return
		}
		n, _ := v.AsBigFloat().Int64()
		keys := []string{}
		for i := range n {
			keys = append(keys, fmt.Sprint(i))
		}
		e.keys[b.addr()] = keys
		e.counted[b.addr()] = true
	}
}

// instances expands a resource; ok is false when its for_each or count
// cannot be evaluated.
func (e *evaluator) instances(b block) ([]instance, bool) {
	base := e.ctx()
	if attr(b.Body, "for_each") == nil && attr(b.Body, "count") == nil {
		return []instance{{block: b, ctx: base}}, true
	}
	keys, ok := e.keys[b.addr()]
	if !ok {
		return nil, false
	}
	var out []instance
	if e.counted[b.addr()] {
		for i, k := range keys {
			ctx := base.NewChild()
			ctx.Variables = map[string]cty.Value{"count": cty.ObjectVal(map[string]cty.Value{"index": cty.NumberIntVal(int64(i))})}
			out = append(out, instance{block: b, key: k, ctx: ctx})
		}
		return out, true
	}
	fe, _ := attr(b.Body, "for_each").Expr.Value(base)
	for it := fe.ElementIterator(); it.Next(); {
		k, val := it.Element()
		if fe.Type().IsSetType() {
			k = val
		}
		ctx := base.NewChild()
		ctx.Variables = map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{"key": k, "value": val})}
		out = append(out, instance{block: b, key: k.AsString(), ctx: ctx})
	}
	return out, true
}

// ofType expands every resource of a type.
func (e *evaluator) ofType(typ string) []instance {
	var out []instance
	for _, b := range e.c.ofType(typ) {
		is, ok := e.instances(b)
		if !ok {
			out = append(out, instance{block: b, ctx: e.ctx()})
			continue
		}
		out = append(out, is...)
	}
	return out
}

// dynBlocks returns the blocks of a type inside body with the context
// each evaluates in: static blocks, and the content of each dynamic block
// expanded over its for_each (iterator named after the block type).
func dynBlocks(body *hclsyntax.Body, typ string, ctx *hcl.EvalContext) []struct {
	body *hclsyntax.Body
	ctx  *hcl.EvalContext
} {
	type bc = struct {
		body *hclsyntax.Body
		ctx  *hcl.EvalContext
	}
	var out []bc
	for _, b := range children(body, typ) {
		out = append(out, bc{b.Body, ctx})
	}
	for _, d := range children(body, "dynamic") {
		if len(d.Labels) != 1 || d.Labels[0] != typ {
			continue
		}
		fe := attr(d.Body, "for_each")
		content := child(d.Body, "content")
		if fe == nil || content == nil {
			continue
		}
		v, diags := fe.Expr.Value(ctx)
		if diags.HasErrors() || !v.IsWhollyKnown() || !v.CanIterateElements() {
			continue
		}
		for it := v.ElementIterator(); it.Next(); {
			k, val := it.Element()
			if v.Type().IsSetType() {
				k = val
			}
			c := ctx.NewChild()
			c.Variables = map[string]cty.Value{typ: cty.ObjectVal(map[string]cty.Value{"key": k, "value": val})}
			out = append(out, bc{content.Body, c})
		}
	}
	return out
}

// resourceOf strips the attribute from a symbol:
// `google_service_account.runtime["webhook"].email` -> `google_service_account.runtime["webhook"]`.
func resourceOf(symbol string) string {
	i := strings.LastIndex(symbol, ".")
	if i < 0 {
		return symbol
	}
	return symbol[:i]
}
