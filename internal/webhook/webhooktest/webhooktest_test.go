package webhooktest

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/lrosink/lrosink/internal/webhook"
)

// TestSignedByThisPackageVerifies ties the helper to the real verifier, and
// checks the Standard Webhooks spec example value.
func TestSignedByThisPackageVerifies(t *testing.T) {
	secret := NewSecret()
	now := time.Unix(1767000000, 0)
	v, err := webhook.NewVerifier(webhook.Config{Secrets: []string{secret}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"batch.succeeded","data":{"id":"batches/x"}}`)
	if _, err := v.Verify(t.Context(), Headers("msg_1", now, body, secret), body); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if _, err := v.Verify(t.Context(), Headers("msg_1", now, body, NewSecret()), body); err == nil {
		t.Fatal("a signature with another secret verified")
	}
	got := Signature("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if got != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Fatalf("spec example signature %s", got)
	}
}

// TestJWTSignerVerifies ties the JWT helper to the real verifier: its token
// verifies against the JWKS it serves, and another signer's does not.
func TestJWTSignerVerifies(t *testing.T) {
	now := time.Unix(1767000000, 0)
	s, err := NewJWTSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewJWTSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	v, err := webhook.NewVerifier(webhook.Config{JWKSURL: srv.URL, HTTPClient: srv.Client(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	claims := jwt.Claims{Expiry: jwt.NewNumericDate(now.Add(time.Minute)), ID: "j1"}
	good, err := s.Token(claims)
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Verify(t.Context(), JWTHeaders("msg_1", good), []byte(`{}`))
	if err != nil || got.Method != webhook.MethodJWT || got.ID != "msg_1" {
		t.Fatalf("verify: %+v %v", got, err)
	}
	forged, err := other.Token(claims)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(t.Context(), JWTHeaders("msg_1", forged), []byte(`{}`)); err == nil {
		t.Fatal("another key's token verified")
	}
}
