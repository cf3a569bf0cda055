package gemini

import (
	"testing"

	"google.golang.org/genai"

	"github.com/lrosink/lrosink/internal/lifecycle"
)

// The SDK translates BATCH_STATE_* today; the mapping must not depend on it.
func TestBatchStateAcceptsRawBatchStates(t *testing.T) {
	for raw, want := range map[genai.JobState]lifecycle.State{
		"BATCH_STATE_PENDING":     lifecycle.Pending,
		"BATCH_STATE_RUNNING":     lifecycle.Running,
		"BATCH_STATE_SUCCEEDED":   lifecycle.Succeeded,
		"BATCH_STATE_FAILED":      lifecycle.Failed,
		"BATCH_STATE_CANCELLED":   lifecycle.Cancelled,
		"BATCH_STATE_EXPIRED":     lifecycle.Expired,
		"BATCH_STATE_UNSPECIFIED": "BATCH_STATE_UNSPECIFIED",
	} {
		if got := batchState(raw); got != want {
			t.Errorf("batchState(%s) = %s, want %s", raw, got, want)
		}
	}
}
