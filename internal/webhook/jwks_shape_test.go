package webhook

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"
)

// TestParseJWKSEd25519Shapes: Google's exact JWK fields for its Ed25519 keys
// are unpublished, so every plausible spelling of a public OKP Ed25519 key
// is kept for v1a, and only spellings that say the key is not for
// signatures (use enc) or name another algorithm are dropped.
func TestParseJWKSEd25519Shapes(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	x := base64.RawURLEncoding.EncodeToString(pub)
	for _, tc := range []struct {
		extra string
		keep  bool
	}{
		{``, true},
		{`,"kid":"k1"`, true},
		{`,"alg":"EdDSA","use":"sig","kid":"k1"`, true},
		{`,"alg":"Ed25519"`, true},
		{`,"key_ops":["verify"]`, true},
		{`,"use":"enc"`, false},
		{`,"alg":"RS256"`, false},
	} {
		raw := fmt.Sprintf(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":%q%s}]}`, x, tc.extra)
		set, err := parseJWKS([]byte(raw))
		kept := err == nil && len(set.ed) == 1 && pub.Equal(set.ed[0])
		if kept != tc.keep {
			t.Errorf("%s: kept %v (err %v), want %v", raw, kept, err, tc.keep)
		}
	}
}
