package webhook

import (
	"strconv"
	"strings"
)

// Reasons are short stable labels: they appear in the webhook's JSON answer,
// in logs and in metrics, so they never change meaning.
const (
	ReasonMissingHeaders      = "missing-headers"
	ReasonBadTimestamp        = "bad-timestamp"
	ReasonTimestampTooOld     = "timestamp-too-old"
	ReasonTimestampTooNew     = "timestamp-too-new"
	ReasonNoMatchingSignature = "no-matching-signature"
	ReasonNoSecretsConfigured = "no-secrets-configured"
	ReasonNoJWKSConfigured    = "no-jwks-configured"
	ReasonBadToken            = "bad-token"
	ReasonTokenExpired        = "token-expired"
	ReasonTokenNotYetValid    = "token-not-yet-valid"
	ReasonWrongAudience       = "wrong-audience"
	ReasonUnknownKID          = "unknown-kid"
	ReasonJWKSUnavailable     = "jwks-unavailable"
)

// Error is a verification failure. Reason is its kind: every reason but
// ReasonJWKSUnavailable refuses the delivery, while jwks-unavailable means
// it could not be checked now (it may be valid). It carries no HTTP status:
// httpapi's one table answers each reason (CONTRACT.md §3).
//
// The message is built only from fixed text, the reason and values we
// generate ourselves or have checked to be harmless: never a secret, a
// signature or a token.
type Error struct {
	Reason string

	detail string
	err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("webhook: ")
	b.WriteString(e.Reason)
	if e.detail != "" {
		b.WriteString(": ")
		b.WriteString(e.detail)
	}
	if e.err != nil {
		b.WriteString(": ")
		b.WriteString(e.err.Error())
	}
	return b.String()
}

// Unwrap exposes the cause (a JWKS fetch error, a context error) to
// errors.Is/As.
func (e *Error) Unwrap() error { return e.err }

func unauthorized(reason, detail string) *Error {
	return &Error{Reason: reason, detail: detail}
}

func unavailable(detail string, err error) *Error {
	return &Error{Reason: ReasonJWKSUnavailable, detail: detail, err: err}
}

// quoteShort renders an attacker-chosen value (a JWT alg, a kid) for an
// error message: quoted so control characters cannot forge log lines and
// truncated so a huge header cannot bloat logs.
func quoteShort(s string) string {
	const max = 40
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strconv.Quote(s)
}
