// Package metrics exposes lrosink's Prometheus metrics (GET /metrics). Each
// App owns one Metrics with its own registry, never the global default one,
// so two Apps in one process (tests, the simulator) never share counts.
//
// The parts report through small interfaces defined where they are
// consumed: the ingest door's ingest.Observer, the reconciler's
// reconcile.Observer; the results sink, the Gemini fetcher and the webhook
// handler are wrapped here. The Cloud Logging log-based metrics (Terraform)
// are unaffected: they count the same log lines as before.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fetcherr"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/shard"
)

// Metrics holds one App's collectors and their registry.
type Metrics struct {
	reg *prometheus.Registry

	decisions       *prometheus.CounterVec
	webhookRequests *prometheus.CounterVec
	webhookDuration prometheus.Histogram
	publishFailures prometheus.Counter
	reconcilePasses *prometheus.CounterVec
	geminiCalls     *prometheus.CounterVec
	pending         *knownGauge
	due             *knownGauge
	stuck           *knownGauge
	countErrors     prometheus.Counter
	rejections      *prometheus.CounterVec

	// dueBacklog and oldestOverdue say the reconciler is falling behind.
	dueBacklog    *knownGauge
	oldestOverdue *knownGauge
	// claimsLeft says owed messages wait for the next pass.
	claimsLeft *knownGauge

	// counter, when set, refreshes pending and due on every scrape.
	counter Counter
	now     func() time.Time
}

// Counter counts the ledger's non-terminal operations and those due for a
// check (ledger.Queries): one count aggregation each.
type Counter interface {
	CountPending(ctx context.Context) (int64, error)
	CountDue(ctx context.Context, rg shard.Range, now time.Time) (int64, error)
}

// scrapeCountTimeout bounds the two counts a scrape makes.
const scrapeCountTimeout = 3 * time.Second

// CountFrom makes every scrape set lrosink_operations_pending and
// lrosink_operations_due from the ledger's counts at now (two count
// queries per scrape). A count that fails leaves the gauge as it was and
// counts lrosink_ledger_count_errors_total.
func (m *Metrics) CountFrom(c Counter, now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	m.counter, m.now = c, now
}

// New makes the collectors and registers them, with the Go runtime and
// process collectors, on a new registry.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lrosink_ingest_decisions_total",
			Help: `Decisions of the ingest door, as logged in "ingest decision" lines (outcome "error" when it failed).`,
		}, []string{"outcome", "reason", "source"}),
		webhookRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lrosink_webhook_requests_total",
			Help: "Requests to the Webhook function by HTTP status answered.",
		}, []string{"status"}),
		webhookDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lrosink_webhook_duration_seconds",
			Help:    "Time the Webhook function took to answer.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		publishFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lrosink_publish_failures_total",
			Help: "Results messages the sink did not accept (the claim is released and retried).",
		}),
		reconcilePasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lrosink_reconcile_passes_total",
			Help: `Reconcile passes by result: "ok", or "error" when the ledger could not be queried.`,
		}, []string{"result"}),
		geminiCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lrosink_gemini_calls_total",
			Help: `Gemini API fetches by kind (batch, video, interaction, batch-list) and result (ok, not-found, unavailable, error).`,
		}, []string{"kind", "result"}),
		pending: newKnownGauge(prometheus.GaugeOpts{
			Name: "lrosink_operations_pending",
			Help: "Operations in the ledger not in a terminal state (a count query at each scrape and at the end of each reconcile pass: its still_pending).",
		}),
		due: newKnownGauge(prometheus.GaugeOpts{
			Name: "lrosink_operations_due",
			Help: "Pending operations whose next reconcile check is due now (a count query at each scrape).",
		}),
		countErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lrosink_ledger_count_errors_total",
			Help: "Scrape-time ledger counts that failed (the pending and due gauges then keep their last value, and are absent until a count succeeds).",
		}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lrosink_webhook_rejections_total",
			Help: "Webhook deliveries refused before they were trusted (400, 401, 413), by reason.",
		}, []string{"reason"}),
		stuck: newKnownGauge(prometheus.GaugeOpts{
			Name: "lrosink_operations_stuck",
			Help: "Operations pending longer than LROSINK_STUCK_AFTER at the last successful reconcile pass (its stuck).",
		}),
		dueBacklog: newKnownGauge(prometheus.GaugeOpts{
			Name: "lrosink_reconcile_due_backlog",
			Help: "Operations still due when the last successful reconcile pass ended: it could not check them (its due_backlog).",
		}),
		oldestOverdue: newKnownGauge(prometheus.GaugeOpts{
			Name: "lrosink_reconcile_oldest_overdue_seconds",
			Help: "How long the earliest operation the last successful reconcile pass left due had been due (its oldest_overdue_seconds).",
		}),
		claimsLeft: newKnownGauge(prometheus.GaugeOpts{
			Name: "lrosink_reconcile_claims_due_after",
			Help: "Owed results messages (due claims) the last successful reconcile pass did not reach before its budget ran out (its claims_due_after).",
		}),
	}
	m.reg.MustRegister(m.decisions, m.webhookRequests, m.webhookDuration, m.publishFailures,
		m.reconcilePasses, m.geminiCalls, m.pending, m.due, m.stuck, m.countErrors, m.rejections, m.dueBacklog, m.oldestOverdue, m.claimsLeft,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Dropper counts what was not written (deliverylog.Recorder).
type Dropper interface {
	Dropped() int64
}

// CountDeliveryLogDrops exposes d's count as
// lrosink_delivery_log_dropped_total, read at each scrape. Call it once per
// App (a second registration of the name panics).
func (m *Metrics) CountDeliveryLogDrops(d Dropper) {
	m.countFrom("lrosink_delivery_log_dropped_total",
		"Delivery log entries not logged because the recorder's queue was full or it was closed (the deliveries were answered and applied; only their log entries are missing).",
		d.Dropped)
}

// CheckpointCounter counts failed checkpoints (the SQLite ledger's
// checkpointer).
type CheckpointCounter interface {
	CheckpointFailures() int64
}

// CountCheckpointFailures exposes c's count as
// lrosink_sqlite_checkpoint_failures_total, read at each scrape. Call it
// once per App.
func (m *Metrics) CountCheckpointFailures(c CheckpointCounter) {
	m.countFrom("lrosink_sqlite_checkpoint_failures_total",
		"Background checkpoints of the SQLite ledger's WAL that failed (the writer's own checkpoints still bound the WAL; commits may be slower).",
		c.CheckpointFailures)
}

// countFrom registers a counter that reads its value from count at each
// scrape: a count a component keeps itself.
func (m *Metrics) countFrom(name, help string, count func() int64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
		func() float64 { return float64(count()) }))
}

