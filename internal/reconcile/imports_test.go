package reconcile_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestReconcileDependsOnPortsNotAdapters: the reconciler knows Gemini only
// through its Fetcher and WebhookLister ports and the error kinds of
// internal/fetcherr; no non-test file imports an adapter. (Tests may: they
// drive the real adapter against the fake Gemini.)
func TestReconcileDependsOnPortsNotAdapters(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	adapters := map[string]bool{}
	for _, p := range []string{"gemini", "fakegemini", "ledger/fsledger", "ledger/sqliteledger", "sink"} {
		adapters["github.com/lrosink/lrosink/internal/"+p] = true
	}
	if len(pkg.Imports) == 0 {
		t.Fatal("no imports read: the test would prove nothing")
	}
	for _, imp := range pkg.Imports {
		if adapters[imp] {
			t.Errorf("internal/reconcile imports the adapter %s (files %v); depend on a port instead", imp, pkg.GoFiles)
		}
	}
}

// TestAdaptersDependOnLeavesNotCore: the adapters (the Gemini client, the
// webhook verifier, the ledger stores) share types with the core through
// internal/event, a leaf, never by importing the door or the reconciler;
// and internal/event imports only packages that import nothing of lrosink.
func TestAdaptersDependOnLeavesNotCore(t *testing.T) {
	const mod = "github.com/lrosink/lrosink/internal/"
	core := map[string]bool{mod + "ingest": true, mod + "reconcile": true}
	for _, dir := range []string{"gemini", "webhook", "ledger/fsledger", "ledger/sqliteledger", "ledger/memledger"} {
		pkg, err := build.ImportDir("../"+dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(pkg.Imports) == 0 {
			t.Fatalf("%s: no imports read: the test would prove nothing", dir)
		}
		for _, imp := range pkg.Imports {
			if core[imp] {
				t.Errorf("adapter internal/%s imports %s; depend on the leaf internal/event instead", dir, imp)
			}
		}
	}

	leaf, err := build.ImportDir("../event", 0)
	if err != nil {
		t.Fatal(err)
	}
	own := 0
	for _, imp := range leaf.Imports {
		rel, ok := strings.CutPrefix(imp, mod)
		if !ok {
			continue
		}
		own++
		dep, err := build.ImportDir("../"+rel, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dep.Imports {
			if strings.HasPrefix(d, "github.com/lrosink/lrosink/") {
				t.Errorf("internal/event imports %s, which imports %s: a leaf may import only packages that import nothing of lrosink", imp, d)
			}
		}
	}
	if own == 0 {
		t.Fatal("internal/event imports nothing of lrosink: the leaf check would prove nothing")
	}
}
