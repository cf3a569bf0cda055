package webhooktest

import (
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestSecretKeyForms: a whsk_ key reads back from its 64-byte form and from
// the 32-byte seed openssl gives; a 64-byte form whose halves disagree, a
// wrong prefix or length is refused without quoting the key.
func TestSecretKeyForms(t *testing.T) {
	k := NewEd25519Key()
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(k.SecretKey(), "whsk_"))
	if err != nil || len(raw) != ed25519.PrivateKeySize {
		t.Fatalf("SecretKey is not a base64 64-byte key: %v", err)
	}
	now := time.Unix(1767000000, 0)
	body := []byte(`{}`)
	for _, s := range []string{k.SecretKey(), "whsk_" + base64.StdEncoding.EncodeToString(raw[:ed25519.SeedSize]) + "\n"} {
		got, err := ParseSecretKey(s)
		if err != nil || got.Signature("m", now, body) != k.Signature("m", now, body) || got.PublicKey() != k.PublicKey() {
			t.Fatalf("round trip: %v", err)
		}
	}
	mismatch := append(append([]byte{}, raw[:ed25519.SeedSize]...), make([]byte, ed25519.PublicKeySize)...)
	tail := base64.StdEncoding.EncodeToString(raw)
	for _, bad := range []string{"whsk_" + base64.StdEncoding.EncodeToString(mismatch), "whsec_" + tail, "whsk_" + tail[:20], "whsk_%%"} {
		_, err := ParseSecretKey(bad)
		if err == nil || strings.Contains(err.Error(), tail[:16]) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}
