package webhook

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TestJWTClaimSetChecks covers the claim checks the fixture tokens do not
// reach: an iat in the future (past the leeway) is not yet valid, and a
// correctly signed payload that is not a JWT claim set is a bad token.
func TestJWTClaimSetChecks(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: string(jose.RS256), Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := newJWKSServer(t, jwks)
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	v := mustVerifier(t, Config{JWKSURL: srv.URL, HTTPClient: srv.Client(), Now: func() time.Time { return now }})
	sign := func(payload string) string {
		t.Helper()
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1").WithType("JWT"))
		if err != nil {
			t.Fatal(err)
		}
		jws, err := s.Sign([]byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jws.CompactSerialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	exp := now.Add(time.Hour).Unix()
	for _, c := range []struct {
		name, payload, reason, detail string
	}{
		{"valid", `{"exp":` + itoa(exp) + `,"jti":"j1"}`, "", ""},
		{"iat in the future", `{"exp":` + itoa(exp) + `,"iat":` + itoa(now.Add(10*time.Minute).Unix()) + `}`, ReasonTokenNotYetValid, "iat is in the future"},
		{"iat within the leeway", `{"exp":` + itoa(exp) + `,"iat":` + itoa(now.Add(30*time.Second).Unix()) + `}`, "", ""},
		{"exp not a number", `{"exp":"tomorrow"}`, ReasonBadToken, "claims are not a valid JWT claim set"},
		{"payload not an object", `[1,2]`, ReasonBadToken, "claims are not a valid JWT claim set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := v.Verify(t.Context(), headers("", "", sign(c.payload)), []byte(`{}`))
			if c.reason == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			var ve *Error
			if !errors.As(err, &ve) || ve.Reason != c.reason || !strings.Contains(ve.Error(), c.detail) {
				t.Fatalf("Verify = %v, want %s (%s)", err, c.reason, c.detail)
			}
		})
	}
}
