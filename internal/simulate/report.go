package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/results"
)

// Report is what a run found. Violations empty means every invariant held.
type Report struct {
	Seed       int64   `json:"seed"`
	Ops        int     `json:"ops"`
	Backend    string  `json:"backend"`
	Options    optJSON `json:"options"`
	Deliveries struct {
		Events     int            `json:"events"`
		Dropped    int            `json:"dropped"`
		Duplicated int            `json:"duplicated"`
		Reordered  int            `json:"reordered"`
		Sent       int            `json:"sent"`
		Retried    int            `json:"retried_after_error"`
		ByStatus   map[string]int `json:"by_status"`
	} `json:"deliveries"`
	Faults struct {
		CrashBeforeCommit int64 `json:"crash_inside_transaction"`
		CrashAfterCommit  int64 `json:"crash_after_commit"`
		CrashAfterPublish int64 `json:"crash_after_publish"`
		LedgerErrors      int64 `json:"ledger_errors"`
		PublishErrors     int64 `json:"publish_errors"`
		SlowEffects       int64 `json:"lease_expired_during_effect"`
		Fenced            int64 `json:"writes_rejected_by_fencing"`
		// UnstorableMetadata: operations given metadata a Firestore map
		// cannot hold; RegisterRefused: registrations answered 400 for an
		// oversize value; MetadataDropped: oversize webhook metadata the
		// door dropped (WARN lines).
		UnstorableMetadata int64 `json:"unstorable_metadata_operations"`
		RegisterRefused    int64 `json:"registrations_refused_for_metadata"`
		MetadataDropped    int   `json:"event_metadata_dropped"`
		// Poison operations: the door can never ingest them (Options.Poison).
		Poison              int64 `json:"poison_operations"`
		PoisonUnschedulable int64 `json:"poison_unschedulable"`
		// Gemini's end states and shapes (Options.Incomplete,
		// PartialBatches, ErrorObjects) and the deliveries a disabled
		// webhook never made (Options.WebhookOutage).
		Incomplete     int64 `json:"incomplete_interactions"`
		PartialBatches int64 `json:"partial_batches"`
		ErrorObjects   int64 `json:"error_object_failures"`
		LostToOutage   int64 `json:"deliveries_lost_to_webhook_outage"`
	} `json:"faults"`
	// Outage is the webhook outage as the run saw it: when, the reconciler's
	// alert and recovery lines, and how fast operations that finished while
	// it lasted (once noticed) were settled by polling.
	Outage struct {
		From      time.Time `json:"from,omitzero"`
		To        time.Time `json:"to,omitzero"`
		Alerts    int       `json:"webhook_disabled_alerts"`
		Recovered int       `json:"webhook_recovered_lines"`
		Watched   int       `json:"operations_finished_during"`
		// SlowestSettle is the longest of those operations took to settle;
		// MaxSettle its bound: one reconcile interval, plus one for each of
		// its checks that failed meanwhile (SlowestFailedChecks; injected
		// store errors and kills make the door fail, and degraded polling
		// retries on the next pass). Every operation is held to its own.
		SlowestSettle       string `json:"slowest_settle"`
		MaxSettle           string `json:"max_settle"`
		SlowestFailedChecks int    `json:"slowest_failed_checks"`
	} `json:"webhook_outage"`
	// Submissions are the operations created through package submit
	// (Options.Submit) and what became of their intents by the end.
	Submissions struct {
		Submitted       int64 `json:"submitted"`
		CrashBeforeBind int64 `json:"killed_between_create_and_bind"`
		BindErrors      int64 `json:"bind_errors"`
		SubmitErrors    int64 `json:"first_attempts_creating_nothing"`
		Duplicates      int64 `json:"duplicate_submits"`
		RetriesExisting int64 `json:"retries_found_existing"`
		RetriesRefused  int64 `json:"retries_refused_unbound"`
		RetryErrors     int64 `json:"retry_errors"`
		// Creates is the fake's tally of creates: one per submission.
		Creates int `json:"gemini_creates"`
		// Bound intents by who bound them (submit, webhook, reconcile);
		// UnboundAlerted the intents left unbound, alerted, whose
		// operation no path could show lrosink; MetadataExact the bound
		// operations whose metadata was the caller's exactly.
		Bound          int            `json:"intents_bound"`
		BoundBy        map[string]int `json:"intents_bound_by"`
		UnboundAlerted int            `json:"intents_unbound_alerted"`
		IntentAlerts   int            `json:"intent_unbound_alert_lines"`
		MetadataExact  int            `json:"metadata_exact"`
	} `json:"submissions"`
	Outcomes    map[string]int `json:"outcomes"`
	DropReasons map[string]int `json:"drop_reasons"`
	Reconcile   struct {
		Passes        int `json:"passes"`
		Failed        int `json:"failed_passes"`
		Checked       int `json:"checked"`
		Settled       int `json:"settled"`
		ClaimsRetried int `json:"claims_retried"`
		StuckAlerts   int `json:"stuck_alerts"`
		// StuckAlertBound is what the alert schedule allows for the stuck
		// operations of the run (twice the schedule's points: a conflicting
		// record repeats a line once).
		StuckAlertBound int `json:"stuck_alert_bound"`
		// StuckAlerted counts the operations alerted at least once.
		StuckAlerted int `json:"stuck_alerted_operations"`
		Errors       int `json:"errors"`
	} `json:"reconcile"`
	Final struct {
		Terminal       int `json:"terminal_operations"`
		NeverFinished  int `json:"never_finished"`
		SettledWebhook int `json:"settled_by_webhook"`
		SettledRecon   int `json:"settled_by_reconcile"`
		Messages       int `json:"messages"`
		ExtraExplained int `json:"extra_messages_explained"`
		// ExactlyOnce: the results sink says what it wrote (a file), so
		// no extra message is allowed, whatever was injected.
		ExactlyOnce bool `json:"results_exactly_once"`
		// ExtraByCause splits the extra messages by what left a claim
		// HELD after its holder published: a kill after publish, a DONE
		// commit that failed (after its retries), a lease that ran out
		// mid-effect; Other is what none of these accounts for.
		ExtraByCause struct {
			CrashAfterPublish int `json:"crash_after_publish"`
			DoneCommitError   int `json:"done_commit_error"`
			LeaseExpired      int `json:"lease_expired_mid_effect"`
			Other             int `json:"other"`
		} `json:"extra_messages_by_cause"`
		DistinctKeys    int `json:"distinct_keys"`
		ObservedReads   int `json:"observed_reads"`
		StuckUnresolved int `json:"stuck_operations"`
		// PoisonPending: poison operations left pending (none may settle).
		PoisonPending int `json:"poison_pending"`
		// Incomplete: operations settled INCOMPLETE. BatchStatsChecked:
		// batch messages settled by reconcile whose batch_stats matched
		// Gemini's (PartialChecked of them with failed requests);
		// BatchStatsByWebhook: batch messages settled by webhook, which
		// carry none (a documented limit). ErrorsChecked: FAILED messages
		// whose error matched Gemini's.
		Incomplete          int `json:"incomplete"`
		BatchStatsChecked   int `json:"batch_stats_checked"`
		PartialChecked      int `json:"partial_batch_stats_checked"`
		BatchStatsByWebhook int `json:"batches_settled_by_webhook_without_stats"`
		ErrorsChecked       int `json:"errors_checked"`
	} `json:"final"`
	Latency struct {
		SettleP50 string  `json:"settle_p50"`
		SettleP90 string  `json:"settle_p90"`
		SettleP99 string  `json:"settle_p99"`
		SettleMax string  `json:"settle_max"`
		HTTPP50ms float64 `json:"webhook_http_p50_ms"`
		HTTPP99ms float64 `json:"webhook_http_p99_ms"`
	} `json:"latency"`
	Cost struct {
		// StoreCounted: the store tallies its reads and writes (Firestore);
		// otherwise (SQLite) the store figures are not known, not zero.
		StoreCounted            bool    `json:"store_counted"`
		StoreReads              int64   `json:"store_reads"`
		StoreWrites             int64   `json:"store_writes"`
		GeminiCalls             int     `json:"gemini_calls"`
		ReadsPerCompletion      float64 `json:"store_reads_per_completion"`
		WritesPerCompletion     float64 `json:"store_writes_per_completion"`
		GeminiCallsPerOperation float64 `json:"gemini_calls_per_operation"`
	} `json:"cost"`
	WallSeconds    float64  `json:"wall_seconds"`
	ViolationCount int      `json:"violation_count"`
	Violations     []string `json:"violations"`
}

