package opname

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrInvalidName is wrapped by every Normalize error, so callers can map
// any of them to a client error (HTTP 400) with errors.Is.
// Its text is the user's words: it reaches CLI lines and HTTP details as is.
var ErrInvalidName = errors.New("invalid operation name")

// KeyPrefix starts every idempotency key; it namespaces the keys in case
// another provider's operations are ever recorded in the same ledger.
const KeyPrefix = "gemini:"

const (
	// MaxRawLen bounds the untrimmed input; real names are far shorter, and
	// the bound keeps hostile payloads out of logs and the ledger.
	MaxRawLen = 1024
	// maxSegmentLen is the longest id segment accepted (1 + 254).
	maxSegmentLen = 255
	// maxQuoted bounds how much of a rejected input an error message echoes.
	maxQuoted = 64
)

// Name is a normalized operation name.
type Name struct {
	Canonical string // e.g. "batches/abc", "operations/xyz", "interactions/v1_abc"
	Kind      Kind
	ID        string // last segment
	// APIName is the name to call the Gemini API with: "batches/abc",
	// "models/M/operations/xyz" if the model was known else "operations/xyz",
	// "interactions/v1_abc", "batchPredictionJobs/..." etc.
	APIName string
}

// Key is the idempotency key of the operation: KeyPrefix + Canonical.
func (n Name) Key() string { return KeyPrefix + n.Canonical }

// Normalize maps every accepted spelling of an operation name to one
// canonical name per operation, so a webhook payload and the Gemini API's
// own answer yield the same Key.
//
// Accepted forms, after trimming whitespace and trailing slashes and
// collapsing a leading "projects/P/locations/L/":
//
//	batches/ID                                batch        batches/ID
//	batchPredictionJobs/ID                    batch        batchPredictionJobs/ID (Vertex id space)
//	operations/ID                             video        operations/ID
//	models/M/operations/ID                    video        operations/ID; APIName keeps the model
//	publishers/google/models/M/operations/ID  video        as models/M/operations/ID
//	interactions/ID                           interaction  interactions/ID
//	ID (no slash)                             per hint     batches/ID, operations/ID or interactions/ID
//
// Normalize is idempotent: the Canonical and APIName of a result normalize
// to the same Canonical.
//
// A prefixed name decides its own kind; a hint that contradicts it is an
// error, because the event would then be filed under the wrong family.
func Normalize(raw string, hint Kind) (Name, error) {
	if err := checkInput(raw, hint); err != nil {
		return Name{}, err
	}
	segs, err := splitSegments(raw)
	if err != nil {
		return Name{}, err
	}
	if segs, err = dropEndpointPrefix(raw, segs); err != nil {
		return Name{}, err
	}
	n, err := fromSegments(raw, segs, hint)
	if err != nil {
		return Name{}, err
	}
	if n.APIName == "" {
		n.APIName = n.Canonical
	}
	if hint != KindUnknown && hint != n.Kind {
		return Name{}, invalid(raw, fmt.Sprintf("kind %q given, but the name is of kind %q", string(hint), string(n.Kind)))
	}
	return n, nil
}

// checkInput bounds and checks the raw input and the hint before any
// parsing.
func checkInput(raw string, hint Kind) error {
	if len(raw) > MaxRawLen {
		return invalid(raw, fmt.Sprintf("longer than %d bytes (%d)", MaxRawLen, len(raw)))
	}
	if !utf8.ValidString(raw) {
		return invalid(raw, "not valid UTF-8")
	}
	switch hint {
	case KindUnknown, KindBatch, KindVideo, KindInteraction:
		return nil
	}
	return invalid(raw, fmt.Sprintf("unknown kind hint %q", string(hint)))
}

// splitSegments trims whitespace and trailing slashes and splits the name
// into path segments, each of which must be a valid segment.
func splitSegments(raw string) ([]string, error) {
	s := strings.TrimRight(strings.TrimSpace(raw), "/")
	if s == "" {
		return nil, invalid(raw, "empty")
	}
	// Checked after trimming, so a trailing newline from a CLI argument or
	// a pasted line is tolerated but one inside the name is not.
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return nil, invalid(raw, fmt.Sprintf("control character %U at byte %d", r, i))
	}
	segs := strings.Split(s, "/")
	for i, seg := range segs {
		if seg == "" {
			return nil, invalid(raw, fmt.Sprintf("empty path segment at position %d", i+1))
		}
		if !validSegment(seg) {
			return nil, invalid(raw, fmt.Sprintf("segment %q must match [A-Za-z0-9][A-Za-z0-9._~=+:@-]{0,254}", shorten(seg)))
		}
	}
	return segs, nil
}

