package results

import (
	"strconv"
	"strings"
)

// StatusName is the google.rpc.Code name of code (3: "INVALID_ARGUMENT"),
// "" for a number outside 0..16. The one table of these names: the console
// and the CLI label errors with it.
func StatusName(code int) string {
	names := [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
		"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
		"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}
	if code < 0 || code >= len(names) {
		return ""
	}
	return names[code]
}

// Label is e as a person reads it: "code 3 · INVALID_ARGUMENT: the prompt
// could not…", so a bare number never reads like a count. Code 0 means no
// code was given (a name that came instead is already at the front of the
// message, see ErrorMessage): "no code: quota exceeded". A code outside
// google.rpc's is shown as the number it is: "code 429: …".
func (e ErrorInfo) Label() string {
	head := "code " + strconv.Itoa(e.Code)
	switch name := StatusName(e.Code); {
	case e.Code == 0 && e.Message != "" && startsWithStatusName(e.Message):
		return e.Message
	case e.Code == 0:
		head = "no code"
	case name != "":
		head += " · " + name
		// A message that already names the code says it once.
		if e.Message == name {
			return head
		}
		if rest, ok := strings.CutPrefix(e.Message, name+": "); ok {
			return head + ": " + rest
		}
	}
	if e.Message == "" {
		return head
	}
	return head + ": " + e.Message
}

// startsWithStatusName reports whether msg begins "NAME:" or is "NAME" for
// a google.rpc code name (what ErrorMessage puts in front).
func startsWithStatusName(msg string) bool {
	name, _, _ := strings.Cut(msg, ":")
	for c := 1; StatusName(c) != ""; c++ {
		if name == StatusName(c) {
			return true
		}
	}
	return false
}
