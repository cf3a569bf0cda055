// Package intentmatch is the one rule by which a listed batch job is found
// to be an unbound intent's (CONTRACT.md §5): a retried `lrosink submit`
// (package submit) and the reconciler's adoption both call it, so a job
// one of them binds is the job the other would have. A leaf: it imports
// nothing of lrosink's.
package intentmatch

import (
	"strings"
	"time"
)

// Slack is how far before an intent's record time its job may have been
// created: the clocks of the submitter, the ledger and Gemini differ.
const Slack = 5 * time.Minute

// Job is a listed batch job as the rule reads it.
type Job struct {
	DisplayName, Model string
	CreateTime         time.Time // zero when the listing has none
	// Intent is the intent key the job's echoed user metadata names, ""
	// when the listing echoes none (GEMINI.md §13: unconfirmed live).
	Intent string
}

// Intent is what the rule reads of an unbound batch intent.
type Intent struct {
	Key, DisplayName, Model string
	CreatedAt               time.Time
}

// Since is the earliest create time a job of in can have: a listing, newest
// first, reads no further than it. Zero (read on) when in has no time.
func Since(in Intent) time.Time {
	if in.CreatedAt.IsZero() {
		return time.Time{}
	}
	return in.CreatedAt.Add(-Slack)
}

// Batch reports whether job is in's: its echoed metadata names in's key;
// or, echoing none, it has in's display name (submit sends lrosink-KEY
// unless told otherwise, so that alone is unique per key) and model, and
// was created no earlier than Since(in).
func Batch(job Job, in Intent) bool {
	if job.Intent != "" {
		return job.Intent == in.Key
	}
	if since := Since(in); !since.IsZero() && !job.CreateTime.IsZero() && job.CreateTime.Before(since) {
		return false
	}
	return in.DisplayName != "" && job.DisplayName == in.DisplayName && model(job.Model) == model(in.Model)
}

// model is a model name without its "models/" prefix (a listing and a
// caller may spell it either way).
func model(m string) string { return strings.TrimPrefix(strings.TrimSpace(m), "models/") }
