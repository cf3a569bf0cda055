package deploy_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// query is one entry of terraform/queries.json: a Firestore query the code
// runs, and what serves it in production.
type query struct {
	Function   string   `json:"function"`
	Collection string   `json:"collection"`
	Filters    []filter `json:"filters"`
	OrderBy    []order  `json:"order_by"`
	// Index is "single-field" (served by Firestore's automatic single-field
	// indexes) or "google_firestore_index.<name>".
	Index string `json:"index"`
}

type filter struct {
	Field string `json:"field"`
	Op    string `json:"op"`
}

type order struct {
	Field     string `json:"field"`
	Direction string `json:"direction"` // ASCENDING or DESCENDING
}

func (q query) String() string {
	return fmt.Sprintf("%s on %s where %v order by %v", q.Function, q.Collection, q.Filters, q.OrderBy)
}

func loadQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(queriesFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var qs []query
	if err := dec.Decode(&qs); err != nil {
		t.Fatalf("%s: %v", queriesFile, err)
	}
	if len(qs) == 0 {
		t.Fatalf("%s lists no queries", queriesFile)
	}
	for _, q := range qs {
		if q.Function == "" || q.Collection == "" || q.Index == "" {
			t.Errorf("%s: %v: function, collection and index are required", queriesFile, q)
		}
		for _, o := range q.OrderBy {
			if o.Direction != "ASCENDING" && o.Direction != "DESCENDING" {
				t.Errorf("%s: %v: direction %q is not ASCENDING or DESCENDING", queriesFile, q, o.Direction)
			}
		}
	}
	return qs
}

// fields lists the distinct fields a query filters or orders on, except
// the document id (__name__): every index entry holds it, so ordering by it
// last needs no index of its own.
func (q query) fields() []string {
	var out []string
	for _, f := range q.Filters {
		if !slices.Contains(out, f.Field) {
			out = append(out, f.Field)
		}
	}
	for i, o := range q.OrderBy {
		if o.Field == "__name__" && i == len(q.OrderBy)-1 {
			continue
		}
		if !slices.Contains(out, o.Field) {
			out = append(out, o.Field)
		}
	}
	return out
}

// indexFields is the composite index a query needs: equality fields first,
// then the order, then any range field not already ordered on (Firestore
// orders on it implicitly).
func (q query) indexFields() (equality []string, rest []order) {
	for _, f := range q.Filters {
		if f.Op == "==" || f.Op == "in" || f.Op == "array-contains" {
			equality = append(equality, f.Field)
		}
	}
	rest = append(rest, q.OrderBy...)
	// A last order on __name__ in the direction of the one before is the
	// order every index entry has anyway: no field of the index.
	if n := len(rest); n >= 2 && rest[n-1].Field == "__name__" && rest[n-1].Direction == rest[n-2].Direction {
		rest = rest[:n-1]
	}
	for _, f := range q.Filters {
		if slices.Contains(equality, f.Field) {
			continue
		}
		if !slices.ContainsFunc(rest, func(o order) bool { return o.Field == f.Field }) {
			rest = append(rest, order{Field: f.Field, Direction: "ASCENDING"})
		}
	}
	return equality, rest
}

// Every query in queries.json is served by an index: single-field queries
// really touch one field, and every other query names a
// google_firestore_index with the same collection and fields. The emulator
// never enforces indexes, so this is the only check before production.
func TestFirestoreQueriesHaveIndexes(t *testing.T) {
	c := loadConfig(t)
	used := map[string]bool{}
	for _, q := range loadQueries(t) {
		if q.Index == "single-field" {
			if f := q.fields(); len(f) > 1 {
				t.Errorf("%v: marked single-field but uses fields %v: it needs a composite google_firestore_index", q, f)
			}
			continue
		}
		name, ok := strings.CutPrefix(q.Index, "google_firestore_index.")
		if !ok {
			t.Errorf("%v: index %q is neither single-field nor google_firestore_index.<name>", q, q.Index)
			continue
		}
		idx, ok := c.resources[q.Index]
		if !ok {
			t.Errorf("%v: %s is not declared in terraform/", q, q.Index)
			continue
		}
		used[name] = true
		if coll, _ := literal(attr(idx.Body, "collection")); coll != q.Collection {
			t.Errorf("%v: %s is on collection %q, want %q", q, idx, coll, q.Collection)
		}
		if scope, ok := literal(attr(idx.Body, "query_scope")); ok && scope != "COLLECTION" {
			t.Errorf("%s: query_scope %q; the ledger's queries are collection queries", idx, scope)
		}
		var got []order
		for _, f := range children(idx.Body, "fields") {
			path, _ := literal(attr(f.Body, "field_path"))
			dir, _ := literal(attr(f.Body, "order"))
			if path == "__name__" {
				continue // Firestore appends it implicitly anyway
			}
			got = append(got, order{Field: path, Direction: dir})
		}
		eq, rest := q.indexFields()
		if len(got) != len(eq)+len(rest) {
			t.Errorf("%v: %s has fields %v, want equality fields %v then %v", q, idx, got, eq, rest)
			continue
		}
		var gotEq []string
		for _, g := range got[:len(eq)] {
			gotEq = append(gotEq, g.Field)
		}
		sort.Strings(gotEq)
		wantEq := slices.Clone(eq)
		sort.Strings(wantEq)
		if !slices.Equal(gotEq, wantEq) || !slices.Equal(got[len(eq):], rest) {
			t.Errorf("%v: %s has fields %v, want equality fields %v then %v", q, idx, got, eq, rest)
		}
	}
	for _, idx := range c.ofType("google_firestore_index") {
		if !used[idx.Labels[1]] {
			t.Errorf("%s: no query in queries.json uses it (stale index, or a query missing from queries.json)", idx)
		}
	}
}

