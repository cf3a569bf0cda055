package results

import (
	"encoding/json"
	"testing"
)

// api_name travels in the data (null when unknown) and, when known, as an
// attribute, so a consumer can call operations.get without decoding.
func TestAPINameInDataAndAttributes(t *testing.T) {
	for _, tc := range []struct {
		api      APIName
		wantData any
	}{
		{"models/veo-3.0-generate-001/operations/vid1", "models/veo-3.0-generate-001/operations/vid1"},
		{"", nil},
	} {
		m := Message{Operation: "operations/vid1", APIName: tc.api, Kind: "video", State: "SUCCEEDED"}
		b, err := m.Data()
		if err != nil {
			t.Fatal(err)
		}
		var data map[string]any
		if err := json.Unmarshal(b, &data); err != nil {
			t.Fatal(err)
		}
		if v, ok := data["api_name"]; !ok || v != tc.wantData {
			t.Errorf("data api_name = %v (present %v), want %v", v, ok, tc.wantData)
		}
		a, ok := m.Attributes()["api_name"]
		if ok != (tc.api != "") || a != string(tc.api) {
			t.Errorf("attribute api_name = %q (present %v), want %q", a, ok, tc.api)
		}
		var back Message
		if err := json.Unmarshal(b, &back); err != nil || back.APIName != tc.api {
			t.Errorf("decoded api_name %q (%v), want %q", back.APIName, err, tc.api)
		}
	}
}

// AppendAttributesJSON writes exactly json.Marshal(m.Attributes()), for
// plain values and for values json.Marshal escapes.
func TestAppendAttributesJSONIsMarshalOfAttributes(t *testing.T) {
	values := []string{"", "batches/b1", "gemini:batches/b1", "SUCCEEDED", "a\"b", `back\slash`, "<script>&</script>",
		"tab\t", "\x00\x7f", "caf\u00e9", "\u2028", "bad\xff"}
	n := 0
	for _, op := range values {
		for _, api := range values {
			for _, replay := range values {
				m := Message{Operation: op, APIName: APIName(api), Kind: values[n%len(values)], State: values[(n/3)%len(values)],
					IdempotencyKey: values[(n/7)%len(values)], ReplayID: replay}
				n++
				want, err := json.Marshal(m.Attributes())
				if err != nil {
					t.Fatal(err)
				}
				if got := m.AppendAttributesJSON([]byte("x")); string(got) != "x"+string(want) {
					t.Fatalf("AppendAttributesJSON(%+v) = %s, want x%s", m, got, want)
				}
			}
		}
	}
}

// The null-when-empty names encode as json.Marshal encodes the string.
func TestNullIfEmptyIsMarshal(t *testing.T) {
	for _, s := range []string{"", "batch.succeeded", "models/veo/operations/o1", "<b>&amp;", `q"\`, "\u2028\xff\x01"} {
		got, err := nullIfEmpty(s)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(s)
		if s == "" {
			want = []byte("null")
		}
		if string(got) != string(want) {
			t.Errorf("nullIfEmpty(%q) = %s, want %s", s, got, want)
		}
	}
}
