package webhooktest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Ed25519Key signs Standard Webhooks v1a entries, as Gemini signs
// dynamic-webhook deliveries live.
type Ed25519Key struct{ priv ed25519.PrivateKey }

// NewEd25519Key makes a fresh key pair.
func NewEd25519Key() *Ed25519Key {
	_, priv, _ := ed25519.GenerateKey(rand.Reader) // crypto/rand never fails
	return &Ed25519Key{priv: priv}
}

// ParseSecretKey reads a Standard Webhooks whsk_ secret key: "whsk_" and
// the base64 of the Ed25519 private key, either the 32-byte seed (what
// `openssl pkey -outform DER | tail -c 32` gives) or the 64-byte
// seed-and-public-key form (Go, libsodium). The error never quotes s.
func ParseSecretKey(s string) (*Ed25519Key, error) {
	tail, ok := strings.CutPrefix(strings.TrimSpace(s), "whsk_")
	if !ok {
		return nil, errors.New("lacks the whsk_ prefix")
	}
	raw, err := base64.StdEncoding.DecodeString(tail)
	if err != nil {
		return nil, errors.New("is not valid base64 after whsk_")
	}
	switch len(raw) {
	case ed25519.SeedSize:
		return &Ed25519Key{priv: ed25519.NewKeyFromSeed(raw)}, nil
	case ed25519.PrivateKeySize:
		k := ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize])
		if !k.Public().(ed25519.PublicKey).Equal(ed25519.PublicKey(raw[ed25519.SeedSize:])) {
			return nil, errors.New("has a public half that does not match its seed")
		}
		return &Ed25519Key{priv: k}, nil
	}
	return nil, errors.New("is not a 32- or 64-byte Ed25519 private key")
}

// SecretKey is the key's whsk_ form (64-byte private key). A secret.
func (k *Ed25519Key) SecretKey() string {
	return "whsk_" + base64.StdEncoding.EncodeToString(k.priv)
}

// PublicKey is the key's whpk_ form (LROSINK_WEBHOOK_PUBLIC_KEYS).
func (k *Ed25519Key) PublicKey() string {
	return "whpk_" + base64.StdEncoding.EncodeToString(k.priv.Public().(ed25519.PublicKey))
}

// JWK is the public key as Google publishes it: OKP, crv Ed25519.
func (k *Ed25519Key) JWK(kid string) jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.priv.Public(), KeyID: kid, Use: "sig"}
}

// Signature returns the "v1a,<base64>" entry of a delivery.
func (k *Ed25519Key) Signature(id string, ts time.Time, body []byte) string {
	msg := append([]byte(id+"."+strconv.FormatInt(ts.Unix(), 10)+"."), body...)
	return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(k.priv, msg))
}

// V1AHeaders returns the Standard Webhooks headers of a delivery signed
// with every key given.
func V1AHeaders(id string, ts time.Time, body []byte, keys ...*Ed25519Key) http.Header {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = k.Signature(id, ts, body)
	}
	h := Headers(id, ts, body)
	h.Set("webhook-signature", strings.Join(sigs, " "))
	return h
}

// JWKS serves a key set holding keys, as Google's jwks.json does.
type JWKS []jose.JSONWebKey

// ServeHTTP answers with the set.
func (s JWKS) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: s})
}
