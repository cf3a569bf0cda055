// Package webhook verifies and parses Gemini API webhook deliveries.
//
// Static (project) webhooks are signed with Standard Webhooks HMAC-SHA256
// (v1); dynamic (per-request webhook_config) deliveries are documented as an
// RS256 JWT in webhook-signature and seen live as Standard Webhooks v1a
// (Ed25519) signatures; both are checked against Google's JWKS. The package
// neither serves HTTP nor stores anything: the handler calls Verify on the
// raw body, then Parse, and maps the typed errors to status codes.
package webhook

import (
	"context"
	"crypto/ed25519"
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

// Methods reported in Verified.Method, named as logs show them (auth).
const (
	// MethodHMAC: a v1 HMAC-SHA256 entry matched one of our secrets.
	MethodHMAC = "v1"
	// MethodV1A: a v1a Ed25519 entry verified under a Google key, which
	// every Gemini project shares: authentic from Google, not proof that
	// the operation is ours.
	MethodV1A = "v1a"
	// MethodJWT: an RS256 JWT verified under a Google key (body not
	// covered).
	MethodJWT = "jwt"
)

// HeaderID is the webhook-id header in its canonical form, the key
// http.Header.Get looks up without canonicalising it first (an allocation
// per call).
const HeaderID = "Webhook-Id"

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
	// JWKSURL is where dynamic-webhook keys are published: RS256 keys
	// (by kid) for JWTs, OKP Ed25519 keys for v1a entries. http(s), or
	// file:///path for a local set. Empty disables JWT deliveries, and v1a
	// ones unless PublicKeys is set (401 no-jwks-configured).
	JWKSURL string
	// PublicKeys are whpk_… Ed25519 public keys. When set they are the
	// only keys v1a entries are checked against (a fixed trust list; the
	// JWKS is then used for JWTs only).
	PublicKeys []string
	// Audience, if non-empty, must appear in a JWT's aud claim.
	Audience string
	// Tolerance bounds |now - webhook-timestamp|; zero means
	// DefaultTolerance.
	Tolerance time.Duration
	// HTTPClient fetches the JWKS; required if JWKSURL is http(s).
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
	// Method is MethodHMAC, MethodV1A or MethodJWT.
	Method string
	// Claims are the verified JWT claims (nil for HMAC). Gemini's claim set
	// is undocumented, so they are kept for logging and as a fallback
	// envelope.
	Claims map[string]any
}

// Verifier authenticates webhook deliveries. It is safe for concurrent use.
type Verifier struct {
	keys      [][]byte
	edKeys    []ed25519.PublicKey // fixed v1a trust list; nil: the JWKS's
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
	for i, s := range cfg.PublicKeys {
		k, err := DecodePublicKey(s)
		if err != nil {
			return nil, fmt.Errorf("%s: key at index %d %v", publicKeysEnv, i, err)
		}
		v.edKeys = append(v.edKeys, k)
	}
	if cfg.JWKSURL != "" {
		u, err := ParseJWKSURL(cfg.JWKSURL)
		if err != nil {
			return nil, fmt.Errorf("webhook: %w", err)
		}
		if u.Scheme != "file" && cfg.HTTPClient == nil {
			return nil, errors.New("webhook: Config.HTTPClient is required when JWKSURL is http(s)")
		}
		v.jwks = newJWKSCache(u, cfg.HTTPClient)
	}
	return v, nil
}

// ParseJWKSURL accepts an absolute http(s) URL or a file:///absolute/path
// (a local JWKS for development), the forms the verifier can fetch.
func ParseJWKSURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
	case (u.Scheme == "https" || u.Scheme == "http") && u.Host != "":
		return u, nil
	case u.Scheme == "file" && (u.Host == "" || u.Host == "localhost") && strings.HasPrefix(u.Path, "/"):
		return u, nil
	}
	return nil, errors.New("JWKS URL must be an absolute http(s) URL or file:///path")
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
// anything else as Standard Webhooks entries (v1 HMAC, v1a Ed25519, any
// mix). Failures are *Error.
func (v *Verifier) Verify(ctx context.Context, h http.Header, body []byte) (Verified, error) {
	sig := strings.Trim(h.Get(canonical(hdrSignature)), sigSeparators)
	if looksLikeJWS(sig) {
		return v.verifyJWT(ctx, h, sig)
	}
	return v.verifyStandard(ctx, h, sig, body)
}