// Fields exempted from indexing (google_firestore_field with an empty
// index_config) are used by no query, and claims carry the TTL policy.
func TestFirestoreFieldOverrides(t *testing.T) {
	c := loadConfig(t)
	queries := loadQueries(t)
	ttl := map[string]bool{}
	for _, f := range c.ofType("google_firestore_field") {
		ctxs, ok := c.instances(f)
		if !ok {
			t.Errorf("%s: cannot expand for_each without a provider; use a literal local", f)
			continue
		}
		for _, ctx := range ctxs {
			coll, ok1 := evalString(attr(f.Body, "collection"), ctx)
			field, ok2 := evalString(attr(f.Body, "field"), ctx)
			if !ok1 || !ok2 {
				t.Errorf("%s: collection and field must be literals (or each.value of a literal local)", f)
				continue
			}
			if child(f.Body, "ttl_config") != nil {
				ttl[coll+"."+field] = true
			}
			ic := child(f.Body, "index_config")
			if ic == nil || len(children(ic.Body, "indexes")) > 0 {
				continue
			}
			for _, q := range queries {
				if q.Collection == coll && slices.Contains(q.fields(), field) {
					t.Errorf("%s exempts %s.%s from indexing, but query %v uses it", f, coll, field, q)
				}
			}
		}
	}
	if !ttl["claims.expire_at"] {
		t.Error("no google_firestore_field with ttl_config on claims.expire_at")
	}
}

// goQuery is what the Go source tells about one function's queries.
type goQuery struct {
	function    string
	collections []string
	filters     []filter
	orders      []order
	conditional []filter // filters added under an if
	pos         token.Position
}

