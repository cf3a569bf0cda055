package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ReadyFor is how long one readiness answer is reused: a burst of probes
// costs the store one read, and "ready" means the store answered within it.
// It is also how long writes that failed must have been idle before
// /readyz tries one itself (Writes).
const ReadyFor = 5 * time.Second

// readiness is GET /readyz's body.
type readiness struct {
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Readyz answers whether the process can do its work. 503 (with
// Retry-After) and a status naming what cannot: "store-unreachable" when
// probe (a bounded store read) failed within the last ReadyFor, else the
// status of the first of writes whose latest write failed
// ("ledger-writes-failing", "results-writes-failing"); the detail says
// what failed. Otherwise 200 {"status":"ready"}. Unlike /healthz (liveness,
// which checks nothing), it costs at most one store read per ReadyFor and,
// while writes fail with none made, one probe write per ReadyFor.
func Readyz(probe func(context.Context) error, writes ...*Writes) http.Handler {
	var (
		mu      sync.Mutex
		checked time.Time
		last    error
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// One probe at a time: the others wait for it and reuse its answer.
		// Not the prober's context: a prober that hangs up early must not
		// make a healthy store look unreachable to the next one. Each probe
		// is bounded by its own timeout.
		ctx := context.WithoutCancel(r.Context())
		mu.Lock()
		if checked.IsZero() || time.Since(checked) >= ReadyFor {
			last, checked = probe(ctx), time.Now()
		}
		status, detail := "", ""
		if last != nil {
			status, detail = "store-unreachable", last.Error()
		} else {
			for _, wr := range writes {
				if d, ok := wr.check(ctx); !ok {
					status, detail = wr.status, d
					break
				}
			}
		}
		mu.Unlock()
		if status != "" {
			reply(w, http.StatusServiceUnavailable, readiness{Status: status, Detail: detail})
			return
		}
		reply(w, http.StatusOK, readiness{Status: "ready"})
	})
}

// Writes follows one kind of write for /readyz: the ledger's, or the
// results sink's. Whoever writes tells it every outcome (Record); the
// latest decides. While it is a failure, /readyz answers 503 with status.
// With no write at all for ReadyFor after a failure (a full disk that was
// freed, with no traffic to show it), /readyz runs probe, a write that
// changes nothing anyone reads, at most once per ReadyFor; it succeeding
// is the success that clears the failure. Without a probe, only a write
// does (the reconciler retries a released claim's publish every pass).
type Writes struct {
	status string
	what   string // "ledger", "results": for the detail
	probe  func(context.Context) error
	now    func() time.Time
	// failing is nil while the latest write succeeded: a success costs a
	// writer one atomic load.
	failing atomic.Pointer[writeFailure]
}

type writeFailure struct {
	err      error     // the latest write's
	since    time.Time // the first failure in a row
	at       time.Time // the latest outcome (a write's, or a probe's)
	probeErr error     // the latest probe's, if one ran since err
}

// NewWrites follows the writes of what ("ledger", "results"); status is
// /readyz's while they fail ("ledger-writes-failing"); probe may be nil.
func NewWrites(what, status string, probe func(context.Context) error, now func() time.Time) *Writes {
	return &Writes{what: what, status: status, probe: probe, now: now}
}

// Record tells w the outcome of one write: nil, or why it failed. A caller
// that gave up before the write could finish tells nothing.
func (w *Writes) Record(err error) {
	if err == nil {
		if w.failing.Load() != nil {
			w.failing.Store(nil)
		}
		return
	}
	now := w.now()
	f := &writeFailure{err: err, since: now, at: now}
	if old := w.failing.Load(); old != nil {
		f.since = old.since
	}
	w.failing.Store(f)
}

// check reports whether the latest write succeeded, first running the
// probe when the failure has been idle for ReadyFor; else a detail saying
// what failed, since when. One check at a time (Readyz's lock).
func (w *Writes) check(ctx context.Context) (string, bool) {
	f := w.failing.Load()
	if f == nil {
		return "", true
	}
	if now := w.now(); w.probe != nil && now.Sub(f.at) >= ReadyFor {
		perr := w.probe(ctx)
		if perr == nil && w.failing.CompareAndSwap(f, nil) {
			return "", true
		}
		if perr != nil {
			probed := *f
			probed.at, probed.probeErr = now, perr
			w.failing.CompareAndSwap(f, &probed)
		}
		if f = w.failing.Load(); f == nil { // a write succeeded meanwhile
			return "", true
		}
	}
	detail := fmt.Sprintf("%s writes failing since %s: %v", w.what, f.since.UTC().Format(time.RFC3339), f.err)
	if f.probeErr != nil {
		detail += fmt.Sprintf("; a probe write at %s failed too: %v", f.at.UTC().Format(time.RFC3339), f.probeErr)
	}
	return detail, false
}
