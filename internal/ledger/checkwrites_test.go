package ledger_test

import (
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/ledger"
)

// TestCheckWritesAllocatesNothing: the check every Apply runs first
// allocates nothing for a call it accepts, and still refuses two writes of
// one document, naming it.
func TestCheckWritesAllocatesNothing(t *testing.T) {
	op, c := ledger.Operation{ID: "a"}, ledger.Claim{ID: "a"}
	ok := []ledger.Write{ledger.PutOperation(op), ledger.PutClaim(c)}
	if n := testing.AllocsPerRun(100, func() {
		if err := ledger.CheckWrites(ok); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("CheckWrites allocated %v times per call, want 0", n)
	}
	twice := []ledger.Write{ledger.PutClaim(c), ledger.PatchMirror("b", ledger.EffectMirror{}), ledger.PatchSchedule(ledger.Operation{ID: "b"})}
	if err := ledger.CheckWrites(twice); err == nil || !strings.Contains(err.Error(), "write 2: a second write of operations/b") {
		t.Fatalf("ledger.CheckWrites(two writes of operations/b) = %v", err)
	}
}
