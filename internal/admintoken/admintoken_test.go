package admintoken

import "testing"

func TestMatchesAndBearer(t *testing.T) {
	tok := New("0123456789abcdef")
	if !tok.Matches("0123456789abcdef") || tok.Matches("0123456789abcdeF") || tok.Matches("") || New("").Matches("") {
		t.Fatal("Matches")
	}
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer": "", "Bearer  ": ""} {
		if got, ok := Bearer(h); got != want || ok != (want != "") {
			t.Errorf("Bearer(%q) = %q, %v", h, got, ok)
		}
	}
}
