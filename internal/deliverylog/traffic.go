package deliverylog

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// KeepRejections is how many rejected deliveries Traffic shows.
const KeepRejections = 10

// Rejection is a delivery answered 400, 401 or 413 before anything in it was
// trusted: an unverified body names nothing, so only its webhook-id (as
// sent, truncated) and the reason are kept.
type Rejection struct {
	At         time.Time
	DeliveryID string
	Reason     string
	Status     int
}

// Count is one line of a breakdown.
type Count struct {
	Name string
	N    int
}

// Window is the webhook traffic of the last hour as one process saw it.
type Window struct {
	// Deliveries counts verified deliveries by outcome.
	Deliveries []Count
	Total      int
	// Rejected counts rejected deliveries (400, 401, 413) by reason.
	Rejected      []Count
	RejectedTotal int
	// LastDelivery is when the last verified delivery arrived (ever, in
	// this process); zero: none.
	LastDelivery time.Time
	// Recent are the last few rejections, newest first.
	Recent []Rejection
	// FromLog: Deliveries, Total and LastDelivery were counted in the
	// delivery log (Tally.Window), so they outlive the process; Partial:
	// its read was cut at its bound (at least these).
	FromLog, Partial bool
	// RejectionsHere: the rejections are this process's (FromLog only;
	// without it none are known).
	RejectionsHere bool
}

// Traffic counts this process's webhook traffic per minute over the last
// hour, in memory (each instance counts its own; the metrics and the log
// lines are the fleet-wide view).
type Traffic struct {
	mu      sync.Mutex
	now     func() time.Time
	minutes [60]minute
	recent  []Rejection
	last    time.Time
}

type minute struct {
	at       int64 // Unix minute this slot counts; older slots are stale
	outcomes map[string]int
	rejected map[string]int
}

// NewTraffic counts with clock now.
func NewTraffic(now func() time.Time) *Traffic {
	if now == nil {
		now = time.Now
	}
	return &Traffic{now: now}
}

func (t *Traffic) slot(at time.Time) *minute {
	m := at.Unix() / 60
	s := &t.minutes[int(m%60+60)%60]
	if s.at != m {
		*s = minute{at: m, outcomes: map[string]int{}, rejected: map[string]int{}}
	}
	return s
}

// Delivery counts a verified delivery answered with outcome.
func (t *Traffic) Delivery(at time.Time, outcome string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.slot(at).outcomes[outcome]++
	if at.After(t.last) {
		t.last = at
	}
}

// Rejected counts a rejected delivery and keeps it among the recent ones.
func (t *Traffic) Rejected(at time.Time, deliveryID, reason string, status int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.slot(at).rejected[reason]++
	t.recent = append([]Rejection{{At: at, DeliveryID: deliveryID, Reason: reason, Status: status}}, t.recent...)
	if len(t.recent) > KeepRejections {
		t.recent = t.recent[:KeepRejections]
	}
}

// LastHour is the traffic of the 60 minutes up to now.
func (t *Traffic) LastHour() Window {
	t.mu.Lock()
	defer t.mu.Unlock()
	nowMin := t.now().Unix() / 60
	outcomes, rejected := map[string]int{}, map[string]int{}
	for _, s := range t.minutes {
		if s.at == 0 || s.at <= nowMin-60 || s.at > nowMin {
			continue
		}
		for k, v := range s.outcomes {
			outcomes[k] += v
		}
		for k, v := range s.rejected {
			rejected[k] += v
		}
	}
	w := Window{LastDelivery: t.last, Recent: slices.Clone(t.recent)}
	w.Deliveries, w.Total = counts(outcomes)
	w.Rejected, w.RejectedTotal = counts(rejected)
	return w
}

func counts(m map[string]int) ([]Count, int) {
	var out []Count
	total := 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, Count{Name: k, N: m[k]})
		total += m[k]
	}
	slices.SortStableFunc(out, func(a, b Count) int {
		if a.N != b.N {
			return b.N - a.N
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, total
}

// TrafficCounter counts the webhook deliveries the log holds, so the
// traffic figures survive a restart and are the fleet's, not one
// process's. Implemented by every ledger adapter, each with a bounded
// read: an index range over the window's entries (SQLite), or the logs
// appended to within it (Firestore: one read per operation delivered to,
// memory).
type TrafficCounter interface {
	// WebhookTraffic counts the webhook entries (SourceWebhook) at or
	// after since by outcome, reading at most limit entries (SQLite) or
	// logs (Firestore, memory); Partial says the bound was reached, so
	// there may be more. Last is when the newest webhook entry the log
	// holds arrived, of any age (zero: none).
	WebhookTraffic(ctx context.Context, since time.Time, limit int) (Tally, error)
}

// Tally is what TrafficCounter counted. It covers what the log keeps: an
// operation's newest DefaultKeep entries, for the log's TTL.
type Tally struct {
	Outcomes map[string]int
	Partial  bool
	Last     time.Time
}

// Window turns t into the Health page's figures; rejections (which the log
// cannot hold: they name no operation) come from this process's Traffic,
// when it has one.
func (t Tally) Window(rejections *Traffic) Window {
	w := Window{LastDelivery: t.Last, Partial: t.Partial, FromLog: true}
	w.Deliveries, w.Total = counts(t.Outcomes)
	if rejections != nil {
		r := rejections.LastHour()
		w.Rejected, w.RejectedTotal, w.Recent, w.RejectionsHere = r.Rejected, r.RejectedTotal, r.Recent, true
	}
	return w
}