// verifyStandard checks Standard Webhooks signatures: every v1 (HMAC) entry
// against every secret, then every v1a (Ed25519) entry against every
// trusted Ed25519 key. Any entry that verifies makes the delivery valid;
// entries of other versions and malformed ones are skipped, not fatal.
func (v *Verifier) verifyStandard(ctx context.Context, h http.Header, sig string, body []byte) (Verified, error) {
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
	now := v.now()
	t, err := v.checkTimestamp(ts, now)
	if err != nil {
		return Verified{}, err
	}
	// With nothing configured every delivery fails below, with the reason
	// naming what it needed (secrets for v1, a key source for v1a).
	hasEd := len(v.edKeys) > 0 || v.jwks != nil

	// The raw header strings are signed, not re-formatted values.
	content := make([]byte, 0, len(id)+len(ts)+len(body)+2)
	content = append(content, id...)
	content = append(content, '.')
	content = append(content, ts...)
	content = append(content, '.')
	content = append(content, body...)

	// v1 first: it costs next to nothing, and a v1 match is proof the
	// delivery is for this deployment (the secret is ours alone).
	v1Checked, ok := v.matchV1(sig, content)
	if ok {
		return Verified{ID: id, Timestamp: t, Method: MethodHMAC}, nil
	}
	var sigs v1aSignatures
	v1aEntries := sigs.parse(sig)
	if sigs.n > 0 && hasEd {
		ok, verr := v.matchV1A(ctx, &sigs, content, now)
		if verr != nil {
			return Verified{}, verr
		}
		if ok {
			return Verified{ID: id, Timestamp: t, Method: MethodV1A}, nil
		}
	}
	v1aChecked := 0
	if hasEd {
		v1aChecked = sigs.n
	}
	// A configuration reason only when nothing could be checked for want
	// of it: v1a entries we hold no key source for, or no v1a entry and no
	// secret. A v1a entry that was checkable but malformed (truncated, not
	// Ed25519) is the sender's fault, not a missing secret.
	switch {
	case v1Checked == 0 && v1aChecked == 0 && v1aEntries > 0 && !hasEd:
		return Verified{}, unauthorized(ReasonNoJWKSConfigured, "v1a deliveries cannot be verified")
	case v1Checked == 0 && v1aChecked == 0 && v1aEntries == 0 && len(v.keys) == 0:
		return Verified{}, unauthorized(ReasonNoSecretsConfigured, "static deliveries cannot be verified")
	}
	return Verified{}, unauthorized(ReasonNoMatchingSignature,
		fmt.Sprintf("%d v1 signature(s) checked against %d secret(s), %d of %d v1a signature(s) checked",
			v1Checked, len(v.keys), v1aChecked, v1aEntries))
}

// matchV1 compares each v1 entry of sig with the HMAC of content under each
// secret. It returns how many v1 entries there were (0 without secrets)
// and whether one matched.
//
// Allocation-free on the hot path: the expected signature is encoded into a
// stack buffer and compared in constant time with each v1 entry as it is
// split off the header.
func (v *Verifier) matchV1(sig string, content []byte) (int, bool) {
	var sum [sha256.Size]byte
	var want [44]byte // base64.StdEncoding.EncodedLen(sha256.Size)
	candidates := 0
	for _, key := range v.keys {
		mac := hmac.New(sha256.New, key)
		mac.Write(content)
		base64.StdEncoding.Encode(want[:], mac.Sum(sum[:0]))
		candidates = 0
		for rest := sig; rest != ""; {
			var entry string
			entry, rest = nextEntry(rest)
			val, ok := strings.CutPrefix(entry, "v1,")
			if !ok || val == "" {
				continue
			}
			candidates++
			if constantTimeEqual(val, want[:]) {
				return candidates, true
			}
		}
	}
	return candidates, false
}

// nextEntry splits the first entry off a webhook-signature value.
func nextEntry(s string) (entry, rest string) {
	s = strings.TrimLeft(s, sigSeparators)
	if i := strings.IndexAny(s, sigSeparators); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
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
		return HeaderID
	case hdrTimestamp:
		return "Webhook-Timestamp"
	case hdrSignature:
		return "Webhook-Signature"
	}
	return name
}
