package sqliteledger

import (
	"database/sql"
	"testing"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/results"
)

// marshalsNil is a map type whose MarshalJSON speaks even for a nil map:
// the encoder must run for it.
type marshalsNil map[string]any

func (marshalsNil) MarshalJSON() ([]byte, error) { return []byte(`"always"`), nil }

// toJSON skips the encoder for what it would write as null, and stores
// exactly what the encoder writes for anything else.
func TestToJSONIsTheEncoderWithoutNulls(t *testing.T) {
	for _, v := range []any{
		nil, map[string]any(nil), map[string]any{}, map[string]any{"a": 1},
		[]ledger.HistoryEntry(nil), []ledger.HistoryEntry{}, []ledger.HistoryEntry{{Source: "webhook"}},
		(*results.ErrorInfo)(nil), &results.ErrorInfo{Code: 3}, []ledger.Replay(nil),
		marshalsNil(nil), "text", 0,
	} {
		s, err := ledger.EncodeJSONString(v)
		if err != nil {
			t.Fatal(err)
		}
		want := sql.NullString{String: s, Valid: s != "null"}
		if !want.Valid {
			want.String = ""
		}
		got, err := toJSON(v)
		if err != nil || got != want {
			t.Errorf("toJSON(%#v) = %#v, %v; want %#v", v, got, err, want)
		}
	}
}
