package ledger

import (
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/results"
)

// The stores keep EncodeJSONString's text where they kept
// string(EncodeJSON(v)): the two must never differ.
func TestEncodeJSONStringIsEncodeJSON(t *testing.T) {
	for _, v := range []any{
		nil,
		map[string]any(nil),
		map[string]any{"a<b": "x & y > z", "n": 1.5, "nested": []any{"\u2028", map[string]any{}}},
		[]HistoryEntry{{At: time.Date(2026, 11, 25, 13, 0, 0, 1, time.UTC), Source: "webhook", Reason: "applied"}},
		results.Message{Operation: "batches/b1", Output: map[string]any{"html": "<p>"}},
		"line\nbreak",
	} {
		b, err := EncodeJSON(v)
		if err != nil {
			t.Fatalf("EncodeJSON(%#v): %v", v, err)
		}
		s, err := EncodeJSONString(v)
		if err != nil {
			t.Fatalf("EncodeJSONString(%#v): %v", v, err)
		}
		if s != string(b) {
			t.Errorf("EncodeJSONString(%#v) = %q, EncodeJSON = %q", v, s, b)
		}
		if len(s) > 0 && s[len(s)-1] == '\n' {
			t.Errorf("EncodeJSONString(%#v) = %q ends in a newline", v, s)
		}
	}
	if _, err := EncodeJSONString(map[string]any{"f": func() {}}); err == nil {
		t.Error("EncodeJSONString of a func: no error")
	}
}
