package opname

import "strings"

// Kind is the family of a Gemini long-running operation. It decides the
// canonical name form and which API call fetches its state.
type Kind string

// The kinds lrosink knows.
const (
	KindUnknown     Kind = ""
	KindBatch       Kind = "batch"
	KindVideo       Kind = "video"
	KindInteraction Kind = "interaction"
)

// ParseKind validates a kind given by a user (register, CLI).
func ParseKind(s string) (Kind, bool) {
	switch k := Kind(s); k {
	case KindBatch, KindVideo, KindInteraction:
		return k, true
	default:
		return KindUnknown, false
	}
}

// Kinds is every kind lrosink knows, in the order lists show them.
func Kinds() []Kind { return []Kind{KindBatch, KindVideo, KindInteraction} }

// Collection is what kind k's canonical names start with ("batches/",
// "operations/", "interactions/"), derived from Normalize so the forms are
// written down once; "" for a kind that has none.
func Collection(k Kind) string {
	n, err := Normalize("x", k)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(n.Canonical, "x")
}

// InEveryKind is what id, a name typed without its collection (batch_12),
// would be in each kind: where a search for it looks.
func InEveryKind(id string) []string {
	var out []string
	for _, k := range Kinds() {
		if c := Collection(k); c != "" {
			out = append(out, c+id)
		}
	}
	return out
}