type optJSON struct {
	Dup, Reorder, Drop, Crash, LedgerErrors, PublishErrors, SlowEffects, NeverNotified, NeverFinish float64
	Horizon, ReconcileEvery, Lease, StuckAfter                                                      string
	UnstorableMetadata, Poison                                                                      float64
	Incomplete, PartialBatches, ErrorObjects                                                        float64
	WebhookOutage                                                                                   string
	Submit, CrashBeforeBind, DuplicateSubmit                                                        float64
	IntentGrace                                                                                     string
}

// decisionStats is a slog handler that counts what the real code logs:
// ingest decisions by outcome and reason, stuck alerts by operation.
type decisionStats struct {
	mu       sync.Mutex
	outcomes map[string]int
	reasons  map[string]int
	alerts   map[string]int
	// intentAlerts counts intent-unbound alert lines by intent key.
	intentAlerts map[string]int
	statuses     map[string]int
	latencies    []time.Duration
	retries      int
	dropped      int
	sent         int
	passes       int
	failed       int
	sum          reconcile.Summary
	// hookAlerts and hookRecovered count the webhook-disabled alert and
	// its recovery line.
	hookAlerts, hookRecovered int
	// failedChecks: per operation, when (simulated) each reconcile check
	// of it failed (the line carries "check", the failure's note).
	failedChecks map[string][]time.Time
	now          func() time.Time
}

// newDecisionStats counts on the clock now (simulated time).
func newDecisionStats(now func() time.Time) *decisionStats {
	return &decisionStats{outcomes: map[string]int{}, reasons: map[string]int{}, alerts: map[string]int{}, statuses: map[string]int{},
		intentAlerts: map[string]int{},
		failedChecks: map[string][]time.Time{}, now: now}
}

func (s *decisionStats) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs keeps them: the reconciler logs a check's lines on a logger
// that carries the operation.
func (s *decisionStats) WithAttrs(as []slog.Attr) slog.Handler { return statsWith{s, as} }
func (s *decisionStats) WithGroup(string) slog.Handler         { return s }

