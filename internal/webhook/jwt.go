package webhook

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const (
	// jwtLeeway absorbs clock skew between Google and us on exp/nbf/iat.
	// It is separate from Tolerance, which bounds the HMAC replay window;
	// 60 s is go-jose's default and the usual choice for server-side checks.
	jwtLeeway = time.Minute
	// jwksRefetchInterval bounds JWKS fetches: an attacker sending random
	// kids must not turn us into a load generator against the JWKS host.
	jwksRefetchInterval = time.Minute
	// jwksMaxAge makes a key removed from the JWKS (revoked) stop verifying
	// within an hour even if we keep seeing its kid.
	jwksMaxAge = time.Hour
	// jwksTimeout caps one fetch; Gemini waits only seconds for our answer.
	jwksTimeout = 5 * time.Second
	// jwksMaxBytes caps the JWKS body; real ones are a few KiB.
	jwksMaxBytes = 1 << 20
)

// allowedAlgs is the only algorithm accepted: parsing rejects none, HS256
// (including the "HMAC keyed with the RSA public key" confusion), ES256,
// PS256, … before any key is touched.
func allowedAlgs() []jose.SignatureAlgorithm { return []jose.SignatureAlgorithm{jose.RS256} }

// verifyJWT authenticates a dynamic delivery. The token does not cover the
// body (nothing documents a body-hash claim), so a captured token could be
// replayed with another body until exp: callers treat the body as a hint
// (the ingest door confirms a terminal state with the Gemini API).
func (v *Verifier) verifyJWT(ctx context.Context, h http.Header, raw string) (Verified, error) {
	now := v.now()
	ts, err := v.optionalTimestamp(h, now)
	if err != nil {
		return Verified{}, err
	}
	if v.jwks == nil {
		return Verified{}, unauthorized(ReasonNoJWKSConfigured, "dynamic deliveries cannot be verified")
	}
	tok, kid, err := parseToken(raw)
	if err != nil {
		return Verified{}, err
	}
	key, kerr := v.jwks.key(ctx, kid, now)
	if kerr != nil {
		return Verified{}, kerr
	}
	std, all, err := v.claims(tok, key, now)
	if err != nil {
		return Verified{}, err
	}
	id := h.Get(canonical(hdrID))
	if id == "" {
		id = std.ID
	}
	if ts.IsZero() && std.IssuedAt != nil {
		ts = std.IssuedAt.Time().UTC()
	}
	return Verified{ID: id, Timestamp: ts, Method: MethodJWT, Claims: all}, nil
}

// optionalTimestamp: webhook-id/webhook-timestamp are optional for dynamic
// deliveries (unconfirmed whether Gemini sends them); a timestamp that is
// sent must still be fresh. Zero when none is sent.
func (v *Verifier) optionalTimestamp(h http.Header, now time.Time) (time.Time, error) {
	rawTS := h.Get(canonical(hdrTimestamp))
	if rawTS == "" {
		return time.Time{}, nil
	}
	ts, err := v.checkTimestamp(rawTS, now)
	if err != nil { // a nil *Error must not become a non-nil error
		return time.Time{}, err
	}
	return ts, nil
}

// parseToken parses a compact RS256 JWS with one signature and returns it
// with its kid. A kid is required: with several keys published during
// rotation, trying each one would hide misconfiguration.
func parseToken(raw string) (*jwt.JSONWebToken, string, error) {
	tok, err := jwt.ParseSigned(raw, allowedAlgs())
	if err != nil {
		var alg *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &alg) {
			return nil, "", unauthorized(ReasonBadToken, "alg "+quoteShort(string(alg.Got))+" not allowed, only RS256")
		}
		return nil, "", unauthorized(ReasonBadToken, "malformed compact JWS")
	}
	if len(tok.Headers) != 1 {
		return nil, "", unauthorized(ReasonBadToken, "expected exactly one signature")
	}
	kid := tok.Headers[0].KeyID
	if kid == "" {
		return nil, "", unauthorized(ReasonBadToken, "token has no kid")
	}
	return tok, kid, nil
}

// claims checks the signature with key and then the claim set: exp is
// required, exp/nbf/iat are checked with jwtLeeway, and aud when an
// audience is configured. It returns the standard claims and all claims.
func (v *Verifier) claims(tok *jwt.JSONWebToken, key *rsa.PublicKey, now time.Time) (jwt.Claims, map[string]any, error) {
	var std jwt.Claims
	var all map[string]any
	if err := tok.Claims(key, &std, &all); err != nil {
		if errors.Is(err, jose.ErrCryptoFailure) {
			return std, nil, unauthorized(ReasonBadToken, "signature does not verify")
		}
		return std, nil, unauthorized(ReasonBadToken, "claims are not a valid JWT claim set")
	}
	if std.Expiry == nil {
		return std, nil, unauthorized(ReasonBadToken, "token has no exp")
	}
	want := jwt.Expected{Time: now}
	if v.audience != "" {
		want.AnyAudience = jwt.Audience{v.audience}
	}
	if err := std.ValidateWithLeeway(want, jwtLeeway); err != nil {
		return std, nil, claimError(err)
	}
	return std, all, nil
}

