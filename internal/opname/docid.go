package opname

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalidKey is wrapped by DocID and KeyFromDocID errors.
var ErrInvalidKey = errors.New("opname: invalid idempotency key")

// MaxDocIDLen is Firestore's limit on a document id, in bytes.
const MaxDocIDLen = 1500

// DocID maps an idempotency key to a Firestore document id. Firestore ids
// must be valid UTF-8, contain no "/", not be "." or "..", not match
// __.*__ and be at most 1,500 bytes.
//
// The mapping is a percent escape of only the characters that need it
// ("%" → "%25", "/" → "%2F"), so typical ids stay readable
// ("gemini:batches%2Fabc"). Two special cases keep the reserved forms out:
// an id of exactly "." or ".." has its dots escaped ("%2E"), and a leading
// "__" has its first "_" escaped ("%5F"). The plain escape never produces
// "%2E" or "%5F", so the special cases cannot collide with it and DocID is
// injective; KeyFromDocID is its exact inverse.
func DocID(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if !utf8.ValidString(key) {
		return "", fmt.Errorf("%w %q: not valid UTF-8", ErrInvalidKey, shorten(key))
	}
	id := escapeDocID(key)
	switch {
	case id == ".":
		id = "%2E"
	case id == "..":
		id = "%2E%2E"
	case strings.HasPrefix(id, "__"):
		id = "%5F" + id[1:]
	}
	if len(id) > MaxDocIDLen {
		return "", fmt.Errorf("%w %q: document id would be %d bytes, over Firestore's %d", ErrInvalidKey, shorten(key), len(id), MaxDocIDLen)
	}
	return id, nil
}

// escapeDocID is the plain escape of DocID ("%" → "%25", "/" → "%2F"),
// written out: it is on every webhook's path, and a strings.Replacer built
// per call was a fifth of serve's allocated bytes. A key needing no escape
// is returned as is, without allocating.
func escapeDocID(key string) string {
	n := strings.Count(key, "%") + strings.Count(key, "/")
	if n == 0 {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 2*n)
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '%':
			b.WriteString("%25")
		case '/':
			b.WriteString("%2F")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// KeyFromDocID is the inverse of DocID. It accepts only ids DocID can
// produce, so a document id maps back to exactly one key.
func KeyFromDocID(id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("%w: empty document id", ErrInvalidKey)
	}
	if !utf8.ValidString(id) {
		return "", fmt.Errorf("%w: document id %q is not valid UTF-8", ErrInvalidKey, shorten(id))
	}
	var b strings.Builder
	b.Grow(len(id))
	for i := 0; i < len(id); i++ {
		if id[i] != '%' {
			b.WriteByte(id[i])
			continue
		}
		if i+3 > len(id) {
			return "", fmt.Errorf("%w: document id %q has a truncated escape at byte %d", ErrInvalidKey, shorten(id), i)
		}
		switch id[i+1 : i+3] {
		case "25":
			b.WriteByte('%')
		case "2F":
			b.WriteByte('/')
		case "2E":
			b.WriteByte('.')
		case "5F":
			b.WriteByte('_')
		default:
			return "", fmt.Errorf("%w: document id %q has an unknown escape %q at byte %d", ErrInvalidKey, shorten(id), id[i:i+3], i)
		}
		i += 2
	}
	key := b.String()
	// "%2E" and "%5F" are valid only where DocID puts them; re-encoding
	// rejects every other spelling (e.g. "a%2Eb", "%5Fx") so the decoding
	// stays one-to-one.
	if again, err := DocID(key); err != nil || again != id {
		return "", fmt.Errorf("%w: %q is not a document id produced by DocID", ErrInvalidKey, shorten(id))
	}
	return key, nil
}