// statsWith is decisionStats with attributes from Logger.With.
type statsWith struct {
	s     *decisionStats
	attrs []slog.Attr
}

func (w statsWith) Enabled(context.Context, slog.Level) bool { return true }
func (w statsWith) WithGroup(string) slog.Handler            { return w }
func (w statsWith) WithAttrs(as []slog.Attr) slog.Handler {
	return statsWith{w.s, append(slices.Clone(w.attrs), as...)}
}
func (w statsWith) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(w.attrs...)
	return w.s.Handle(ctx, r)
}

// failedChecksBetween counts op's failed checks in [from, to).
func (s *decisionStats) failedChecksBetween(op string, from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.failedChecks[op] {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

func (s *decisionStats) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.Message == "ingest decision":
		// A failed ingest is logged with the outcome it was heading for
		// (e.g. "applied" before a refused commit) and an error.
		if attrs["outcome"] == "" || attrs["error"] != "" {
			attrs["outcome"] = "error"
		}
		s.outcomes[attrs["outcome"]]++
		if attrs["outcome"] == "dropped" || attrs["outcome"] == "duplicate" {
			s.reasons[attrs["reason"]]++
		}
	case attrs["alert"] == "stuck":
		s.alerts[attrs["operation"]]++
	case attrs["alert"] == "intent-unbound":
		s.intentAlerts[attrs["intent"]]++
	case attrs["alert"] == "webhook-disabled":
		s.hookAlerts++
	case attrs["resolved_alert"] == "webhook-disabled":
		s.hookRecovered++
	case strings.HasPrefix(r.Message, "event field dropped"):
		s.dropped++
	case attrs["check"] != "" && attrs["operation"] != "" && s.now != nil:
		s.failedChecks[attrs["operation"]] = append(s.failedChecks[attrs["operation"]], s.now())
	}
	return nil
}

// intentAlerted reports whether the intent-unbound alert was raised for key.
func (s *decisionStats) intentAlerted(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.intentAlerts[key] > 0
}

func (s *decisionStats) httpLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latencies = append(s.latencies, d)
	s.sent++
}

func (s *decisionStats) status(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses[fmt.Sprint(code)]++
}

func (s *decisionStats) retry() { s.mu.Lock(); s.retries++; s.mu.Unlock() }

