package intentmatch_test

import (
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/intentmatch"
)

func TestBatch(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	in := intentmatch.Intent{Key: "int_1", DisplayName: "lrosink-int_1", Model: "models/gemini-2.5-flash", CreatedAt: at}
	for _, c := range []struct {
		name string
		job  intentmatch.Job
		want bool
	}{
		{"echoed key", intentmatch.Job{Intent: "int_1"}, true},
		{"echoed key wins over a display name", intentmatch.Job{Intent: "int_2", DisplayName: "lrosink-int_1", Model: "models/gemini-2.5-flash"}, false},
		{"display name and model", intentmatch.Job{DisplayName: "lrosink-int_1", Model: "models/gemini-2.5-flash", CreateTime: at.Add(time.Second)}, true},
		{"model without its prefix", intentmatch.Job{DisplayName: "lrosink-int_1", Model: "gemini-2.5-flash"}, true},
		{"within the slack before", intentmatch.Job{DisplayName: "lrosink-int_1", Model: "models/gemini-2.5-flash", CreateTime: at.Add(-intentmatch.Slack)}, true},
		{"created before the slack", intentmatch.Job{DisplayName: "lrosink-int_1", Model: "models/gemini-2.5-flash", CreateTime: at.Add(-intentmatch.Slack - time.Second)}, false},
		{"other model", intentmatch.Job{DisplayName: "lrosink-int_1", Model: "models/gemini-2.5-pro"}, false},
		{"other display name", intentmatch.Job{DisplayName: "lrosink-int_10", Model: "models/gemini-2.5-flash"}, false},
	} {
		if got := intentmatch.Batch(c.job, in); got != c.want {
			t.Errorf("%s: Batch = %v, want %v", c.name, got, c.want)
		}
	}
	if intentmatch.Batch(intentmatch.Job{Model: "models/m"}, intentmatch.Intent{Key: "k", Model: "models/m"}) {
		t.Error("an intent without a display name matched a job without one")
	}
	if got := intentmatch.Since(in); !got.Equal(at.Add(-intentmatch.Slack)) || !intentmatch.Since(intentmatch.Intent{}).IsZero() {
		t.Errorf("Since = %v", got)
	}
}