// Registry is where the collectors are registered (for tests and for an
// entry point that adds its own).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
// With CountFrom, each scrape first counts the ledger.
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.counter != nil {
			m.refreshCounts(r.Context())
		}
		h.ServeHTTP(w, r)
	})
}

func (m *Metrics) refreshCounts(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, scrapeCountTimeout)
	defer cancel()
	if n, err := m.counter.CountPending(ctx); err != nil {
		m.countErrors.Inc()
	} else {
		m.pending.Set(float64(n))
	}
	if n, err := m.counter.CountDue(ctx, shard.All(), m.now()); err != nil {
		m.countErrors.Inc()
	} else {
		m.due.Set(float64(n))
	}
}

// Rejected counts a webhook delivery refused by reason (with
// deliverylog.Log's Rejected signature, so both can be told).
func (m *Metrics) Rejected(_ time.Time, _, reason string, _ int) {
	m.rejections.WithLabelValues(reason).Inc()
}

// ObserveDecision implements ingest.Observer.
func (m *Metrics) ObserveDecision(source event.Source, res ingest.Result, err error) {
	outcome, reason := string(res.Outcome), res.Reason
	if err != nil {
		outcome, reason = "error", errorReason(err)
	}
	m.decisions.WithLabelValues(outcome, reason, string(source)).Inc()
}

// errorReason classifies a door error into a small, fixed label set,
// whatever the error says. The names are the Webhook function's answer
// reasons (httpapi), except that a failed confirmation is one
// "not-confirmed" (the answer splits it by Gemini's error; a video named
// without its model has its own, "video-model-unknown", and so have the
// hint answers that made no call or wait for Gemini: "not-found-yet",
// "gemini-budget-spent", "answered-from-memory") and an injected crash is
// "crashed" (the answer says ledger-unavailable).
func errorReason(err error) string {
	var invalid *event.InvalidError
	switch {
	case errors.As(err, &invalid):
		return "invalid-name"
	case errors.Is(err, ingest.ErrClaimMissing):
		return "claim-missing"
	case errors.Is(err, ingest.ErrRecalled):
		return "answered-from-memory" // no Gemini call
	case errors.Is(err, fetcherr.ErrBudgetSpent):
		return "gemini-budget-spent" // no Gemini call
	case errors.Is(err, ingest.ErrNotFoundYet):
		return "not-found-yet"
	case errors.Is(err, ingest.ErrVideoModelUnknown):
		return "video-model-unknown" // needs a registration with the model path, not a retry
	case errors.Is(err, ingest.ErrNotConfirmed):
		return "not-confirmed"
	case errors.Is(err, ingest.ErrSideEffect):
		return "side-effect-failed"
	case errors.Is(err, ingest.ErrCrashed):
		return "crashed"
	default:
		return "ledger-unavailable"
	}
}

