// Package webhooktest signs deliveries the way Gemini does (Standard
// Webhooks v1 HMAC-SHA256 for static webhooks; v1a Ed25519 as dynamic ones
// are sent live, or RS256 JWTs as they are documented),
// for tests, the simulator and `lrosink` demos.
package webhooktest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// NewSecret returns a fresh whsec_ secret (32 random bytes).
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never returns an error
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// Signature returns the "v1,<base64>" signature of a delivery.
func Signature(secret, id string, ts time.Time, body []byte) string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		key = []byte(secret) // deliberately wrong keys still produce a (wrong) signature
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Headers returns the three Standard Webhooks headers for body, signed with
// every secret given (as during a rotation).
func Headers(id string, ts time.Time, body []byte, secrets ...string) http.Header {
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		sigs[i] = Signature(s, id, ts, body)
	}
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", strings.Join(sigs, " "))
	h.Set("Content-Type", "application/json")
	return h
}
