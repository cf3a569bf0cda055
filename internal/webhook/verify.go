// Package webhook verifies and parses Gemini API webhook deliveries.
//
// Static (project) webhooks are signed with Standard Webhooks HMAC-SHA256;
// dynamic (per-request webhook_config) deliveries carry an RS256 JWT in
// webhook-signature, checked against a JWKS. The package neither serves HTTP
// nor stores anything: the handler calls Verify on the raw body, then Parse,
// and maps the typed errors to status codes.
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far webhook-timestamp may be from now, in either
// direction (Standard Webhooks; Gemini's "strict replay protection").
const DefaultTolerance = 5 * time.Minute

// Methods reported in Verified.Method.
const (
	MethodHMAC = "hmac"
	MethodJWT  = "jwt"
)

// Standard Webhooks header names; http.Header.Get canonicalises them.
const (
	hdrID        = "webhook-id"
	hdrTimestamp = "webhook-timestamp"
	hdrSignature = "webhook-signature"
)

const (
	secretPrefix = "whsec_"
	// secretsEnv names the variable operators set, so a start-up error
	// points at what to fix.
	secretsEnv = "LROSINK_WEBHOOK_SECRETS"
	// maxTimestampDigits keeps the timestamp within int64 seconds.
	maxTimestampDigits = 18
	// sigSeparators separate webhook-signature entries: the Standard
	// Webhooks spec says "space delimited", and HTTP allows optional
	// whitespace (SP, HTAB) around a value. Nothing else separates: a form
	// feed or a Unicode space stays part of its entry, which then cannot
	// match. The fuzz oracle in fuzz_test.go encodes the same rule.
	sigSeparators = " \t"
)

// Config configures a Verifier.
type Config struct {
	// Secrets are whsec_… signing secrets. During rotation several are
	// active; a delivery is valid if any v1 signature matches any secret.
	Secrets []string
	// JWKSURL is where dynamic-webhook RS256 keys are published. Empty
	// disables JWT deliveries (they are answered 401 no-jwks-configured).
	JWKSURL string
	// Audience, if non-empty, must appear in a JWT's aud claim.
	Audience string
	// Tolerance bounds |now - webhook-timestamp|; zero means
	// DefaultTolerance.
	Tolerance time.Duration
	// HTTPClient fetches the JWKS; required if JWKSURL is set.
	HTTPClient *http.Client
	// Now is the clock; required.
	Now func() time.Time
}

// Verified describes an authenticated delivery.
type Verified struct {
	// ID is the webhook-id header: the idempotency key shared by retries.
	// For JWT deliveries without that header it is the token's jti (or
	// empty).
	ID string
	// Timestamp is the delivery attempt time: webhook-timestamp, or for JWT
	// deliveries without it the token's iat (or the zero time).
	Timestamp time.Time
	// Method is MethodHMAC or MethodJWT.
	Method string
	// Claims are the verified JWT claims (nil for HMAC). Gemini's claim set
	// is undocumented, so they are kept for logging and as a fallback
	// envelope.
	Claims map[string]any
}

// Verifier authenticates webhook deliveries. It is safe for concurrent use.
type Verifier struct {
	keys      [][]byte
	tolerance time.Duration
	audience  string
	now       func() time.Time
	jwks      *jwksCache // nil when no JWKS URL is configured
}

// NewVerifier validates cfg. Secret errors name LROSINK_WEBHOOK_SECRETS and
// the secret's index, never its value.
func NewVerifier(cfg Config) (*Verifier, error) {
	if cfg.Now == nil {
		return nil, errors.New("webhook: Config.Now is required")
	}
	tol := cfg.Tolerance
	switch {
	case tol == 0:
		tol = DefaultTolerance
	case tol < 0:
		return nil, fmt.Errorf("webhook: negative tolerance %s", tol)
	}
	keys := make([][]byte, 0, len(cfg.Secrets))
	for i, s := range cfg.Secrets {
		key, problem := decodeSecret(s)
		if problem != "" {
			return nil, fmt.Errorf("%s: secret at index %d %s", secretsEnv, i, problem)
		}
		keys = append(keys, key)
	}
	v := &Verifier{keys: keys, tolerance: tol, audience: cfg.Audience, now: cfg.Now}
	if cfg.JWKSURL != "" {
		u, err := url.Parse(cfg.JWKSURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, errors.New("webhook: JWKS URL must be an absolute http(s) URL")
		}
		if cfg.HTTPClient == nil {
			return nil, errors.New("webhook: Config.HTTPClient is required when JWKSURL is set")
		}
		v.jwks = newJWKSCache(cfg.JWKSURL, cfg.HTTPClient)
	}
	return v, nil
}

// CheckSecret reports whether s is a usable whsec_ signing secret, so
// configuration can be refused at start-up. The error never quotes s.
func CheckSecret(s string) error {
	if _, problem := decodeSecret(s); problem != "" {
		return errors.New(problem)
	}
	return nil
}

// decodeSecret returns the HMAC key of a whsec_ secret, or a description of
// what is wrong that never quotes the secret.
func decodeSecret(s string) ([]byte, string) {
	// Tolerate spaces around commas in the environment variable.
	s = strings.TrimSpace(s)
	tail, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, "lacks the whsec_ prefix"
	}
	key, err := base64.StdEncoding.DecodeString(tail)
	if err != nil {
		return nil, "is not valid base64 after whsec_"
	}
	if len(key) == 0 {
		return nil, "is empty after whsec_"
	}
	return key, ""
}