// dropEndpointPrefix removes what only says which endpoint spelled the
// name: the Vertex location prefix carries no identity of its own for our
// purposes (the same operation must get one key whatever the endpoint),
// and Vertex spells Veo operations under the publisher. Only Google's
// models are Gemini API models, so other publishers are rejected.
func dropEndpointPrefix(raw string, segs []string) ([]string, error) {
	if segs[0] == "projects" {
		if len(segs) < 6 || segs[2] != "locations" {
			return nil, invalid(raw, `a "projects/" name must look like projects/P/locations/L/<collection>/<id>`)
		}
		segs = segs[4:]
	}
	if segs[0] == "publishers" {
		if len(segs) != 6 || segs[1] != "google" || segs[2] != "models" || segs[4] != "operations" {
			return nil, invalid(raw, "a publisher name must look like publishers/google/models/M/operations/ID")
		}
		segs = segs[2:]
	}
	return segs, nil
}

// fromSegments maps one of the accepted forms to its Name (APIName only
// where it differs from Canonical).
func fromSegments(raw string, segs []string, hint Kind) (Name, error) {
	switch {
	case len(segs) == 1:
		return bareID(raw, segs[0], hint)
	case len(segs) == 2 && segs[0] == "batches",
		len(segs) == 2 && segs[0] == "batchPredictionJobs":
		return Name{Canonical: segs[0] + "/" + segs[1], Kind: KindBatch, ID: segs[1]}, nil
	case len(segs) == 2 && segs[0] == "operations":
		return Name{Canonical: "operations/" + segs[1], Kind: KindVideo, ID: segs[1]}, nil
	case len(segs) == 4 && segs[0] == "models" && segs[2] == "operations":
		// The model is dropped from the canonical name because webhooks may
		// not carry it, but kept in APIName because the fetch needs it.
		return Name{Canonical: "operations/" + segs[3], Kind: KindVideo, ID: segs[3],
			APIName: strings.Join(segs, "/")}, nil
	case len(segs) == 2 && segs[0] == "interactions":
		return Name{Canonical: "interactions/" + segs[1], Kind: KindInteraction, ID: segs[1]}, nil
	}
	return Name{}, invalid(raw, "unknown name form; want batches/ID, batchPredictionJobs/ID, operations/ID, models/M/operations/ID, interactions/ID or a bare ID with a kind")
}

// bareID files an id without a collection under the hint's collection.
func bareID(raw, id string, hint Kind) (Name, error) {
	// "batches/" trims to "batches": a collection word alone is a
	// truncated name, not an id, and must not become "batches/batches".
	if isCollection(id) {
		return Name{}, invalid(raw, fmt.Sprintf("%q is a collection name without an id", id))
	}
	switch hint {
	case KindBatch:
		return Name{Canonical: "batches/" + id, Kind: KindBatch, ID: id}, nil
	case KindVideo:
		return Name{Canonical: "operations/" + id, Kind: KindVideo, ID: id}, nil
	case KindInteraction:
		return Name{Canonical: "interactions/" + id, Kind: KindInteraction, ID: id}, nil
	}
	return Name{}, invalid(raw, "a bare id needs a kind (batch, video or interaction)")
}

// validSegment reports whether s matches ^[A-Za-z0-9][A-Za-z0-9._~=+:@-]{0,254}$.
// Written by hand to avoid package-level regexp state; the tests cross-check
// it against the regexp.
func validSegment(s string) bool {
	if len(s) == 0 || len(s) > maxSegmentLen || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && !strings.ContainsRune("._~=+:@-", rune(c)) {
			return false
		}
	}
	return true
}

func isCollection(s string) bool {
	switch s {
	case "projects", "locations", "publishers", "models", "batches", "batchPredictionJobs", "operations", "interactions":
		return true
	}
	return false
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func invalid(raw, reason string) error {
	return fmt.Errorf("%w %q: %s", ErrInvalidName, shorten(raw), reason)
}

// shorten keeps error messages (and the logs they end up in) bounded.
func shorten(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return s[:maxQuoted] + "..."
}
