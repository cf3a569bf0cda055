// Package redact keeps secrets (an API key, a signing secret) out of text
// that quotes what a remote answered: an SDK echoing its configuration, a
// proxy echoing the request's headers.
package redact

import "strings"

// Mask replaces each secret's occurrences in s with [REDACTED].
//
// A secret cut short is masked too: error texts are bounded by cutting them
// and appending "...", and a secret straddling the cut survives as a prefix
// of itself followed by "...", which an exact replacement misses (it leaked
// 28 of a 40-character API key). Prefixes under minPrefix bytes stay: they
// tell nothing (every Google API key starts "AIza").
func Mask(s string, secrets ...string) string {
	for _, v := range secrets {
		if v == "" {
			continue
		}
		s = strings.ReplaceAll(s, v, "[REDACTED]")
		if !strings.Contains(s, cut) {
			continue
		}
		for n := len(v) - 1; n >= minPrefix; n-- {
			s = strings.ReplaceAll(s, v[:n]+cut, "[REDACTED]"+cut)
		}
	}
	return s
}

// cut is what the bounded error texts append where they cut.
const cut = "..."

// minPrefix is the shortest cut-off secret Mask masks.
const minPrefix = 4
