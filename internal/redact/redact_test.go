package redact_test

import (
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/redact"
)

// TestMask: whole secrets, and secrets cut short by a bounded error text
// (a prefix followed by "..."), are masked; other text, short prefixes and
// a prefix not at a cut are left alone.
func TestMask(t *testing.T) {
	const key = "AIzaSyD-distinctive-proxy-key-0123456789"
	for _, c := range []struct{ in, want string }{
		{"x-goog-api-key: " + key + " end", "x-goog-api-key: [REDACTED] end"},
		{"x-goog-api-key: " + key[:28] + "... (check GEMINI_API_KEY)", "x-goog-api-key: [REDACTED]... (check GEMINI_API_KEY)"},
		{"body " + key[:5] + "...", "body [REDACTED]..."},
		{"body " + key[:3] + "...", "body " + key[:3] + "..."},
		{"mentions " + key[:10] + " without a cut", "mentions " + key[:10] + " without a cut"},
		{"nothing secret...", "nothing secret..."},
	} {
		if got := redact.Mask(c.in, "", key); got != c.want {
			t.Errorf("Mask(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	two := redact.Mask("a whsec_c2VjcmV0LXNlY3JldA and "+key[:20]+"...", key, "whsec_c2VjcmV0LXNlY3JldA")
	if strings.Contains(two, "whsec_c2V") || strings.Contains(two, key[:8]) {
		t.Errorf("two secrets: %q", two)
	}
}
