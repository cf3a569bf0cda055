// Package deliverylog keeps each operation's delivery log: every delivery
// the Webhook function verified and every reconcile observation, with what
// was answered, so an operator can see "did Gemini deliver it, how often,
// and what did we answer?" on one page (ops show, the console).
//
// The log is a store of its own (a deliveries collection or table), never
// the operation document: a duplicate delivery must keep costing the ledger
// one read and no write (P1). Entries go through a Recorder, an in-memory
// queue written by one background goroutine after the answer, so the log
// never delays an answer; what a crash can lose is the queue (see Recorder).
//
// Traffic keeps the last hour of this process's webhook traffic, and the
// last few rejected deliveries (webhook-id and reason only), for the
// console's Health page.
package deliverylog

import (
	"context"
	"slices"
	"time"
)

// Defaults of the log's bounds.
const (
	// DefaultKeep is how many entries an operation keeps (the newest).
	DefaultKeep = 50
	// DefaultTTL is LROSINK_DELIVERY_LOG_TTL's default: an entry older
	// than this is not shown, and a log not appended to for this long is
	// deleted (Firestore TTL policy; SQLite on a later append). The memory
	// ledger keeps every log for the life of the process.
	DefaultTTL = 7 * 24 * time.Hour
)

// Sources of entries.
const (
	SourceWebhook   = "webhook"
	SourceReconcile = "reconcile"
	// SourceConsole is an operator's action on the console's operation
	// page (replay, check now, publish now): Status names the action,
	// Actor who asked, DeliveryID a replay's replay_id.
	SourceConsole = "console"
)

// Entry is one delivery or reconcile observation of an operation.
type Entry struct {
	// At is when the delivery was received (or the observation made).
	At     time.Time `json:"at"`
	Source string    `json:"source"`
	// DeliveryID is the webhook-id header (truncated) of a webhook, the
	// replay_id a console replay published.
	DeliveryID string `json:"delivery_id,omitempty"`
	// Status is the event type of a delivery (batch.succeeded), the
	// status Gemini answered a reconcile check with (JOB_STATE_RUNNING),
	// or a console action (replay, check-now, publish-now).
	Status string `json:"status,omitempty"`
	// Actor is who asked for a console action: the signed-in session or
	// the IAM principal (console entries only).
	Actor string `json:"actor,omitempty"`
	// Auth is how a delivery was authenticated: v1, v1a or jwt.
	Auth    string `json:"auth,omitempty"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	// Answer is the HTTP status a delivery was answered; 0 for reconcile.
	Answer int `json:"answer,omitempty"`
	// Latency is from receipt to answer (a check: fetch and door).
	Latency time.Duration `json:"latency_ns"`
}

// Retention bounds one operation's log.
type Retention struct {
	Keep int
	TTL  time.Duration
}

// WithDefaults fills unset bounds.
func (r Retention) WithDefaults() Retention {
	if r.Keep <= 0 {
		r.Keep = DefaultKeep
	}
	if r.TTL <= 0 {
		r.TTL = DefaultTTL
	}
	return r
}

// Store keeps the log. Implemented by every ledger adapter (a deliveries
// collection or table, separate from operations and claims).
type Store interface {
	// AppendDeliveries adds entries to operation opID's log and keeps only
	// the newest r.Keep, dropping those older than r.TTL before the newest
	// entry; the log expires r.TTL after its newest entry, whether or not
	// it is appended to again (ledgertest.RunDeliveryExpiry). Dropping and
	// expiry may come later (a TTL policy, or a later append's expiry on
	// SQLite and memory): readers show only what Live keeps.
	AppendDeliveries(ctx context.Context, opID string, entries []Entry, r Retention) error
	// ListDeliveries returns opID's log, newest first (none: empty, no
	// error).
	ListDeliveries(ctx context.Context, opID string) ([]Entry, error)
}

// Merge is what every adapter keeps after an append: stored (a log as
// kept, newest first) with added (in arrival order), newest first by time,
// a later arrival first among equal times; no entry older than r.TTL before
// the newest; at most r.Keep. (SQLite keeps the newest r.Keep at once and
// drops by age in bounded batches at later appends: see Store.)
func Merge(stored, added []Entry, r Retention) []Entry {
	r = r.WithDefaults()
	out := make([]Entry, 0, len(stored)+len(added))
	for i := len(added) - 1; i >= 0; i-- {
		out = append(out, added[i])
	}
	out = append(out, stored...)
	slices.SortStableFunc(out, func(a, b Entry) int { return b.At.Compare(a.At) })
	if len(out) == 0 {
		return out
	}
	cut := out[0].At.Add(-r.TTL)
	out = slices.DeleteFunc(out, func(e Entry) bool { return !e.At.After(cut) })
	if len(out) > r.Keep {
		out = out[:r.Keep]
	}
	return out
}

// Live drops entries older than ttl at now (a log the TTL policy has not
// deleted yet, or entries kept beside newer ones).
func Live(log []Entry, now time.Time, ttl time.Duration) []Entry {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return slices.DeleteFunc(slices.Clone(log), func(e Entry) bool { return !e.At.After(now.Add(-ttl)) })
}
