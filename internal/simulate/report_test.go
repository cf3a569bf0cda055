package simulate

import (
	"strings"
	"testing"
)

// TestExtrasAreAttributedByCause: one key's extras go to the causes seen
// for it, each capped by what is left, the rest to Other; the text report
// prints the split.
func TestExtrasAreAttributedByCause(t *testing.T) {
	var rep Report
	attributeExtras(&rep, 3, 1, 1, true)  // one of each
	attributeExtras(&rep, 1, 0, 2, false) // more causes than extras: capped
	attributeExtras(&rep, 2, 0, 0, false) // nothing explains these
	attributeExtras(&rep, 0, 1, 1, true)  // causes without extras count nothing
	c := rep.Final.ExtraByCause
	if c.CrashAfterPublish != 1 || c.DoneCommitError != 2 || c.LeaseExpired != 1 || c.Other != 2 {
		t.Fatalf("by cause %+v, want crash 1, done 2, lease 1, other 2", c)
	}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if want := "extras by cause    1 kill after publish, 2 DONE-commit error, 1 lease expired mid-effect, 2 other"; !strings.Contains(b.String(), want) {
		t.Fatalf("text report lacks %q:\n%s", want, b.String())
	}
}
