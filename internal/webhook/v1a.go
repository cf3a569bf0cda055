package webhook

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"time"
)

const (
	// PublicKeyPrefix marks a Standard Webhooks Ed25519 public key.
	PublicKeyPrefix = "whpk_"
	// publicKeysEnv names the variable operators set, so a start-up error
	// points at what to fix.
	publicKeysEnv = "LROSINK_WEBHOOK_PUBLIC_KEYS"
	// maxV1AEntries bounds the Ed25519 checks one delivery can cost: each
	// entry is tried against every key (~40 µs each), so a header stuffed
	// with well-formed v1a entries must not buy seconds of CPU. A sender
	// rotating keys sends one or two.
	maxV1AEntries = 4
)

// v1aSignatures holds the decoded v1a entries of one header, without
// allocating.
type v1aSignatures struct {
	sig [maxV1AEntries][ed25519.SignatureSize]byte
	n   int
}

// parse collects the first maxV1AEntries well-formed v1a entries of header
// and returns how many v1a entries it saw, well-formed or not. A value
// that is not exactly one base64 Ed25519 signature (truncated, padded
// wrongly, another length) is skipped: it cannot verify.
func (s *v1aSignatures) parse(header string) int {
	seen := 0
	for rest := header; rest != ""; {
		var entry string
		entry, rest = nextEntry(rest)
		val, ok := strings.CutPrefix(entry, "v1a,")
		if !ok {
			continue
		}
		seen++
		if s.n < maxV1AEntries && decodeSignature(&s.sig[s.n], val) {
			s.n++
		}
	}
	return seen
}

// decodeSignature decodes a base64 Ed25519 signature into dst. The spec
// says base64; the URL-safe alphabet and missing padding are accepted too,
// since the encoding cannot weaken the check (the 64 bytes must verify) and
// Google's exact encoder is unconfirmed.
func decodeSignature(dst *[ed25519.SignatureSize]byte, s string) bool {
	const unpadded = 86 // base64.RawStdEncoding.EncodedLen(ed25519.SignatureSize)
	s = strings.TrimSuffix(s, "==")
	if len(s) != unpadded {
		return false
	}
	// Strict: the spare low bits of the last character must be zero, so
	// each signature has exactly one accepted spelling per alphabet.
	enc := base64.RawStdEncoding.Strict()
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding.Strict()
	}
	n, err := enc.Decode(dst[:], []byte(s))
	return err == nil && n == ed25519.SignatureSize
}

// matchV1A reports whether any collected signature verifies content under
// a trusted Ed25519 key: the fixed LROSINK_WEBHOOK_PUBLIC_KEYS when set
// (never fetching), else the JWKS's Ed25519 keys, refetched as for an
// unknown JWT kid when none verifies.
func (v *Verifier) matchV1A(ctx context.Context, sigs *v1aSignatures, content []byte, now time.Time) (bool, *Error) {
	verifies := func(keys []ed25519.PublicKey) bool {
		for i := range sigs.n {
			for _, k := range keys {
				if ed25519.Verify(k, content, sigs.sig[i][:]) {
					return true
				}
			}
		}
		return false
	}
	if len(v.edKeys) > 0 {
		return verifies(v.edKeys), nil
	}
	return v.jwks.find(ctx, now, func(s *keySet) bool { return verifies(s.ed) })
}

// CheckPublicKey reports whether s is a usable whpk_ Ed25519 public key, so
// configuration can be refused at start-up.
func CheckPublicKey(s string) error {
	_, err := DecodePublicKey(s)
	return err
}

// DecodePublicKey decodes a Standard Webhooks whpk_ public key: "whpk_"
// and the base64 of the 32-byte Ed25519 public key.
func DecodePublicKey(s string) (ed25519.PublicKey, error) {
	tail, ok := strings.CutPrefix(strings.TrimSpace(s), PublicKeyPrefix)
	if !ok {
		return nil, errors.New("lacks the whpk_ prefix")
	}
	key, err := base64.StdEncoding.DecodeString(tail)
	if err != nil {
		return nil, errors.New("is not valid base64 after whpk_")
	}
	if len(key) != ed25519.PublicKeySize {
		return nil, errors.New("is not a 32-byte Ed25519 public key")
	}
	return ed25519.PublicKey(key), nil
}