func (s *decisionStats) pass(sum reconcile.Summary, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.passes++
	if err != nil {
		s.failed++
	}
	s.sum.Checked += sum.Checked
	s.sum.Settled += sum.Settled
	s.sum.ClaimsRetried += sum.ClaimsRetried
	s.sum.Stuck += sum.Stuck
	s.sum.Errors += sum.Errors
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// check evaluates the invariants after the drain and fills the report.
func (r *runner) check(ctx context.Context) {
	r.reportRun()
	msgs := r.sink.all()
	byKey := map[string][]results.Message{}
	for _, m := range msgs {
		byKey[m.IdempotencyKey] = append(byKey[m.IdempotencyKey], m)
	}
	settle := r.checkOperations(ctx, byKey)
	r.rep.Final.Messages, r.rep.Final.DistinctKeys, r.rep.Final.ObservedReads = len(msgs), len(byKey), int(r.reads.Load())
	r.checkKnownKeys(byKey)
	if r.submitter != nil {
		r.checkCreates()
	}
	r.reportStats()
	r.reportFaults()
	r.reportLatency(settle)
	r.reportCost()
}

// reportRun records what the run was asked to do.
func (r *runner) reportRun() {
	rep := &r.rep
	rep.Seed, rep.Ops, rep.Backend = r.o.Seed, r.o.Ops, r.b.Name
	rep.Final.ExactlyOnce = r.sink.tails()
	rep.Options = optJSON{r.o.Dup, r.o.Reorder, r.o.Drop, r.o.Crash, r.o.LedgerErrors, r.o.PublishErrors, r.o.SlowEffects,
		r.o.NeverNotified, r.o.NeverFinish, r.o.Horizon.String(), r.o.ReconcileEvery.String(), r.o.Lease.String(), r.o.StuckAfter.String(),
		r.o.UnstorableMetadata, r.o.Poison, r.o.Incomplete, r.o.PartialBatches, r.o.ErrorObjects, r.o.WebhookOutage.String(),
		r.o.Submit, r.o.CrashBeforeBind, r.o.DuplicateSubmit, r.o.IntentGrace.String()}
	rep.Submissions.BoundBy = map[string]int{}
}

// checkOperations checks every planned operation against the ledger and
// the messages published for it (byKey), and returns how long each settled
// one took after Gemini finished it.
func (r *runner) checkOperations(ctx context.Context, byKey map[string][]results.Message) []time.Duration {
	slow := r.sink.slowOps()
	now := r.clock.Now()
	var settle []time.Duration
	for _, p := range r.plans {
		if p.sub != nil && !r.checkSubmission(ctx, p) {
			continue
		}
		if took, ok := r.checkOperation(ctx, p, byKey[opname.KeyPrefix+p.name], slow[p.name], now); ok {
			settle = append(settle, took)
		}
	}
	return settle
}

// checkOperation checks one operation at the end of the run; ok reports
// whether it settled in Gemini's state (took is then its settle time).
func (r *runner) checkOperation(ctx context.Context, p plan, got []results.Message, slow bool, now time.Time) (took time.Duration, ok bool) {
	id, _ := opname.DocID(opname.KeyPrefix + p.name)
	r.observe(ctx, p) // invariant 1, one last time
	op, err := r.b.Ledger.GetOperation(ctx, id)
	if err != nil {
		r.violate("operation %s is not in the ledger: %v", p.name, err)
		return 0, false
	}
	r.checkMetadata(p, op)
	r.checkStuckAlerts(p, op, now)
	switch {
	case p.poison:
		r.checkPoison(p, op, len(got), now)
		return 0, false
	case p.terminal == "":
		r.checkNeverFinished(p, op, len(got), now)
		return 0, false
	}
	return r.checkSettled(ctx, p, id, op, got, slow)
}

// checkNeverFinished: invariant 4, an operation Gemini never finished is
// never closed by lrosink, and is alerted when stuck.
func (r *runner) checkNeverFinished(p plan, op ledger.Operation, messages int, now time.Time) {
	r.rep.Final.NeverFinished++
	if op.State.Terminal() {
		r.violate("%s never finished in Gemini but the ledger says %s", p.name, op.State)
	}
	if messages > 0 {
		r.violate("%s never finished but %d results messages were published", p.name, messages)
	}
	if now.Sub(op.SubmittedAt) > r.o.StuckAfter {
		r.rep.Final.StuckUnresolved++
		if r.stats.alerts[p.name] == 0 {
			r.violate("%s is stuck (pending since %s) but was never alerted", p.name, op.SubmittedAt.Format(time.RFC3339))
		}
	}
}

// checkSettled checks an operation Gemini finished: invariant 2, no lost
// completion and the first terminal is Gemini's; then its claim and its
// messages.
func (r *runner) checkSettled(ctx context.Context, p plan, id string, op ledger.Operation, got []results.Message, slow bool) (time.Duration, bool) {
	r.rep.Final.Terminal++
	if op.State != p.terminal {
		r.violate("%s ended %s in Gemini but %s in the ledger", p.name, p.terminal, op.State)
		return 0, false
	}
	switch op.SettledBy {
	case "webhook":
		r.rep.Final.SettledWebhook++
	case "reconcile":
		r.rep.Final.SettledRecon++
	}
	end := p.steps[len(p.steps)-1]
	r.checkOutage(p, op, end.at)
	// Invariant 4: the claim ends DONE.
	c, err := r.b.Ledger.GetClaim(ctx, id)
	if err != nil || c.Status != ledger.ClaimDone {
		r.violate("%s: claim not DONE at the end (%s, %v)", p.name, c.Status, err)
	}
	r.checkMessages(p, id, op, got, slow, end)
	return op.SettledAt.Sub(end.at), true
}

// checkMessages: invariant 3, exactly one message, extras only where a
// process died after publishing (same key, same data); the first says
// what Gemini said.
func (r *runner) checkMessages(p plan, id string, op ledger.Operation, got []results.Message, slow bool, end step) {
	allowed := 1 + r.faults.explained(p.name) + r.ledgerExplained(id)
	if slow {
		allowed++
	}
	if r.sink.tails() {
		// Exactly once (CONTRACT.md §6): every recovered claim found its
		// message in the results file instead of publishing it again.
		allowed = 1
	}
	if len(got) == 0 {
		r.violate("%s settled %s but no results message was published", p.name, op.State)
		return
	}
	if len(got) > allowed {
		r.violate("%s: %d results messages, at most %d explained by injected crashes", p.name, len(got), allowed)
	}
	r.rep.Final.ExtraExplained += len(got) - 1
	attributeExtras(&r.rep, len(got)-1, r.faults.explained(p.name), r.doneAbandoned(id), slow)
	first, _ := got[0].Data()
	for _, m := range got {
		if m.State != string(p.terminal) {
			r.violate("%s: message says %s, Gemini %s", p.name, m.State, p.terminal)
		}
		if d, _ := m.Data(); string(d) != string(first) {
			r.violate("%s: two different messages for one key", p.name)
		}
		if err := ledger.CheckMetadata(m.UserMetadata); err != nil {
			r.violate("%s: a message carries metadata over the bound: %v", p.name, err)
		}
	}
	r.checkShapes(p, end, got[0])
}

// checkKnownKeys: every message is for an operation the run submitted.
func (r *runner) checkKnownKeys(byKey map[string][]results.Message) {
	for key := range byKey {
		name := strings.TrimPrefix(key, opname.KeyPrefix)
		if !slices.ContainsFunc(r.plans, func(p plan) bool { return p.name == name }) {
			r.violate("a message for an unknown operation %s", key)
		}
	}
}

// reportStats copies what the real code logged (ingest decisions,
// deliveries, reconcile passes, alerts) and checks that the webhook
// outage, and only it, was alerted once and recovered once.
func (r *runner) reportStats() {
	rep, s := &r.rep, r.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	rep.Outcomes, rep.DropReasons = s.outcomes, s.reasons
	rep.Deliveries.Sent, rep.Deliveries.Retried, rep.Deliveries.ByStatus = s.sent, s.retries, s.statuses
	rep.Reconcile.Passes, rep.Reconcile.Failed = s.passes, s.failed
	rep.Reconcile.Checked, rep.Reconcile.Settled, rep.Reconcile.ClaimsRetried = s.sum.Checked, s.sum.Settled, s.sum.ClaimsRetried
	rep.Reconcile.Errors = s.sum.Errors
	for _, n := range s.alerts {
		rep.Reconcile.StuckAlerts += n
	}
	rep.Outage.Alerts, rep.Outage.Recovered = s.hookAlerts, s.hookRecovered
	if r.o.WebhookOutage > 0 && (s.hookAlerts != 1 || s.hookRecovered != 1) {
		r.violate("the webhook was disabled for %s: want 1 webhook-disabled alert and 1 recovery line, got %d and %d",
			r.o.WebhookOutage, s.hookAlerts, s.hookRecovered)
	}
	if r.o.WebhookOutage == 0 && s.hookAlerts+s.hookRecovered > 0 {
		r.violate("no webhook outage, yet %d webhook-disabled alerts and %d recovery lines", s.hookAlerts, s.hookRecovered)
	}
}

// reportFaults copies what was injected.
func (r *runner) reportFaults() {
	f, n := &r.rep.Faults, &r.counts
	f.CrashBeforeCommit, f.CrashAfterCommit, f.CrashAfterPublish = n.CrashBeforeCommit.Load(), n.CrashAfterCommit.Load(), n.CrashAfterPublish.Load()
	f.LedgerErrors, f.PublishErrors, f.SlowEffects = n.LedgerErrors.Load(), n.PublishErrors.Load(), n.SlowEffects.Load()
	f.Fenced = n.Fenced.Load()
	f.UnstorableMetadata, f.RegisterRefused = n.UnstorableMetadata.Load(), n.RegisterRefused.Load()
	r.stats.mu.Lock()
	f.MetadataDropped = r.stats.dropped
	r.stats.mu.Unlock()
	f.Poison, f.PoisonUnschedulable = n.Poison.Load(), n.PoisonUnschedulable.Load()
	f.Incomplete, f.PartialBatches = n.Incomplete.Load(), n.PartialBatches.Load()
	f.ErrorObjects, f.LostToOutage = n.ErrorObjects.Load(), n.LostToOutage.Load()
	sb := &r.rep.Submissions
	sb.Submitted, sb.CrashBeforeBind, sb.BindErrors, sb.SubmitErrors = n.Submitted.Load(), n.CrashBeforeBind.Load(), n.BindErrors.Load(), n.SubmitErrors.Load()
	sb.Duplicates, sb.RetriesExisting, sb.RetriesRefused, sb.RetryErrors = n.DuplicateSubmits.Load(), n.RetriesExisting.Load(), n.RetriesRefused.Load(), n.RetryErrors.Load()
	r.stats.mu.Lock()
	for _, k := range r.stats.intentAlerts {
		sb.IntentAlerts += k
	}
	r.stats.mu.Unlock()
}

// reportLatency: settle times (simulated) and webhook HTTP times (wall).
func (r *runner) reportLatency(settle []time.Duration) {
	l := &r.rep.Latency
	sec := func(d time.Duration) string { return d.Round(time.Second).String() }
	l.SettleP50, l.SettleP90 = sec(pct(settle, 0.5)), sec(pct(settle, 0.9))
	l.SettleP99, l.SettleMax = sec(pct(settle, 0.99)), sec(pct(settle, 1))
	r.stats.mu.Lock()
	defer r.stats.mu.Unlock()
	l.HTTPP50ms = float64(pct(r.stats.latencies, 0.5).Microseconds()) / 1000
	l.HTTPP99ms = float64(pct(r.stats.latencies, 0.99).Microseconds()) / 1000
}

// reportCost: Gemini calls, and store reads and writes per completion.
func (r *runner) reportCost() {
	c := &r.rep.Cost
	c.GeminiCalls = r.fake.TotalCalls()
	if n := r.rep.Final.Terminal; n > 0 {
		c.ReadsPerCompletion = float64(c.StoreReads) / float64(n)
		c.WritesPerCompletion = float64(c.StoreWrites) / float64(n)
	}
	c.GeminiCallsPerOperation = float64(c.GeminiCalls) / float64(max(1, r.o.Ops))
}

// checkShapes: the first message of a settled operation says what Gemini
// said. gemini_status is always set (for INCOMPLETE, the raw status, which
// only polling sees); a FAILED message carries Gemini's error whichever
// shape it came in, a SUCCEEDED one none; a batch settled by reconcile
// carries Gemini's batch statistics (a webhook event has none: a
// documented limit, counted).
func (r *runner) checkShapes(p plan, end step, m results.Message) {
	if m.GeminiStatus == "" {
		r.violate("%s: settled %s without gemini_status", p.name, m.State)
	}
	switch p.terminal {
	case lifecycle.Incomplete:
		r.rep.Final.Incomplete++
		if string(m.GeminiStatus) != end.raw || m.SettledBy != "reconcile" {
			r.violate("%s: ended %q in Gemini (no webhook event) but settled by %s with gemini_status %q", p.name, end.raw, m.SettledBy, m.GeminiStatus)
		}
	case lifecycle.Failed:
		if want := wantError[p.kind]; m.Error == nil || *m.Error != want {
			r.violate("%s: FAILED (by %s) with error %+v, Gemini said %+v", p.name, m.SettledBy, m.Error, want)
		} else {
			r.rep.Final.ErrorsChecked++
		}
	case lifecycle.Succeeded:
		if m.Error != nil {
			r.violate("%s: SUCCEEDED with an error %+v", p.name, *m.Error)
		}
	}
	if p.kind != opname.KindBatch || p.stats == nil {
		return
	}
	got, _ := json.Marshal(m.Output["batch_stats"])
	if m.SettledBy != "reconcile" {
		r.rep.Final.BatchStatsByWebhook++
		return
	}
	want, _ := json.Marshal(statsJSON(*p.stats))
	if string(got) != string(want) {
		r.violate("%s: settled by reconcile with batch_stats %s, Gemini reported %s", p.name, got, want)
		return
	}
	r.rep.Final.BatchStatsChecked++
	if p.partial {
		r.rep.Final.PartialChecked++
	}
}

// statsJSON is metadata.batchStats as the message's output.batch_stats:
// integers, a missing count 0.
func statsJSON(s fakegemini.BatchStats) map[string]int64 {
	n := func(v string) int64 { i, _ := strconv.ParseInt(v, 10, 64); return i }
	return map[string]int64{"request_count": n(s.RequestCount), "successful_request_count": n(s.SuccessfulRequestCount),
		"failed_request_count": n(s.FailedRequestCount), "pending_request_count": n(s.PendingRequestCount)}
}

// checkOutage: an operation that finished in Gemini while the webhook was
// disabled, once the reconciler could have noticed (a webhook read and a
// pass later), is settled by polling at the minimum interval, where the
// usual backoff would take up to an hour: checked on the first pass after
// it finished and, each time a check fails (the door's store errors and
// kills are injected), again on the next pass. So it settles within one
// reconcile interval plus one per failed check (docs/RELIABILITY.md); a
// pass that skipped it would take one interval more than that. Operations
// that finish too close to the outage's end are not watched (four
// intervals: the webhook's return would settle them as well).
func (r *runner) checkOutage(p plan, op ledger.Operation, finished time.Time) {
	if r.o.WebhookOutage == 0 || p.sub != nil && p.sub.unbound {
		// (An operation whose submitter was killed before its bind is
		// unknown to lrosink until a delivery or adoption shows it: it
		// cannot be polled meanwhile.)
		return
	}
	from, to := r.o.outage(r.t0)
	if finished.Before(from.Add(reconcile.DefaultWebhookCheckEvery+r.o.ReconcileEvery)) || finished.After(to.Add(-4*r.o.ReconcileEvery)) {
		return
	}
	took := op.SettledAt.Sub(finished)
	failed := r.stats.failedChecksBetween(p.name, finished, op.SettledAt)
	bound := time.Duration(1+failed) * r.o.ReconcileEvery
	r.rep.Outage.Watched++
	if d, _ := time.ParseDuration(r.rep.Outage.SlowestSettle); took > d || r.rep.Outage.SlowestSettle == "" {
		r.rep.Outage.SlowestSettle = took.Round(time.Second).String()
		r.rep.Outage.MaxSettle, r.rep.Outage.SlowestFailedChecks = bound.String(), failed
	}
	if took > bound {
		r.violate("%s finished at %s while the webhook was disabled but settled %s later, after %d failed checks (bound %s): not polled at the minimum interval",
			p.name, finished.Format(time.RFC3339), took, failed, bound)
	}
}

// checkStuckAlerts: an operation is alerted on the schedule while it is
// stuck, not every pass: at most twice the schedule's points between the
// moment it became stuck and the end of the run or its settling (a record
// that lost a race repeats a line once).
func (r *runner) checkStuckAlerts(p plan, op ledger.Operation, now time.Time) {
	until := now
	if op.State.Terminal() {
		until = op.SettledAt
	}
	since := op.SubmittedAt.Add(r.o.StuckAfter)
	n := r.stats.alerts[p.name]
	if since.After(until) {
		if n > 0 {
			r.violate("%s: %d stuck alert lines, but it was never stuck", p.name, n)
		}
		return
	}
	points := 1
	for _, d := range []time.Duration{time.Hour, 6 * time.Hour} {
		if !since.Add(d).After(until) {
			points++
		}
	}
	points += int(until.Sub(since) / (24 * time.Hour))
	r.rep.Reconcile.StuckAlertBound += 2 * points
	if n > 0 {
		r.rep.Reconcile.StuckAlerted++
	}
	if n > 2*points {
		r.violate("%s: %d stuck alert lines where the schedule allows %d", p.name, n, 2*points)
	}
}

// checkMetadata: the ledger keeps user metadata within its bound on every
// store, never mixes operations up, and keeps what a submitter registered
// exactly, whatever its shape (when the registration was the first
// sighting: until registrations merge into known operations, a webhook's
// first sighting keeps the webhook's metadata).
func (r *runner) checkMetadata(p plan, op ledger.Operation) {
	if err := ledger.CheckMetadata(op.UserMetadata); err != nil {
		r.violate("%s: the ledger kept metadata over the bound: %v", p.name, err)
	}
	if v, ok := op.UserMetadata["sim"]; ok && v != p.label {
		r.violate("%s: metadata of another operation (%v)", p.name, v)
	}
	h := op.History
	if !p.hardMeta || len(h) == 0 || len(h) >= ledger.MaxHistory || h[0].Source != "register" || h[0].Reason != "first-sighting" {
		return
	}
	b, _ := ledger.EncodeJSON(r.metadata(p, true, "register", ""))
	want, _ := ledger.DecodeMap(b)
	for k, v := range want {
		if !reflect.DeepEqual(op.UserMetadata[k], v) {
			r.violate("%s: registered metadata key %q not kept as registered", p.name, k)
		}
	}
}

// checkPoison: an operation the door can never ingest is not lost silently.
// It stays pending with nothing published, is alerted once stuck, and, if
// Gemini finished it and the reconciler could write its schedule, carries
// the reconciler's last verdict (ingest-error) with backoff applied.
func (r *runner) checkPoison(p plan, op ledger.Operation, messages int, now time.Time) {
	r.rep.Final.PoisonPending++
	if op.State.Terminal() || messages > 0 {
		r.violate("poison operation %s settled (%s, %d messages) though the store refuses its answers", p.name, op.State, messages)
	}
	if now.Sub(op.SubmittedAt) > r.o.StuckAfter && r.stats.alerts[p.name] == 0 {
		r.violate("poison operation %s is stuck (pending since %s) but was never alerted", p.name, op.SubmittedAt.Format(time.RFC3339))
	}
	if p.terminal != "" && !p.unschedulable && (op.LastCheck != "ingest-error" || op.Checks == 0 || !op.NextCheckAt.After(now)) {
		r.violate("poison operation %s finished in Gemini but was not rescheduled after the door failed (last check %q, %d checks, next %s)",
			p.name, op.LastCheck, op.Checks, op.NextCheckAt.Format(time.RFC3339))
	}
}

// ledgerExplained: a DONE commit that failed after a successful publish is
// the same crash window as a kill after publish. (Every failed try counts:
// an upper bound, as a retry may have succeeded.)
func (r *runner) ledgerExplained(id string) int {
	if l := r.flaky(); l != nil {
		return l.completeFailures(id)
	}
	return 0
}

// doneAbandoned counts the holders of claim id that published and gave up
// on a failing DONE commit.
func (r *runner) doneAbandoned(id string) int {
	if l := r.flaky(); l != nil {
		return l.abandonedDone(id)
	}
	return 0
}

func (r *runner) flaky() *flakyLedger {
	l, ok := r.ledger.(*flakyLedger)
	if !ok {
		if u, ok := r.ledger.(unfencedLedger); ok {
			l, _ = u.Ledger.(*flakyLedger)
		}
	}
	return l
}

// attributeExtras splits one key's extra messages among the causes seen
// for it, each capped by what is left to explain; the rest is Other.
func attributeExtras(rep *Report, extras, crashes, doneErrors int, slow bool) {
	take := func(n int) int {
		n = max(min(n, extras), 0)
		extras -= n
		return n
	}
	c := &rep.Final.ExtraByCause
	c.CrashAfterPublish += take(crashes)
	c.DoneCommitError += take(doneErrors)
	if slow {
		c.LeaseExpired += take(1)
	}
	c.Other += max(extras, 0)
}

// OK reports whether every invariant held.
func (rep *Report) OK() bool { return rep.ViolationCount == 0 }

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// WriteText writes the report for a person.
func (rep *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	verdict := "PASS: every invariant held"
	if !rep.OK() {
		verdict = fmt.Sprintf("FAIL: %d invariant violation(s)", rep.ViolationCount)
	}
	fmt.Fprintf(&b, "lrosink simulate — %d operations, seed %d, store %s, %.1fs\n\n", rep.Ops, rep.Seed, rep.Backend, rep.WallSeconds)
	o := rep.Options
	fmt.Fprintf(&b, "faults requested   dup %.2f  reorder %.2f  drop %.2f  crash %.3f/boundary  ledger-errors %.3f  publish-errors %.3f  slow-effects %.3f  unstorable-metadata %.3f  poison %.3f\n",
		o.Dup, o.Reorder, o.Drop, o.Crash, o.LedgerErrors, o.PublishErrors, o.SlowEffects, o.UnstorableMetadata, o.Poison)
	fmt.Fprintf(&b, "gemini requested   incomplete %.2f  partial-batches %.2f  error-objects %.2f  webhook-outage %s\n",
		o.Incomplete, o.PartialBatches, o.ErrorObjects, o.WebhookOutage)
	d := rep.Deliveries
	fmt.Fprintf(&b, "deliveries         %d events: %d dropped, %d duplicated, %d reordered; %d sent, %d retried after an error; by status %s\n",
		d.Events, d.Dropped, d.Duplicated, d.Reordered, d.Sent, d.Retried, kv(d.ByStatus))
	f := rep.Faults
	fmt.Fprintf(&b, "faults injected    crash inside tx %d, after commit %d, after publish %d; ledger errors %d; publish errors %d; leases expired mid-effect %d\n",
		f.CrashBeforeCommit, f.CrashAfterCommit, f.CrashAfterPublish, f.LedgerErrors, f.PublishErrors, f.SlowEffects)
	fmt.Fprintf(&b, "metadata           %d operations with metadata a Firestore map cannot hold; %d registrations refused for an oversize value; %d oversize webhook metadata dropped\n",
		f.UnstorableMetadata, f.RegisterRefused, f.MetadataDropped)
	fmt.Fprintf(&b, "races              %d writes rejected by fencing (a concurrent writer got there first)\n", f.Fenced)
	fmt.Fprintf(&b, "poison             %d operations the door can never ingest (%d refuse the reconciler's schedule write too); %d left pending, none settled\n",
		f.Poison, f.PoisonUnschedulable, rep.Final.PoisonPending)
	fi := rep.Final
	fmt.Fprintf(&b, "gemini shapes      %d interactions ended incomplete/budget_exceeded (%d settled INCOMPLETE); %d partial batches; batch_stats checked on %d reconcile-settled batches (%d partial), %d webhook-settled batches carry none (documented limit); %d failures as error objects, %d FAILED errors checked\n",
		f.Incomplete, fi.Incomplete, f.PartialBatches, fi.BatchStatsChecked, fi.PartialChecked, fi.BatchStatsByWebhook, f.ErrorObjects, fi.ErrorsChecked)
	if ou := rep.Outage; o.WebhookOutage != "0s" {
		fmt.Fprintf(&b, "webhook outage     disabled %s to %s (simulated); %d deliveries lost; %d webhook-disabled alerts, %d recovery lines; %d operations finished meanwhile, slowest settled in %s (bound %s: one reconcile interval, plus one per failed check, %d)\n",
			ou.From.Format("15:04"), ou.To.Format("15:04"), f.LostToOutage, ou.Alerts, ou.Recovered, ou.Watched, ou.SlowestSettle, ou.MaxSettle, ou.SlowestFailedChecks)
	}
	if sb := rep.Submissions; o.Submit > 0 {
		fmt.Fprintf(&b, "submissions        %d through package submit (share %.2f; crash-before-bind %.2f, duplicate-submit %.2f, intent grace %s): %d killed between create and bind, %d binds failed; %d duplicate submits: %d found the operation, %d refused (unbound, no list), %d failed; %d Gemini creates\n",
			sb.Submitted, o.Submit, o.CrashBeforeBind, o.DuplicateSubmit, o.IntentGrace, sb.CrashBeforeBind, sb.BindErrors, sb.Duplicates, sb.RetriesExisting, sb.RetriesRefused, sb.RetryErrors, sb.Creates)
		fmt.Fprintf(&b, "intents            %d bound (%s), metadata exact on %d; %d unbound and alerted (no path could see their operation); %d intent-unbound alert lines\n",
			sb.Bound, kv(sb.BoundBy), sb.MetadataExact, sb.UnboundAlerted, sb.IntentAlerts)
	}
	fmt.Fprintf(&b, "outcomes           %s\n", kv(rep.Outcomes))
	fmt.Fprintf(&b, "drop reasons       %s\n", kv(rep.DropReasons))
	rc := rep.Reconcile
	fmt.Fprintf(&b, "reconcile          %d passes (%d failed), %d checks, %d settled, %d claims retried, %d errors\n",
		rc.Passes, rc.Failed, rc.Checked, rc.Settled, rc.ClaimsRetried, rc.Errors)
	fmt.Fprintf(&b, "stuck alerts       %d lines for %d operations alerted (%d still stuck at the end, %d poison); the schedule allows at most %d\n",
		rc.StuckAlerts, rc.StuckAlerted, rep.Final.StuckUnresolved, rep.Final.PoisonPending, rc.StuckAlertBound)
	fmt.Fprintf(&b, "final              %d terminal (%d by webhook, %d by reconcile), %d never finished (%d stuck), %d messages for %d keys (%d explained extras: the documented crash window, same key), %d checked reads\n",
		fi.Terminal, fi.SettledWebhook, fi.SettledRecon, fi.NeverFinished, fi.StuckUnresolved, fi.Messages, fi.DistinctKeys, fi.ExtraExplained, fi.ObservedReads)
	ec := fi.ExtraByCause
	once := ""
	if fi.ExactlyOnce {
		once = " (results file: exactly once, no extra allowed)"
	}
	fmt.Fprintf(&b, "extras by cause    %d kill after publish, %d DONE-commit error, %d lease expired mid-effect, %d other%s\n",
		ec.CrashAfterPublish, ec.DoneCommitError, ec.LeaseExpired, ec.Other, once)
	l := rep.Latency
	fmt.Fprintf(&b, "latency            settle after Gemini finished (simulated): p50 %s  p90 %s  p99 %s  max %s; webhook HTTP (wall): p50 %.1f ms  p99 %.1f ms\n",
		l.SettleP50, l.SettleP90, l.SettleP99, l.SettleMax, l.HTTPP50ms, l.HTTPP99ms)
	c := rep.Cost
	store := "store reads and writes n/a (only the Firestore ledger counts them)"
	if c.StoreCounted {
		store = fmt.Sprintf("store %d reads, %d writes (%.1f reads, %.1f writes per completion)",
			c.StoreReads, c.StoreWrites, c.ReadsPerCompletion, c.WritesPerCompletion)
	}
	fmt.Fprintf(&b, "cost               %s; Gemini %d calls (%.2f per operation)\n\n", store, c.GeminiCalls, c.GeminiCallsPerOperation)
	fmt.Fprintln(&b, verdict)
	for _, v := range rep.Violations {
		fmt.Fprintln(&b, "  -", v)
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

func kv(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
