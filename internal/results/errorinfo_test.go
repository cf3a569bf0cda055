package results_test

import (
	"testing"

	"github.com/lrosink/lrosink/internal/results"
)

func TestErrorMessage(t *testing.T) {
	for _, c := range []struct{ name, msg, want string }{
		{"", "", ""},
		{"", "quota", "quota"},
		{"RESOURCE_EXHAUSTED", "", "RESOURCE_EXHAUSTED"},
		{"RESOURCE_EXHAUSTED", "quota", "RESOURCE_EXHAUSTED: quota"},
	} {
		if got := results.ErrorMessage(c.name, c.msg); got != c.want {
			t.Errorf("ErrorMessage(%q, %q) = %q, want %q", c.name, c.msg, got, c.want)
		}
	}
}
