package webhook

import (
	"context"
	"crypto/rsa"
	"errors"
	"net/http"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const (
	// jwtLeeway absorbs clock skew between Google and us on exp/nbf/iat.
	// It is separate from Tolerance, which bounds the HMAC replay window;
	// 60 s is go-jose's default and the usual choice for server-side checks.
	jwtLeeway = time.Minute
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
	key, kerr := v.jwks.rsaKey(ctx, kid, now)
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
