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
	nv, err := appendNamedValues(nil, []any{nil, int64(1), 2, "s", sql.NullInt64{Int64: 3, Valid: true}, sql.NullString{}})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{nil, int64(1), int64(2), "s", int64(3), nil}
	if len(nv) != len(want) {
		t.Fatalf("%d arguments, want %d", len(nv), len(want))
	}
	for i, v := range nv {
		if v.Ordinal != i+1 || v.Value != want[i] {
			t.Errorf("argument %d: %+v, want ordinal %d value %#v", i+1, v, i+1, want[i])
		}
	}
	for _, bad := range []any{time.Second, uint8(1), struct{}{}} {
		if _, err := appendNamedValues(nil, []any{bad}); err == nil {
			t.Errorf("%T: no error", bad)
		}
	}
}

// TestWriterArgumentsReuseOneSlice: the writer converts each statement's
// arguments into the same slice, holding only that statement's.
func TestWriterArgumentsReuseOneSlice(t *testing.T) {
	w := &wtx{}
	first, err := w.args([]any{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := w.args([]any{"d"})
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 1 || second[0].Value != "d" || second[0].Ordinal != 1 {
		t.Fatalf("second statement's arguments: %+v, want only d at ordinal 1", second)
	}
	if &first[0] != &second[0] {
		t.Error("the second statement's arguments are in a new slice")
	}
}
