package httpapi

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// ReadyFor is how long one readiness answer is reused: a burst of probes
// costs the store one read, and "ready" means the store answered within it.
const ReadyFor = 5 * time.Second

// readiness is GET /readyz's body.
type readiness struct {
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Readyz answers whether the store answered recently: 200 {"status":"ready"}
// when probe (a bounded store read) succeeded within the last ReadyFor, 503
// {"status":"store-unreachable","detail":...} (with Retry-After) when it
// failed. Unlike /healthz (liveness, which checks nothing), it costs at most
// one store read per ReadyFor, and the answer waits for that read.
func Readyz(probe func(context.Context) error) http.Handler {
	var (
		mu      sync.Mutex
		checked time.Time
		last    error
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// One probe at a time: the others wait for it and reuse its answer.
		mu.Lock()
		var err error
		if checked.IsZero() || time.Since(checked) >= ReadyFor {
			// Not the prober's context: a prober that hangs up early must
			// not make a healthy store look unreachable to the next one.
			// The probe is bounded by its own read timeout.
			last, checked = probe(context.WithoutCancel(r.Context())), time.Now()
		}
		err = last
		mu.Unlock()
		if err != nil {
			reply(w, http.StatusServiceUnavailable, readiness{Status: "store-unreachable", Detail: err.Error()})
			return
		}
		reply(w, http.StatusOK, readiness{Status: "ready"})
	})
}