// claimError maps a claim validation failure to its reason.
func claimError(err error) *Error {
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return unauthorized(ReasonTokenExpired, "exp is past (60s leeway)")
	case errors.Is(err, jwt.ErrNotValidYet):
		return unauthorized(ReasonTokenNotYetValid, "nbf is in the future (60s leeway)")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return unauthorized(ReasonTokenNotYetValid, "iat is in the future (60s leeway)")
	case errors.Is(err, jwt.ErrInvalidAudience):
		return unauthorized(ReasonWrongAudience, "aud does not contain the configured audience")
	default:
		return unauthorized(ReasonBadToken, "claims rejected")
	}
}

// jwksCache holds the last good key set and rate-limits refetches.
//
// A refetch is recorded (attemptAt) when it starts and runs detached from
// the caller that triggered it, bounded by jwksTimeout: a caller that hangs
// up neither erases the attempt (forged tokens with random kids would then
// drive unbounded fetches) nor wastes the fetch, which still fills the cache.
// Callers needing the outcome wait for it or for their own context; a
// caller arriving while a fetch runs shares it.
type jwksCache struct {
	url    string
	client *http.Client

	mu        sync.Mutex
	set       *jose.JSONWebKeySet // last good set; nil before the first success
	fetchedAt time.Time           // when set was fetched
	attemptAt time.Time           // start of the last fetch, successful or not
	lastErr   error               // error of the last finished fetch; nil after a success
	inflight  chan struct{}       // non-nil while a fetch runs; closed when it ends
}

func newJWKSCache(u string, c *http.Client) *jwksCache {
	return &jwksCache{url: u, client: c}
}

// key returns the RS256 verification key for kid, refetching the JWKS when
// kid is unknown or the set is older than jwksMaxAge, at most once per
// jwksRefetchInterval (measured with the Verifier's clock).
func (c *jwksCache) key(ctx context.Context, kid string, now time.Time) (*rsa.PublicKey, *Error) {
	c.mu.Lock()
	if c.set != nil && now.Sub(c.fetchedAt) < jwksMaxAge {
		if k := lookupKey(c.set, kid); k != nil {
			c.mu.Unlock()
			return k, nil
		}
	}
	wait := c.inflight
	if wait == nil && (c.attemptAt.IsZero() || now.Sub(c.attemptAt) >= jwksRefetchInterval) {
		if err := ctx.Err(); err != nil {
			// Gone before anything started: start nothing on its behalf.
			c.mu.Unlock()
			return nil, unavailable("", err)
		}
		wait = make(chan struct{})
		c.inflight, c.attemptAt = wait, now
		go c.refresh(now, wait)
	}
	c.mu.Unlock()

	if wait != nil {
		select {
		case <-wait:
		default:
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, unavailable("waiting for the JWKS", ctx.Err())
			}
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	// A stale set still answers for known kids when the refetch failed:
	// a JWKS outage should not reject deliveries we can verify.
	if c.set != nil {
		if k := lookupKey(c.set, kid); k != nil {
			return k, nil
		}
	}
	if c.lastErr != nil {
		// We cannot tell an unknown kid from a key we failed to load:
		// answer 503 so Gemini redelivers.
		return nil, unavailable("", c.lastErr)
	}
	return nil, unauthorized(ReasonUnknownKID, "kid "+quoteShort(kid)+" is not in the JWKS")
}

// refresh runs one fetch started at now (the Verifier's clock) and closes
// done when it has recorded the outcome. Its context is its own: no caller
// can cancel it, and jwksTimeout bounds it, so it cannot leak.
func (c *jwksCache) refresh(now time.Time, done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), jwksTimeout)
	defer cancel()
	set, err := c.fetch(ctx)
	c.mu.Lock()
	if err == nil {
		c.set, c.fetchedAt, c.lastErr = set, now, nil
	} else {
		c.lastErr = err
	}
	c.inflight = nil
	c.mu.Unlock()
	close(done)
}

func lookupKey(set *jose.JSONWebKeySet, kid string) *rsa.PublicKey {
	for _, k := range set.Key(kid) {
		if pub, ok := k.Key.(*rsa.PublicKey); ok {
			return pub
		}
	}
	return nil
}

func (c *jwksCache) fetch(ctx context.Context) (*jose.JSONWebKeySet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, fmt.Errorf("building JWKS request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("requesting JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("JWKS answered status %d", resp.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, jwksMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading JWKS: %w", err)
	}
	if len(raw) > jwksMaxBytes {
		return nil, errors.New("JWKS larger than 1 MiB")
	}
	return parseJWKS(raw)
}

// parseJWKS keeps only public RSA signing keys with a kid. Keys are decoded
// one by one so that a key type go-jose does not know (or a malformed key)
// cannot disable the others.
func parseJWKS(raw []byte) (*jose.JSONWebKeySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("decoding JWKS: %w", err)
	}
	set := &jose.JSONWebKeySet{}
	for _, r := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(r); err != nil {
			continue
		}
		if _, ok := k.Key.(*rsa.PublicKey); !ok || k.KeyID == "" {
			continue
		}
		if (k.Use != "" && k.Use != "sig") || (k.Algorithm != "" && k.Algorithm != string(jose.RS256)) {
			continue
		}
		set.Keys = append(set.Keys, k)
	}
	if len(set.Keys) == 0 {
		return nil, errors.New("JWKS has no usable RS256 keys")
	}
	return set, nil
}