// ObservePass implements reconcile.Observer. The gauges are set only from
// a pass that completed (a failed pass's summary is partial) and counted
// the whole ledger: a shard's PassRange counts its buckets only, and would
// make them jump between shards' values.
func (m *Metrics) ObservePass(_ time.Time, s reconcile.Summary, err error) {
	if err != nil {
		m.reconcilePasses.WithLabelValues("error").Inc()
		return
	}
	m.reconcilePasses.WithLabelValues("ok").Inc()
	if s.RangeOnly() {
		return
	}
	// Only what the pass counted: a pass cut short, or one polling nothing
	// (no key), leaves figures at 0 that it never established.
	if s.Measured(reconcile.FigureStillPending) {
		m.pending.Set(float64(s.StillPending))
	}
	if s.Measured(reconcile.FigureStuck) {
		m.stuck.Set(float64(s.Stuck))
	}
	if s.Measured(reconcile.FigureBacklog) {
		m.dueBacklog.Set(float64(s.DueBacklog))
		m.oldestOverdue.Set(float64(s.OldestOverdueSeconds))
	}
	if s.Measured(reconcile.FigureClaimsLeft) {
		m.claimsLeft.Set(float64(s.ClaimsDueAfter))
	}
}

// knownGauge is a gauge exported only once it has been set: before the
// first count succeeds its value is unknown, and a 0 would read as a
// healthy ledger (an alert on it silent while the store has never answered).
type knownGauge struct {
	prometheus.Gauge
	known atomic.Bool
}

func newKnownGauge(opts prometheus.GaugeOpts) *knownGauge {
	return &knownGauge{Gauge: prometheus.NewGauge(opts)}
}

// Set sets the value and exports the gauge from now on.
func (g *knownGauge) Set(v float64) {
	g.Gauge.Set(v)
	g.known.Store(true)
}

// Collect implements prometheus.Collector: nothing until the first Set.
func (g *knownGauge) Collect(ch chan<- prometheus.Metric) {
	if g.known.Load() {
		g.Gauge.Collect(ch)
	}
}

// Publisher is the results sink as the ingest door uses it.
type Publisher interface {
	Publish(ctx context.Context, msg results.Message) error
}

// Sink counts the publishes p refuses. A p that can say what it wrote
// recently (ingest.TailChecker, the file sink) is still asked through it.
func (m *Metrics) Sink(p Publisher) Publisher {
	c := &countingSink{p: p, failures: m.publishFailures}
	if tc, ok := p.(ingest.TailChecker); ok {
		return &countingTailSink{countingSink: c, tc: tc}
	}
	return c
}

type countingTailSink struct {
	*countingSink
	tc ingest.TailChecker
}

func (s *countingTailSink) InTail(ctx context.Context, msg results.Message) (bool, error) {
	return s.tc.InTail(ctx, msg)
}

type countingSink struct {
	p        Publisher
	failures prometheus.Counter
}

func (s *countingSink) Publish(ctx context.Context, msg results.Message) error {
	err := s.p.Publish(ctx, msg)
	if err != nil {
		s.failures.Inc()
	}
	return err
}

// Gemini counts the fetches f makes; the result serves both the reconciler
// and the door's confirmations.
func (m *Metrics) Gemini(f reconcile.Fetcher) reconcile.Fetcher {
	return &countingFetcher{f: f, calls: m.geminiCalls}
}

type countingFetcher struct {
	f     reconcile.Fetcher
	calls *prometheus.CounterVec
}

func (c *countingFetcher) Fetch(ctx context.Context, kind opname.Kind, apiName string) (event.Event, error) {
	ev, err := c.f.Fetch(ctx, kind, apiName)
	k := string(kind)
	if k == "" {
		k = "unknown"
	}
	c.calls.WithLabelValues(k, callResult(err)).Inc()
	return ev, err
}

func (c *countingFetcher) ListBatches(ctx context.Context, pageSize int, pageToken string) ([]event.ListedBatch, string, error) {
	evs, next, err := c.f.ListBatches(ctx, pageSize, pageToken)
	c.calls.WithLabelValues("batch-list", callResult(err)).Inc()
	return evs, next, err
}

func callResult(err error) string {
	if errors.Is(err, fetcherr.ErrBudgetSpent) {
		return "budget-spent" // refused before a request was sent
	}
	switch fetcherr.KindOf(err) {
	case fetcherr.OK:
		return "ok"
	case fetcherr.NotFound:
		return "not-found"
	case fetcherr.Transient:
		return "unavailable"
	default:
		return "error"
	}
}

// Webhook counts next's answers by status and times them. Wrap it outside
// everything that may answer (deadline, logging), so every answer counts.
func (m *Metrics) Webhook(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		m.webhookDuration.Observe(time.Since(start).Seconds())
		m.webhookRequests.WithLabelValues(strconv.Itoa(rec.status())).Inc()
	})
}

// statusRecorder remembers the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// status is what the client saw: 200 when the handler wrote nothing.
func (s *statusRecorder) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}