// Verify authenticates a delivery from its headers and raw body (the exact
// bytes received: re-serialised JSON does not verify). A webhook-signature
// that looks like a compact JWS is checked as a dynamic-webhook RS256 JWT;
// anything else as Standard Webhooks v1 signatures. Failures are *Error.
func (v *Verifier) Verify(ctx context.Context, h http.Header, body []byte) (Verified, error) {
	sig := strings.Trim(h.Get(canonical(hdrSignature)), sigSeparators)
	if looksLikeJWS(sig) {
		return v.verifyJWT(ctx, h, sig)
	}
	return v.verifyHMAC(h, sig, body)
}

func (v *Verifier) verifyHMAC(h http.Header, sig string, body []byte) (Verified, error) {
	id, ts := h.Get(canonical(hdrID)), h.Get(canonical(hdrTimestamp))
	var missing []string
	for _, p := range [][2]string{{hdrID, id}, {hdrTimestamp, ts}, {hdrSignature, sig}} {
		if p[1] == "" {
			missing = append(missing, p[0])
		}
	}
	if len(missing) > 0 {
		return Verified{}, unauthorized(ReasonMissingHeaders, strings.Join(missing, ", "))
	}
	t, err := v.checkTimestamp(ts, v.now())
	if err != nil {
		return Verified{}, err
	}
	if len(v.keys) == 0 {
		return Verified{}, unauthorized(ReasonNoSecretsConfigured, "static deliveries cannot be verified")
	}

	// The raw header strings are signed, not re-formatted values.
	content := make([]byte, 0, len(id)+len(ts)+len(body)+2)
	content = append(content, id...)
	content = append(content, '.')
	content = append(content, ts...)
	content = append(content, '.')
	content = append(content, body...)

	// Allocation-free on the hot path: the expected signature is encoded
	// into a stack buffer and compared in constant time with each v1 entry
	// as it is split off the header.
	var sum [sha256.Size]byte
	var want [44]byte // base64.StdEncoding.EncodedLen(sha256.Size)
	candidates := 0
	for _, key := range v.keys {
		mac := hmac.New(sha256.New, key)
		mac.Write(content)
		base64.StdEncoding.Encode(want[:], mac.Sum(sum[:0]))
		rest := sig
		for rest != "" {
			rest = strings.TrimLeft(rest, sigSeparators)
			entry := rest
			if i := strings.IndexAny(rest, sigSeparators); i >= 0 {
				entry, rest = rest[:i], rest[i:]
			} else {
				rest = ""
			}
			// Other versions (v1a is ed25519) and malformed entries are
			// skipped, not fatal: a valid v1 entry may follow.
			val, ok := strings.CutPrefix(entry, "v1,")
			if !ok || val == "" {
				continue
			}
			candidates++
			if constantTimeEqual(val, want[:]) {
				return Verified{ID: id, Timestamp: t, Method: MethodHMAC}, nil
			}
		}
	}
	candidates /= len(v.keys)
	return Verified{}, unauthorized(ReasonNoMatchingSignature,
		fmt.Sprintf("%d v1 signature(s) checked against %d secret(s)", candidates, len(v.keys)))
}

// checkTimestamp parses integer Unix seconds and enforces the tolerance in
// both directions: too old is a replay, too new a forged or skewed clock.
func (v *Verifier) checkTimestamp(raw string, now time.Time) (time.Time, *Error) {
	if raw == "" || len(raw) > maxTimestampDigits || strings.Trim(raw, "0123456789") != "" {
		return time.Time{}, unauthorized(ReasonBadTimestamp, "webhook-timestamp is not integer Unix seconds")
	}
	sec, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return time.Time{}, unauthorized(ReasonBadTimestamp, "webhook-timestamp is not integer Unix seconds")
	}
	t := time.Unix(sec, 0).UTC()
	switch d := now.Sub(t); {
	case d > v.tolerance:
		return time.Time{}, unauthorized(ReasonTimestampTooOld, fmt.Sprintf("%s in the past, tolerance %s", d, v.tolerance))
	case d < -v.tolerance:
		return time.Time{}, unauthorized(ReasonTimestampTooNew, fmt.Sprintf("%s in the future, tolerance %s", -d, v.tolerance))
	}
	return t, nil
}

// looksLikeJWS reports whether s has the compact JWS shape: three base64url
// segments separated by dots, the first two non-empty. The signature segment
// may be empty so that alg "none" tokens are rejected as bad tokens rather
// than mistaken for HMAC headers. Standard Webhooks entries always contain
// a comma, so the two forms cannot be confused.
func looksLikeJWS(s string) bool {
	if strings.Count(s, ".") != 2 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	head, rest, _ := strings.Cut(s, ".")
	payload, _, _ := strings.Cut(rest, ".")
	return head != "" && payload != ""
}

// constantTimeEqual compares a header value with the expected signature
// without converting it to a slice (which would allocate); the time taken
// depends only on the lengths, which are public.
func constantTimeEqual(a string, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	var d byte
	for i := range b {
		d |= a[i] ^ b[i]
	}
	return d == 0
}

// canonical returns the canonical MIME form of the three Standard Webhooks
// header names; http.Header.Get on a canonical key does not allocate.
func canonical(name string) string {
	switch name {
	case hdrID:
		return "Webhook-Id"
	case hdrTimestamp:
		return "Webhook-Timestamp"
	case hdrSignature:
		return "Webhook-Signature"
	}
	return name
}
