package reconcile_test

import (
	"go/build"
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
	for _, p := range []string{"gemini", "fakegemini", "ledger/firestore", "ledger/sqlite", "sink"} {
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
