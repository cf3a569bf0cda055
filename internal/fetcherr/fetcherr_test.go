package fetcherr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/lrosink/lrosink/internal/fetcherr"
)

// marked is an adapter's own error type that says it is transient, the way
// gemini.TransientError does.
type marked struct{ err error }

func (e *marked) Error() string        { return "marked: " + e.err.Error() }
func (e *marked) Unwrap() error        { return e.err }
func (e *marked) Is(target error) bool { return target == fetcherr.ErrTransient }

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want fetcherr.Kind
	}{
		{"nil", nil, fetcherr.OK},
		{"not found", fetcherr.ErrNotFound, fetcherr.NotFound},
		{"wrapped not found", fmt.Errorf("get x: %w: HTTP 404", fetcherr.ErrNotFound), fetcherr.NotFound},
		{"transient", fmt.Errorf("get x: %w", fetcherr.ErrTransient), fetcherr.Transient},
		{"adapter type", fmt.Errorf("get x: %w", &marked{context.Canceled}), fetcherr.Transient},
		{"anything else", errors.New("HTTP 403"), fetcherr.Permanent},
		{"a context error alone", context.Canceled, fetcherr.Permanent},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := fetcherr.KindOf(c.err); got != c.want {
				t.Errorf("KindOf(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[fetcherr.Kind]string{fetcherr.OK: "ok", fetcherr.NotFound: "not-found",
		fetcherr.Transient: "transient", fetcherr.Permanent: "permanent", fetcherr.Kind(99): "Kind(99)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}
