// Package admintoken reads and checks LROSINK_ADMIN_TOKEN the one way both
// the administrative functions (httpapi) and the console's sign-in use.
package admintoken

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"
)

// Token is the configured admin token, kept as its digest.
type Token [sha256.Size]byte

// New keeps token's digest.
func New(token string) Token { return sha256.Sum256([]byte(token)) }

// Matches compares digests, so the time taken depends neither on the
// length of got nor on its first differing byte. An empty got never
// matches.
func (t Token) Matches(got string) bool {
	sum := sha256.Sum256([]byte(got))
	return got != "" && subtle.ConstantTimeCompare(sum[:], t[:]) == 1
}

// Bearer returns the token of an `Authorization: Bearer <token>` header;
// the scheme is case-insensitive (RFC 9110 §11.1).
func Bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
