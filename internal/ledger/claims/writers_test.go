package claims_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// owners may write claim state: the protocol, the port that defines it,
// and the adapters (which decode stored claims and apply writes).
var owners = []string{
	"internal/ledger/claims",
	"internal/ledger",
	"internal/ledger/memledger",
	"internal/ledger/sqliteledger",
	"internal/ledger/fsledger",
}

// claimFields are the fields of a ledger.Claim that carry its state. The
// holder's token and its lease's end are the caller's inputs (the door
// chooses them, as it passes them to SeizeClaim), not state.
var claimFields = []string{"Status", "Attempts", "DoneAt"}

// claimWrites are the port's constructors of claim-state writes.
var claimWrites = []string{"PutClaim", "PatchMirror"}

// TestOnlyTheProtocolWritesClaimState reads every non-test Go file of
// internal/ and cmd/ and reports, outside the owners above, any place that
// builds a claim-state write (ledger.PutClaim, ledger.PatchMirror, a
// ledger.Write or ledger.Mirror literal), a ledger.EffectMirror literal, a
// ledger.Claim literal that sets Status, Attempts or DoneAt, an assignment
// to an operation's Effect, or an assignment of a claim status
// (ledger.ClaimHeld, ClaimReleased, ClaimDone) or to an Attempts or DoneAt
// field. The rules of the claim protocol then live in one package. It reads
// syntax, not types: a finding names a place to look.
func TestOnlyTheProtocolWritesClaimState(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	var found []string
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			dir := filepath.ToSlash(filepath.Dir(rel))
			// Test-support packages (ledgertest, claimstest) build
			// documents and forged leases on purpose.
			if slices.Contains(owners, dir) || strings.HasSuffix(dir, "test") {
				return nil
			}
			found = append(found, claimStateWrites(t, path, rel)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range found {
		t.Errorf("claim state written outside internal/ledger/claims: %s", f)
	}
}

// claimStateWrites returns where the file at path writes claim state.
func claimStateWrites(t *testing.T, path, rel string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	report := func(n ast.Node, what string) {
		out = append(out, rel+":"+itoa(fset.Position(n.Pos()).Line)+": "+what)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if name, ok := ledgerName(n.Fun); ok && slices.Contains(claimWrites, name) {
				report(n, "ledger."+name)
			}
		case *ast.CompositeLit:
			name, _ := ledgerName(n.Type)
			switch name {
			case "Write", "Mirror":
				report(n, "a ledger."+name+" literal")
			case "EffectMirror":
				if len(n.Elts) > 0 {
					report(n, "a ledger.EffectMirror literal")
				}
			case "Claim":
				for _, e := range n.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && slices.Contains(claimFields, k.Name) {
							report(kv, "ledger."+name+"{"+k.Name+": ...}")
						}
					}
				}
			}
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				sel, ok := lhs.(*ast.SelectorExpr)
				if !ok {
					continue
				}
				switch {
				case sel.Sel.Name == "Effect":
					report(n, "an assignment to an operation's Effect")
				case sel.Sel.Name == "Attempts" || sel.Sel.Name == "DoneAt":
					report(n, "an assignment to "+sel.Sel.Name)
				case i < len(n.Rhs) && isClaimStatus(n.Rhs[i]):
					report(n, "an assignment of a claim status")
				}
			}
		}
		return true
	})
	return out
}

// ledgerName returns Name for an expression ledger.Name.
func ledgerName(e ast.Expr) (string, bool) {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "ledger" {
		return "", false
	}
	return sel.Sel.Name, true
}

func isClaimStatus(e ast.Expr) bool {
	name, ok := ledgerName(e)
	return ok && (name == "ClaimHeld" || name == "ClaimReleased" || name == "ClaimDone")
}

func itoa(n int) string {
	var b []byte
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
