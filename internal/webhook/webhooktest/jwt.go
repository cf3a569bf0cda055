package webhooktest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// JWTSigner signs dynamic-webhook deliveries: RS256 JWTs in
// webhook-signature, verifiable with the JWKS it serves.
type JWTSigner struct {
	key *rsa.PrivateKey
	kid string
}

// NewJWTSigner makes a fresh 2048-bit RSA key published under kid.
func NewJWTSigner(kid string) (*JWTSigner, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate RSA key: %w", err)
	}
	return &JWTSigner{key: key, kid: kid}, nil
}

// ServeHTTP answers with the JWKS holding the signer's public key.
func (s *JWTSigner) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{s.JWK()}})
}

// Token signs claims as a compact RS256 JWS with the signer's kid.
func (s *JWTSigner) Token(claims jwt.Claims) (string, error) {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: s.key},
		(&jose.SignerOptions{}).WithHeader("kid", s.kid).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("new signer: %w", err)
	}
	return jwt.Signed(sig).Claims(claims).Serialize()
}

// JWTHeaders returns the headers of a dynamic-webhook delivery.
func JWTHeaders(id, token string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-signature", token)
	h.Set("Content-Type", "application/json")
	return h
}

// JWK is the signer's public key as published in the JWKS.
func (s *JWTSigner) JWK() jose.JSONWebKey {
	return jose.JSONWebKey{Key: &s.key.PublicKey, KeyID: s.kid, Algorithm: string(jose.RS256), Use: "sig"}
}

// Raw signs msg with the signer's RSA key (RS256 over msg, no JWS): a
// signature made with the wrong kind of key, for alg-confusion tests.
func (s *JWTSigner) Raw(msg []byte) ([]byte, error) {
	sum := sha256.Sum256(msg)
	return rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, sum[:])
}
