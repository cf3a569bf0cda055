package sqliteledger

import (
	"database/sql"
	"testing"
	"time"
)

// TestNamedValues: statement arguments convert as database/sql would for
// the types the adapter passes (int to int64, a Valuer to its value), and
// any other type is an error rather than something SQLite stores as it
// pleases.
func TestNamedValues(t *testing.T) {
	nv, err := namedValues([]any{nil, int64(1), 2, "s", sql.NullInt64{Int64: 3, Valid: true}, sql.NullString{}})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{nil, int64(1), int64(2), "s", int64(3), nil}
	for i, v := range nv {
		if v.Ordinal != i+1 || v.Value != want[i] {
			t.Errorf("argument %d: %+v, want ordinal %d value %#v", i+1, v, i+1, want[i])
		}
	}
	for _, bad := range []any{time.Second, uint8(1), struct{}{}} {
		if _, err := namedValues([]any{bad}); err == nil {
			t.Errorf("%T: no error", bad)
		}
	}
}
