// Package fetcherr names what asking the Gemini API for an operation's
// state can fail with, in the consumers' terms: the reconciler
// (reconcile.Fetcher), the door confirming a hint (ingest.Confirmer) and
// whoever reports on them decide by Kind, and an adapter (internal/gemini)
// maps its SDK's and HTTP errors onto it. As with go-cloud's gcerrors, the
// kinds belong to the port, not the adapter; they live in this leaf package
// because the door, which reconcile imports, needs them too.
package fetcherr

import (
	"errors"
	"fmt"
)

// Kind is what a fetch failed with.
type Kind int

const (
	// OK: no error.
	OK Kind = iota
	// NotFound: the API does not know the operation (404). Final:
	// retrying will not make it appear, and it is no terminal state.
	NotFound
	// Transient: the API or the way to it failed in a way that may pass
	// (408, 429, 5xx, transport errors, the caller gave up); the state is
	// unknown for now.
	Transient
	// Permanent: any other failure (a refused key, a malformed answer);
	// asking again the same way will fail again.
	Permanent
)

func (k Kind) String() string {
	switch k {
	case OK:
		return "ok"
	case NotFound:
		return "not-found"
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// An adapter's error has a kind by wrapping one of these (errors.Is): with
// %w, or, for its own error type, with an Is method.
var (
	ErrNotFound  = errors.New("operation not found")
	ErrTransient = errors.New("transient failure")
)

// ErrBudgetSpent is what a call budget that may not be waited on (a hint's
// confirmation must not queue behind the reconciler's checks) fails a
// request with before it is sent: no call was made. Inside an adapter's
// transient error its kind is Transient; a caller that answers it (503
// gemini-budget-spent) tests for it with errors.Is.
var ErrBudgetSpent = errors.New("the Gemini request budget (LROSINK_GEMINI_QPS) is spent for now")

// KindOf classifies a fetch error: NotFound or Transient when it wraps
// their sentinel, Permanent for any other error, OK for nil.
func KindOf(err error) Kind {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, ErrNotFound):
		return NotFound
	case errors.Is(err, ErrTransient):
		return Transient
	}
	return Permanent
}
