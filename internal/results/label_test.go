package results_test

import (
	"testing"

	"github.com/lrosink/lrosink/internal/results"
)

func TestErrorLabel(t *testing.T) {
	for _, c := range []struct {
		in   results.ErrorInfo
		want string
	}{
		{results.ErrorInfo{Code: 3, Message: "The prompt could not be read"}, "code 3 · INVALID_ARGUMENT: The prompt could not be read"},
		{results.ErrorInfo{Code: 16}, "code 16 · UNAUTHENTICATED"},
		{results.ErrorInfo{Code: 3, Message: "INVALID_ARGUMENT: bad input file"}, "code 3 · INVALID_ARGUMENT: bad input file"},
		{results.ErrorInfo{Code: 5, Message: "NOT_FOUND"}, "code 5 · NOT_FOUND"},
		{results.ErrorInfo{Code: 1, Message: "x"}, "code 1 · CANCELLED: x"},
		{results.ErrorInfo{Code: 0, Message: "quota exceeded"}, "no code: quota exceeded"},
		{results.ErrorInfo{Code: 0, Message: "RESOURCE_EXHAUSTED: quota exceeded"}, "RESOURCE_EXHAUSTED: quota exceeded"},
		{results.ErrorInfo{Code: 0}, "no code"},
		{results.ErrorInfo{Code: 429, Message: "slow down"}, "code 429: slow down"},
		{results.ErrorInfo{Code: 17, Message: "m"}, "code 17: m"},
		{results.ErrorInfo{Code: -1, Message: "m"}, "code -1: m"},
	} {
		if got := c.in.Label(); got != c.want {
			t.Errorf("%+v.Label() = %q, want %q", c.in, got, c.want)
		}
	}
	if results.StatusName(0) != "OK" || results.StatusName(16) != "UNAUTHENTICATED" || results.StatusName(17) != "" {
		t.Errorf("StatusName table ends wrong: %q %q %q", results.StatusName(0), results.StatusName(16), results.StatusName(17))
	}
}