// goQueries reads firestore.go with go/parser (the AST, not a regex): every
// function calling .Where( or .OrderBy( is a query function; its
// collection comes from .Collection(X) (X a string constant of the file),
// its filters and orders from the call arguments, which must be literals.
func goQueries(t *testing.T) map[string]*goQuery {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, firestoreGo, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					if bl, ok := vs.Values[i].(*ast.BasicLit); ok && bl.Kind == token.STRING {
						consts[n.Name], _ = strconv.Unquote(bl.Value)
					}
				}
			}
		}
	}
	str := func(e ast.Expr) (string, bool) {
		switch x := e.(type) {
		case *ast.BasicLit:
			if x.Kind == token.STRING {
				s, err := strconv.Unquote(x.Value)
				return s, err == nil
			}
		case *ast.Ident:
			s, ok := consts[x.Name]
			return s, ok
		}
		return "", false
	}
	out := map[string]*goQuery{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		g := &goQuery{function: fd.Name.Name, pos: fset.Position(fd.Pos())}
		// Calls under an if are conditional parts of the query.
		conditional := map[*ast.CallExpr]bool{}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if is, ok := n.(*ast.IfStmt); ok {
				// Either branch of an if is conditional: a filter in the
				// else is applied only when the condition is false.
				for _, branch := range []ast.Node{is.Body, is.Else} {
					if branch == nil {
						continue
					}
					ast.Inspect(branch, func(m ast.Node) bool {
						if call, ok := m.(*ast.CallExpr); ok {
							conditional[call] = true
						}
						return true
					})
				}
			}
			return true
		})
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			at := fset.Position(call.Pos())
			switch sel.Sel.Name {
			case "Collection":
				if len(call.Args) == 1 {
					if s, ok := str(call.Args[0]); ok {
						g.collections = append(g.collections, s)
					}
				}
			case "Where":
				field, ok1, op, ok2 := "", false, "", false
				if len(call.Args) == 3 {
					field, ok1 = str(call.Args[0])
					op, ok2 = str(call.Args[1])
				}
				if !ok1 || !ok2 {
					t.Errorf("%s: .Where( with a non-literal field or operator: write literals so this test (and a reader) can see the query", at)
					return true
				}
				fl := filter{Field: field, Op: op}
				g.filters = append(g.filters, fl)
				if conditional[call] {
					g.conditional = append(g.conditional, fl)
				}
			case "OrderBy":
				field, ok, dir := "", false, ""
				if len(call.Args) == 2 {
					field, ok = str(call.Args[0])
					if ds, isSel := call.Args[1].(*ast.SelectorExpr); isSel {
						dir = map[string]string{"Asc": "ASCENDING", "Desc": "DESCENDING"}[ds.Sel.Name]
					}
				}
				if !ok || dir == "" {
					t.Errorf("%s: .OrderBy( with a non-literal field or direction (want \"field\", firestore.Asc|Desc)", at)
					return true
				}
				g.orders = append(g.orders, order{Field: field, Direction: dir})
			}
			return true
		})
		if len(g.filters) > 0 || len(g.orders) > 0 {
			out[g.function] = g
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: found no .Where( or .OrderBy( calls; has the ledger moved?", firestoreGo)
	}
	return out
}

// Every query firestore.go runs is listed in queries.json (and nothing
// else is): a new query cannot reach production without someone deciding
// which index serves it.
func TestQueriesJSONCoversFirestoreGo(t *testing.T) {
	code := goQueries(t)
	listed := map[string][]query{}
	for _, q := range loadQueries(t) {
		listed[q.Function] = append(listed[q.Function], q)
	}
	for name, g := range code {
		qs := listed[name]
		if len(qs) == 0 {
			t.Errorf("%s: %s queries Firestore (where %v, order by %v) but has no entry in terraform/queries.json", g.pos, name, g.filters, g.orders)
			continue
		}
		if len(g.collections) != 1 {
			t.Errorf("%s: %s: want exactly one .Collection(<string constant>) call, found %v", g.pos, name, g.collections)
			continue
		}
		var allF []filter
		var allO []order
		for _, q := range qs {
			if q.Collection != g.collections[0] {
				t.Errorf("queries.json %v: collection %q, but %s queries %q", q, q.Collection, name, g.collections[0])
			}
			for _, f := range q.Filters {
				if !slices.Contains(g.filters, f) {
					t.Errorf("queries.json %v: filter %v is not in %s (code filters: %v)", q, f, name, g.filters)
				}
				allF = append(allF, f)
			}
			for _, o := range q.OrderBy {
				if !slices.Contains(g.orders, o) {
					t.Errorf("queries.json %v: order %v is not in %s (code orders: %v)", q, o, name, g.orders)
				}
				allO = append(allO, o)
			}
			// Unconditional parts are in every variant.
			for _, f := range g.filters {
				if !slices.Contains(g.conditional, f) && !slices.Contains(q.Filters, f) {
					t.Errorf("queries.json %v: lacks filter %v, which %s always applies", q, f, name)
				}
			}
			for _, o := range g.orders {
				if !slices.Contains(q.OrderBy, o) {
					t.Errorf("queries.json %v: lacks order %v, which %s always applies", q, o, name)
				}
			}
		}
		for _, f := range g.filters {
			if !slices.Contains(allF, f) {
				t.Errorf("%s: %s filters %v, but no queries.json entry has that filter", g.pos, name, f)
			}
		}
		for _, o := range g.orders {
			if !slices.Contains(allO, o) {
				t.Errorf("%s: %s orders by %v, but no queries.json entry has that order", g.pos, name, o)
			}
		}
		// A filter under an if makes two queries: with and without it.
		for _, f := range g.conditional {
			without := slices.ContainsFunc(qs, func(q query) bool { return !slices.Contains(q.Filters, f) })
			if !without {
				t.Errorf("%s: %s applies %v only conditionally, but every queries.json entry has it: list the query without it too", g.pos, name, f)
			}
		}
	}
	for name := range listed {
		if _, ok := code[name]; !ok {
			t.Errorf("terraform/queries.json lists %s, which has no query in %s (stale entry?)", name, firestoreGo)
		}
	}
}
