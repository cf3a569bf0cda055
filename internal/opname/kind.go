package opname

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
