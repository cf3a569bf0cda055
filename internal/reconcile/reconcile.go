// Package reconcile recovers completions that webhooks never delivered: one
// bounded pass asks the Gemini API for the state of pending operations whose
// next check is due and feeds the answers to the same ingest door the webhook
// uses. The pass costs O(due operations), never O(ledger): every query is
// indexed and paged.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fetcherr"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/retry"
	"github.com/lrosink/lrosink/internal/shard"
)

// Fetcher asks Gemini for an operation's current state. Its errors have a
// fetcherr kind: NotFound is recorded on the operation, Transient and
// Permanent count as errors of the pass; none is ever a state.
type Fetcher interface {
	Fetch(ctx context.Context, kind opname.Kind, apiName string) (event.Event, error)
	ListBatches(ctx context.Context, pageSize int, pageToken string) ([]event.ListedBatch, string, error)
}

// Door is the ingest door as the reconciler uses it.
type Door interface {
	Ingest(ctx context.Context, ev event.Event) (ingest.Result, error)
	// IngestRead is Ingest deciding first on the operation as just read.
	IngestRead(ctx context.Context, ev event.Event, read *ledger.Operation) (ingest.Result, error)
	RetryClaim(ctx context.Context, id string) (ingest.Result, error)
}

// Ledger is what a pass reads and schedules: indexed queries, and the two
// updates of an operation the claim protocol makes (claims.Ledger).
type Ledger interface {
	ledger.Queries
	// GetOperation reads one operation (CheckNow).
	GetOperation(ctx context.Context, id string) (ledger.Operation, error)
	// Apply records an intent's alert (ledger.PutIntent, fenced on the
	// revision read).
	Apply(ctx context.Context, writes ...ledger.Write) ([]ledger.Revision, error)
	// ScheduleCheck and RecordStuckAlert: see claims.Ledger.
	ScheduleCheck(ctx context.Context, op ledger.Operation, next time.Time, note string, now time.Time) (ledger.Revision, error)
	RecordStuckAlert(ctx context.Context, op ledger.Operation, at, from time.Time) (ledger.Revision, error)
}

// DefaultIntentGrace is LROSINK_INTENT_GRACE's default: an intent bound to
// no operation an hour after it was recorded is alerted (intent-unbound).
const DefaultIntentGrace = time.Hour

// DefaultStuckAfter is LROSINK_STUCK_AFTER's default: a pending operation
// older than this is stuck. Gemini keeps batch jobs up to 24 h, but most
// finish within hours, so 6 h flags trouble while the job can still be acted on.
const DefaultStuckAfter = 6 * time.Hour

// Config holds a reconciler's dependencies and tuning.
type Config struct {
	Ledger Ledger
	Door   Door
	// Gemini may be nil (no API key): the pass then only retries claims and
	// raises stuck alerts, and says so in its log.
	Gemini Fetcher
	Log    *slog.Logger
	Now    func() time.Time
	// StuckAfter: a pending operation older than this is stuck (alerted on
	// the schedule of nextStuckAlert).
	StuckAfter time.Duration
	// IntentGrace (LROSINK_INTENT_GRACE): an intent bound to no operation
	// this long after it was recorded is alerted, on the stuck alert's
	// schedule (DefaultIntentGrace when not positive).
	IntentGrace time.Duration
	// BackoffMin and BackoffMax bound the interval between two checks of one
	// operation: it doubles from min to max (2 min → 1 h by default), so an
	// operation that is never notified costs a handful of calls, not one
	// per pass.
	BackoffMin, BackoffMax time.Duration
	// PageSize bounds each query; MaxOperations bounds one pass.
	PageSize, MaxOperations int
	// Concurrency bounds parallel Gemini calls.
	Concurrency int
	// AdoptPageSize is how many recent batch jobs a pass lists to adopt
	// jobs whose submitter died before registering them; 0 disables.
	AdoptPageSize int
	// AdoptMaxPages bounds the pages one pass lists (DefaultAdoptMaxPages):
	// past the first, a pass reads on only until it meets the newest job
	// the previous pass saw.
	AdoptMaxPages int
	// Webhooks reads the project webhooks for the health check; by default
	// Gemini, when it can (the Gemini adapter can). Nil: not checked (said
	// once). While one is disabled, pending operations are polled every
	// BackoffMin.
	Webhooks WebhookLister
	// Finder searches the batch listing back to an unbound batch intent's
	// record time before the intent is alerted; by default Gemini, when it
	// can (the Gemini adapter can). Nil: an unbound intent is alerted on
	// adoption's bounded scan alone.
	Finder BatchFinder
	// WebhookCheckEvery paces the webhook read (DefaultWebhookCheckEvery).
	WebhookCheckEvery time.Duration
	// Retention, when positive, is how long a settled operation is kept
	// (LROSINK_RETENTION); Pruner deletes the older ones each pass, at
	// most MaxOperations. Nil Pruner: the store expires them itself
	// (Firestore's TTL policy on expire_at) or nothing is pruned. Set it
	// with every store that deletes: adoption leaves alone the jobs that
	// settled longer ago than it (pastRetention).
	Retention time.Duration
	Pruner    Pruner
	// Observers are told of every pass when it ends (metrics, the
	// console's ring of recent passes).
	Observers []Observer
	// Counter, when set, gives the summary's StillPending: the ledger's
	// count of non-terminal operations, not what this pass checked (which
	// is 0 without GEMINI_API_KEY).
	Counter Counter
	// Deliveries, when set, records every check's observation in the
	// operation's delivery log.
	Deliveries DeliveryLog
}

// BatchFinder lists batch jobs newest first back to since and returns the
// first one match accepts (gemini.Fetcher.FindListedBatch).
type BatchFinder interface {
	FindListedBatch(ctx context.Context, since time.Time, match func(event.ListedBatch) bool) (event.ListedBatch, bool, error)
}

// Counter counts the ledger's non-terminal operations (ledger.Queries).
type Counter interface {
	CountPending(ctx context.Context) (int64, error)
}

// DeliveryLog records an observation of an operation; it never blocks
// (deliverylog.Log).
type DeliveryLog interface {
	Delivery(opID string, e deliverylog.Entry)
}

// Pruner deletes settled operations whose results message is published
// and that settled at or before settledBefore, and published claims past
// their expiry at now; at most limit of each. It returns the operations
// deleted.
type Pruner interface {
	PruneSettled(ctx context.Context, settledBefore, now time.Time, limit int) (int, error)
}

// Observer is told the outcome of every pass, failed ones too (with what
// the pass did before it failed), and when the pass started.
type Observer interface {
	ObservePass(started time.Time, s Summary, err error)
}

// Summary is the pass's answer (CONTRACT.md §4).
type Summary struct {
	Checked      int `json:"checked"`
	Settled      int `json:"settled"`
	StillPending int `json:"still_pending"`
	// ClaimsRetried counts the owed messages the pass published (claims
	// released or whose lease ran out); ClaimsDueAfter the claims due at
	// the pass's start that it did not reach before its work time ran out
	// (0 when it tried every one). Any left makes the pass Partial.
	ClaimsRetried  int `json:"claims_retried"`
	ClaimsDueAfter int `json:"claims_due_after"`
	// Stuck counts the operations pending longer than StuckAfter (all of
	// them: a count aggregation); StuckAlerts the stuck alert lines this
	// pass raised.
	Stuck       int `json:"stuck"`
	StuckAlerts int `json:"stuck_alerts"`
	Errors      int `json:"errors"`
	Adopted     int `json:"adopted"`
	// WebhooksDisabled counts the project webhooks Gemini reported
	// disabled at its last read (see Config.Webhooks).
	WebhooksDisabled int `json:"webhooks_disabled"`
	// Partial says the pass stopped early at its deadline: what is left is
	// first in line next pass (CONTRACT.md §4).
	Partial bool `json:"partial"`
	// DueBacklog counts the operations still due when the pass ended (it
	// could not check them: MaxOperations, the deadline, the Gemini
	// budget); OldestOverdueSeconds is how long the earliest of them has
	// been due. Both 0 when the pass caught up, or polls nothing (no key:
	// not Measured).
	// A reconciler falling behind shows here, not as errors.
	DueBacklog           int   `json:"due_backlog"`
	OldestOverdueSeconds int64 `json:"oldest_overdue_seconds"`
	// Pruned counts the settled operations deleted past LROSINK_RETENTION
	// (SQLite, memory; Firestore's TTL policy deletes its own).
	Pruned int `json:"pruned"`
	// IntentsUnbound counts the intents bound to no operation past their
	// grace now (all of them: a count aggregation; the shared duty's);
	// IntentsBound the intents this pass bound (adoption matching a listed
	// batch, a check whose answer named one).
	IntentsUnbound int `json:"intents_unbound"`
	IntentsBound   int `json:"intents_bound"`
	// Counted is the ledger-wide figures this pass established (see
	// Measured); not answered.
	Counted Figure `json:"-"`

	// rangeOnly marks a PassRange's summary (see RangeOnly).
	rangeOnly bool
	// concurrency is the smallest bound the adaptive window came down to
	// (window; 0 when the pass checked nothing): logged, not answered.
	concurrency int
}

// RangeOnly reports whether the summary is a PassRange's: its counts cover
// its buckets only (its StillPending and Stuck are not the ledger's), so an
// observer keeping ledger-wide figures (gauges) must not take them from it.
func (s Summary) RangeOnly() bool { return s.rangeOnly }

// Figure names a ledger-wide figure of a Summary.
type Figure uint8

// The figures a pass may establish: StillPending, Stuck, DueBacklog with
// OldestOverdueSeconds, and ClaimsDueAfter.
const (
	FigureStillPending Figure = 1 << iota
	FigureStuck
	FigureBacklog
	FigureClaimsLeft
)

// Measured reports whether the pass established figure f. A pass cut short
// (its deadline, the stop), one that polls nothing (no key) or whose count
// failed leaves the figure 0 without having counted it: an observer keeping
// gauges must not take that 0 for a count.
func (s Summary) Measured(f Figure) bool { return s.Counted&f != 0 }

// Reconciler runs passes.
type Reconciler struct {
	cfg      Config
	schedule retry.Backoff // of the next check: BackoffMin doubling to BackoffMax
	hooks    webhookHealth
	// rangeHooks is what range passes (PassRange) read of the webhooks'
	// health, quietly: hooks is the shared pass's, which alerts.
	rangeHooks webhookHealth
	// noPolling says once per instance that nothing is polled (no key),
	// as the webhook health check does: a warning every pass is noise.
	noPolling sync.Once
	// adoptMark is the newest batch job the last adoption scan saw: the
	// next scan reads pages until it meets it again. Per process: a new
	// instance scans AdoptMaxPages pages once.
	adoptMu   sync.Mutex
	adoptMark string
}

// DefaultAdoptMaxPages bounds one adoption scan: 4 pages of AdoptPageSize
// (200 jobs at 50) created since the last pass before one can be missed.
const DefaultAdoptMaxPages = 4

// New checks cfg and fills defaults.
func New(cfg Config) (*Reconciler, error) {
	switch {
	case cfg.Ledger == nil, cfg.Door == nil, cfg.Log == nil, cfg.Now == nil:
		return nil, errors.New("reconcile: Ledger, Door, Log and Now are required")
	case cfg.StuckAfter <= 0:
		return nil, errors.New("reconcile: StuckAfter must be positive")
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 2 * time.Minute
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = max(cfg.BackoffMin, time.Hour)
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 100
	}
	if cfg.AdoptMaxPages <= 0 {
		cfg.AdoptMaxPages = DefaultAdoptMaxPages
	}
	if cfg.MaxOperations <= 0 {
		cfg.MaxOperations = 1000
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Webhooks == nil {
		if wl, ok := cfg.Gemini.(WebhookLister); ok {
			cfg.Webhooks = wl
		}
	}
	if cfg.Finder == nil {
		if f, ok := cfg.Gemini.(BatchFinder); ok {
			cfg.Finder = f
		}
	}
	if cfg.WebhookCheckEvery <= 0 {
		cfg.WebhookCheckEvery = DefaultWebhookCheckEvery
	}
	if cfg.IntentGrace <= 0 {
		cfg.IntentGrace = DefaultIntentGrace
	}
	return &Reconciler{cfg: cfg, schedule: retry.Backoff{Initial: cfg.BackoffMin, Multiplier: 2, Max: cfg.BackoffMax}}, nil
}

// Backoff is the wait before the next check of an operation already checked
// `checks` times: BackoffMin doubled per check, capped at BackoffMax. Not
// jittered: the schedule is exact, so a seeded simulation repeats.
func (r *Reconciler) Backoff(checks int) time.Duration {
	return r.schedule.Delay(min(checks, math.MaxInt-1) + 1)
}

// tally is a Summary shared by the pass's workers.
type tally struct {
	mu sync.Mutex
	s  Summary
}

func (t *tally) add(f func(*Summary)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(&t.s)
}

// Pass runs one bounded pass over the whole ledger: the shared duties of
// PassShared and the due checks and stuck alerts of PassRange(shard.All())
// in one pass, as an unsharded deployment (and serve) runs it. It returns
// an error only when the ledger cannot be queried at all; per-operation
// failures are counted in Errors.
//
// With a deadline on ctx the pass stops early, with what it did so far
// (Summary.Partial): claim retries, Gemini checks and adoption end
// stuckReserve before the deadline, so stuck alerting, the last step,
// always gets its time, even when Gemini is slow.
func (r *Reconciler) Pass(ctx context.Context) (Summary, error) {
	return r.pass(ctx, shard.All(), duties{shared: true, ranged: true})
}

// PassRange runs one bounded pass over the operations whose bucket
// (shard.Of of their id) is in rg: their due checks and their stuck
// alerts, nothing else. Several PassRange over disjoint ranges, plus one
// PassShared, do what one Pass does, in parallel; they may overlap one
// another safely, since every write is fenced. Its Summary counts only the
// range (DueBacklog and OldestOverdueSeconds too); Stuck, StillPending's
// ledger count, ClaimsRetried, Adopted and Pruned are PassShared's, and are
// 0 here (StillPending counts the range's checks that left an operation
// pending). It is time-boxed as Pass is.
func (r *Reconciler) PassRange(ctx context.Context, rg shard.Range) (Summary, error) {
	if err := rg.Validate(); err != nil {
		return Summary{}, fmt.Errorf("reconcile: %w", err)
	}
	return r.pass(ctx, rg, duties{ranged: true})
}

// PassShared runs the duties of a pass that concern the whole ledger and
// not one bucket: retry due claims, read the project webhooks' health (and
// alert), adopt unregistered batch jobs, prune past the retention, count
// the stuck and pending operations, and measure the whole ledger's due
// backlog. A sharded deployment's coordinator runs it once per round, beside
// the PassRange of each shard; it checks no due operation and raises no
// stuck alert.
func (r *Reconciler) PassShared(ctx context.Context) (Summary, error) {
	return r.pass(ctx, shard.All(), duties{shared: true})
}

// duties says which parts of a pass run: shared (the whole ledger's:
// claims, webhooks, adoption, pruning, counts) and ranged (the due checks
// and stuck alerts of the pass's bucket range).
type duties struct{ shared, ranged bool }

func (r *Reconciler) pass(ctx context.Context, rg shard.Range, d duties) (s Summary, err error) {
	var t tally
	now := r.cfg.Now()
	defer func() {
		s.rangeOnly = !d.shared
		for _, o := range r.cfg.Observers {
			o.ObservePass(now, s, err)
		}
	}()
	work, cancel := workContext(ctx)
	defer cancel()
	if d.shared {
		if err := r.retryClaims(work, ctx, now, &t); err != nil {
			return t.s, err
		}
	}
	// A range pass reads the webhooks' health quietly into its own
	// record: it needs to know whether to poll faster, but the alert lines
	// are the shared pass's, which must still see the change itself.
	hooks, quiet := &r.hooks, false
	if !d.shared {
		hooks, quiet = &r.rangeHooks, true
	}
	degraded := r.checkWebhooks(work, now, &t, hooks, quiet)
	if r.cfg.Gemini == nil {
		r.noPolling.Do(func() {
			r.cfg.Log.WarnContext(ctx, "reconcile: GEMINI_API_KEY is not set; pending operations are not polled")
		})
	} else {
		if d.ranged {
			if err := r.checkDue(work, ctx, rg, now, degraded, &t); err != nil {
				return t.s, err
			}
		}
		if d.shared {
			r.adopt(work, &t)
		}
		r.measureBacklog(ctx, rg, now, &t)
	}
	if d.shared {
		r.prune(work, now, &t)
	}
	if cut(work) {
		t.add(func(s *Summary) { s.Partial = true })
	}
	if err := r.stuck(ctx, rg, d, now, &t); err != nil {
		if !deadlineCame(ctx) {
			return t.s, err
		}
		// The deadline (or the stop) came even into the reserve (a store
		// slower than a fifth of the budget): the pass is partial, not
		// failed; the next one alerts what is due.
		t.add(func(s *Summary) { s.Partial = true })
		r.cfg.Log.WarnContext(ctx, "reconcile: stuck alerting cut short by the pass's deadline", "error", err.Error())
	}
	if d.shared {
		if err := r.unboundIntents(ctx, now, &t); err != nil {
			if !deadlineCame(ctx) {
				return t.s, err
			}
			t.add(func(s *Summary) { s.Partial = true })
			r.cfg.Log.WarnContext(ctx, "reconcile: intent alerting cut short by the pass's deadline", "error", err.Error())
		}
	}
	if d.shared && r.cfg.Counter != nil {
		n, err := r.cfg.Counter.CountPending(ctx)
		switch {
		case err == nil:
			t.s.StillPending = int(n)
			t.s.Counted |= FigureStillPending
		case !deadlineCame(ctx):
			return t.s, fmt.Errorf("reconcile: count pending operations: %w", err)
		default:
			t.s.Partial = true // cut by the deadline, as stuck alerting can be
		}
	}
	log := r.cfg.Log.InfoContext
	if t.s.Partial {
		log = r.cfg.Log.WarnContext
	}
	log(ctx, "reconcile pass", "range", rg.String(), "shared", d.shared, "ranged", d.ranged,
		"concurrency", t.s.concurrency, "checked", t.s.Checked, "settled", t.s.Settled,
		"still_pending", t.s.StillPending, "claims_retried", t.s.ClaimsRetried, "claims_due_after", t.s.ClaimsDueAfter, "stuck", t.s.Stuck,
		"stuck_alerts", t.s.StuckAlerts, "errors", t.s.Errors, "adopted", t.s.Adopted,
		"webhooks_disabled", t.s.WebhooksDisabled, "partial", t.s.Partial,
		"due_backlog", t.s.DueBacklog, "oldest_overdue_seconds", t.s.OldestOverdueSeconds, "pruned", t.s.Pruned,
		"intents_unbound", t.s.IntentsUnbound, "intents_bound", t.s.IntentsBound)
	return t.s, nil
}

// stuckReserveShare is the share of a pass's time kept for stuck
// alerting: a count, one query and a write per due alert.
const stuckReserveShare = 5

// workContext is ctx ending a fifth of its remaining time early (ctx
// itself when it has no deadline): the pass's work before stuck alerting.
func workContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, d.Add(-time.Until(d)/stuckReserveShare))
}

// ErrStopping is the cause a pass's context is cancelled with when the
// process stops (SIGTERM): the pass ends early as at its deadline,
// partial, not failed.
var ErrStopping = errors.New("reconcile: the process is stopping")

// deadlineCame reports whether the pass's own deadline has passed, or the
// process is stopping (cause ErrStopping): a store call it cut short makes
// the pass partial. A cancelled pass (its caller gone before it had a
// budget) or a store error is a failure.
func deadlineCame(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(context.Cause(ctx), ErrStopping)
}

// cut reports whether the pass's work time is over (or its caller gone):
// an error then is the deadline's, not the ledger's or Gemini's.
func cut(work context.Context) bool { return work.Err() != nil }

// retryClaims retries every claim due at now (owed messages: released, or
// their lease ran out), page after page in (due, id) order, each page
// starting after the last claim tried, until none is left or work ends.
// One page used to be all a pass tried (100), saying nothing of the rest.
// A claim tried and still due after (its retry failed) is not tried again
// this pass: the cursor is past it. What work's end left is counted under
// ctx, the whole pass's context, and makes the pass partial.
func (r *Reconciler) retryClaims(work, ctx context.Context, now time.Time, t *tally) error {
	var after ledger.ClaimCursor
	for !cut(work) {
		claims, err := r.cfg.Ledger.DueClaims(work, now, after, r.cfg.PageSize)
		if err != nil {
			if cut(work) {
				break
			}
			return fmt.Errorf("reconcile: due claims: %w", err)
		}
		for _, c := range claims {
			if cut(work) {
				break
			}
			after = ledger.ClaimAfter(c)
			res, err := r.cfg.Door.RetryClaim(work, c.ID)
			if err != nil && cut(work) && errors.Is(err, work.Err()) {
				// The caller's wait was cut: the door's work goes on
				// with the claim held, so it is neither an error nor left.
				break
			}
			t.add(func(s *Summary) {
				if err != nil {
					s.Errors++
				} else if res.Published {
					s.ClaimsRetried++
				}
			})
		}
		if len(claims) < r.cfg.PageSize && !cut(work) {
			t.add(func(s *Summary) { s.Counted |= FigureClaimsLeft })
			return nil // every due claim tried
		}
	}
	n, err := r.cfg.Ledger.CountDueClaims(ctx, now, after)
	if err != nil {
		t.add(func(s *Summary) { s.Errors++ })
		r.cfg.Log.WarnContext(ctx, "reconcile: could not count the due claims left", "error", err.Error())
		return nil
	}
	t.add(func(s *Summary) {
		s.ClaimsDueAfter, s.Counted = int(n), s.Counted|FigureClaimsLeft
		s.Partial = s.Partial || n > 0
	})
	return nil
}

// checkDue pages through due operations in (next_check_at, id) order, each
// page starting after the last operation of the one before. A checked
// operation is normally rescheduled into the future, but one the ledger
// would not reschedule stays due; the cursor keeps the pass from trying it
// again and moves on to the operations behind it.
//
// Checks start and fetch under work; what a check learned is recorded
// under write (the whole pass's context), so a check that got its answer
// just before work ended is not lost.
//
// degraded (a project webhook is disabled) polls at BackoffMin: the query
// then reaches BackoffMax-BackoffMin ahead, which covers every operation
// last checked BackoffMin ago or earlier (none is scheduled further than
// BackoffMax after its last check), and skips those checked more recently.
func (r *Reconciler) checkDue(work, write context.Context, rg shard.Range, now time.Time, degraded bool, t *tally) error {
	win := newWindow(r.cfg.Concurrency)
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		t.add(func(s *Summary) { s.concurrency = win.smallest() })
	}()
	horizon := now
	if degraded {
		horizon = now.Add(r.cfg.BackoffMax - r.cfg.BackoffMin)
	}
	var after ledger.DueCursor
	// scanned bounds the rows a degraded pass reads past without checking.
	for n, scanned := 0, 0; n < r.cfg.MaxOperations && scanned < 4*r.cfg.MaxOperations && !cut(work); {
		limit := min(r.cfg.PageSize, r.cfg.MaxOperations-n)
		ops, err := r.cfg.Ledger.DueOperations(work, rg, horizon, after, limit)
		if err != nil {
			if cut(work) {
				return nil
			}
			return fmt.Errorf("reconcile: due operations: %w", err)
		}
		scanned += len(ops)
		for _, op := range ops {
			if op.NextCheckAt.After(now) && (op.LastCheckAt.IsZero() || now.Sub(op.LastCheckAt) < r.cfg.BackoffMin) {
				continue // degraded only: checked less than BackoffMin ago, or still in its grace
			}
			n++
			win.acquire()
			if cut(work) {
				win.release(false)
				return nil // the rest stay due: first in line next pass
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				win.release(r.check(work, write, op, now, degraded, t))
			}()
		}
		if len(ops) < limit {
			return nil
		}
		after = ledger.After(ops[len(ops)-1])
	}
	return nil
}

// check asks Gemini about one operation and feeds the answer to the door.
// A fetch that work cut short is no check: the operation stays due. It
// reports whether Gemini pushed back (a transient error: the window
// narrows).
func (r *Reconciler) check(work, ctx context.Context, op ledger.Operation, now time.Time, degraded bool, t *tally) (pushback bool) {
	log := r.cfg.Log.With("operation", op.Name)
	start := time.Now()
	ev, err := r.cfg.Gemini.Fetch(work, op.Kind, op.APIName)
	if err != nil && cut(work) {
		return false
	}
	pushback = fetcherr.KindOf(err) == fetcherr.Transient
	obs := deliverylog.Entry{At: now, Source: deliverylog.SourceReconcile, Status: ev.GeminiStatus}
	defer func() {
		if r.cfg.Deliveries != nil {
			obs.Latency = time.Since(start)
			r.cfg.Deliveries.Delivery(op.ID, obs)
		}
	}()
	// A failed check is retried after wait: the backoff, or BackoffMin
	// while a webhook is disabled (degraded).
	wait := r.Backoff(op.Checks)
	if degraded {
		wait = r.cfg.BackoffMin
	}
	note := "ok"
	switch fetcherr.KindOf(err) {
	case fetcherr.NotFound:
		// Recorded, never invented as a terminal: after StuckAfter the
		// stuck alert tells a person.
		note = "not-found"
		obs.Outcome, obs.Reason = "not-found", note
		log.WarnContext(ctx, "reconcile: Gemini does not know the operation", "api_name", op.APIName)
	case fetcherr.Transient:
		note = "gemini-unavailable"
		obs.Outcome, obs.Reason = "error", note
		t.add(func(s *Summary) { s.Errors++ })
		log.WarnContext(ctx, "reconcile: Gemini unavailable", "error", err.Error(), "check", note, "next_check_in", wait.String())
	case fetcherr.Permanent:
		note = "fetch-error"
		obs.Outcome, obs.Reason = "error", note
		t.add(func(s *Summary) { s.Errors++ })
		log.ErrorContext(ctx, "reconcile: fetch failed", "error", err.Error(), "check", note, "next_check_in", wait.String())
	default:
		ev.Source = event.SourceReconcile
		// The door decides on op as listed, not on a second read of it.
		res, err := r.cfg.Door.IngestRead(ctx, ev, &op)
		obs.Outcome, obs.Reason = string(res.Outcome), res.Label()
		if res.Intent != "" {
			t.add(func(s *Summary) { s.IntentsBound++ })
		}
		if err != nil {
			obs.Outcome, obs.Reason = "error", "ingest-error"
			// The door logged why. The operation is rescheduled with
			// backoff like any failed check: left due, one the door can
			// never ingest would be fetched every pass and, a page of
			// them, would hide every operation behind it. The schedule
			// is fenced on the revision read, so if the door did write
			// (it settled the operation, then failed to publish) it is
			// refused and the claim retry takes over.
			note = "ingest-error"
			t.add(func(s *Summary) { s.Errors++ })
			log.WarnContext(ctx, "reconcile: the door failed; rescheduled with backoff", "error", err.Error(),
				"check", note, "checks", op.Checks+1, "next_check_in", wait.String())
			break
		}
		if res.State.Terminal() {
			t.add(func(s *Summary) {
				s.Checked++
				if res.Outcome == ingest.OutcomeCompleted {
					s.Settled++
				}
			})
			return false
		}
		if res.Rev.Exists() {
			// The door wrote a new revision: schedule against it.
			op.Rev = res.Rev
		}
	}
	next := now.Add(wait)
	_, err = r.cfg.Ledger.ScheduleCheck(ctx, op, next, note, now)
	if err != nil && cut(ctx) {
		// The pass's deadline cut the write: like a fetch cut short, this
		// is no check. The operation stays due and the next pass checks
		// and counts it, so a check is counted once, when it is recorded.
		return false
	}
	t.add(func(s *Summary) { s.Checked++; s.StillPending++ })
	if err != nil && !errors.Is(err, ledger.ErrConflict) {
		// A conflict means a webhook changed the operation meanwhile; it
		// is re-checked when due. Anything else is the ledger failing.
		t.add(func(s *Summary) { s.Errors++ })
		log.ErrorContext(ctx, "reconcile: could not schedule the next check", "error", err.Error())
	}
	return pushback
}

// measureBacklog counts the operations the pass left due and reads the
// earliest of them: a count aggregation and one document, however large the
// backlog. It runs under the whole pass's context, after the checks were
// rescheduled, so what it sees is what the next pass inherits. A failure
// is an error of the pass, not of the ledger: the figures are then 0.
func (r *Reconciler) measureBacklog(ctx context.Context, rg shard.Range, now time.Time, t *tally) {
	n, err := r.cfg.Ledger.CountDue(ctx, rg, now)
	if err == nil && n > 0 {
		var first []ledger.Operation
		if first, err = r.cfg.Ledger.DueOperations(ctx, rg, now, ledger.DueCursor{}, 1); err == nil && len(first) == 1 {
			late := int64(now.Sub(first[0].NextCheckAt) / time.Second)
			t.add(func(s *Summary) { s.OldestOverdueSeconds = late })
		}
	}
	if err != nil {
		t.add(func(s *Summary) { s.Errors++ })
		r.cfg.Log.WarnContext(ctx, "reconcile: could not measure the due backlog", "error", err.Error())
		return
	}
	t.add(func(s *Summary) { s.DueBacklog, s.Counted = int(n), s.Counted|FigureBacklog })
}

// prune deletes settled operations older than Retention, when the store
// needs it done. A failure is an error of the pass; what is left is pruned
// next pass.
func (r *Reconciler) prune(ctx context.Context, now time.Time, t *tally) {
	if r.cfg.Retention <= 0 || r.cfg.Pruner == nil || cut(ctx) {
		return
	}
	n, err := r.cfg.Pruner.PruneSettled(ctx, now.Add(-r.cfg.Retention), now, r.cfg.MaxOperations)
	if err != nil {
		if cut(ctx) {
			return
		}
		t.add(func(s *Summary) { s.Errors++ })
		r.cfg.Log.WarnContext(ctx, "reconcile: could not prune settled operations", "error", err.Error())
		return
	}
	t.add(func(s *Summary) { s.Pruned = n })
}

// adopt lists recent batch jobs and feeds them to the door: a job the
// ledger does not know (its submitter died between creating and
// registering it) is created, and settled at once if it is terminal.
//
// Gemini lists newest first (GEMINI.md §10), so the first page holds the
// jobs created since the last pass unless more than a page was. The whole
// first page is always read, as before (whatever the order, a small
// project's jobs are all on it); further pages are read only until the
// newest job of the previous scan shows up, at most AdoptMaxPages pages.
// A scan that ends at that bound without meeting it says so: jobs created
// before the jobs it read may have been missed.
//
// The mark moves to this scan's newest job only if every adoption of the
// scan succeeded; one that failed leaves the mark where it was, so the next
// scan reads down to the old mark again and retries the failed job (and
// feeds the others, now known, to the door again: a read each). Moving the
// mark past a failed job would hide it from every later scan but one that
// has it on the first page.
func (r *Reconciler) adopt(ctx context.Context, t *tally) {
	if r.cfg.AdoptPageSize <= 0 || cut(ctx) {
		return
	}
	r.adoptMu.Lock()
	mark := r.adoptMark
	r.adoptMu.Unlock()
	unbound, err := r.unboundBatches(ctx)
	if err != nil {
		if cut(ctx) {
			return
		}
		// Adoption goes on: a job an intent's is still registered, and
		// the next pass binds it (the door, for a known operation).
		t.add(func(s *Summary) { s.Errors++ })
		r.cfg.Log.WarnContext(ctx, "reconcile: could not read the unbound batch intents to adopt jobs for", "error", err.Error())
	}
	token, newest, failed := "", "", false
	for page := 1; ; page++ {
		evs, next, err := r.cfg.Gemini.ListBatches(ctx, r.cfg.AdoptPageSize, token)
		if err != nil && cut(ctx) {
			return
		}
		if err != nil {
			t.add(func(s *Summary) { s.Errors++ })
			r.cfg.Log.WarnContext(ctx, "reconcile: listing batch jobs failed", "error", err.Error())
			return
		}
		if page == 1 && len(evs) > 0 {
			newest = evs[0].Name
		}
		met := false
		for _, ev := range evs {
			if page > 1 && ev.Name == mark {
				met = true
				break
			}
			met = met || ev.Name == mark
			if cut(ctx) {
				return
			}
			if r.pastRetention(ev.Event) {
				continue
			}
			if !r.adoptOne(ctx, t, unbound.claim(ev)) {
				failed = true
			}
		}
		if met || next == "" {
			break
		}
		if page == r.cfg.AdoptMaxPages {
			if mark == "" {
				break // this instance's first scan: nothing to meet
			}
			r.cfg.Log.WarnContext(ctx, "reconcile: adoption listed its page bound without reaching the jobs the last scan saw; unregistered jobs created before these may be missed",
				"pages", page, "page_size", r.cfg.AdoptPageSize)
			break
		}
		token = next
	}
	if newest != "" && !failed {
		r.adoptMu.Lock()
		r.adoptMark = newest
		r.adoptMu.Unlock()
	}
}

// pastRetention says whether a listed job settled longer than Retention
// ago: adoption leaves it alone. The listing shows old jobs every pass, and
// once retention has deleted the job's operation the door would take it
// for a new one: an error a pass while its DONE claim is kept, then a
// second results message once the claim has expired too.
//
// Nothing is lost by it as long as the reconciler (whose every pass lists
// the newest jobs) was not down longer than Retention: a job the ledger
// never saw was on the listing from its creation until it settled and
// after, so an earlier pass adopted it. Retention counts from the ledger's
// settlement, which is never before Gemini's update time, so every job
// whose operation retention may have deleted is past it here. A job
// without an update time is fed to the door as before.
func (r *Reconciler) pastRetention(ev event.Event) bool {
	return r.cfg.Retention > 0 && ev.State.Terminal() && !ev.UpdateTime.IsZero() &&
		!ev.UpdateTime.After(r.cfg.Now().Add(-r.cfg.Retention))
}

// adoptOne feeds one listed job to the door and counts what it did. It
// reports whether the door took it (false: retry it next scan).
func (r *Reconciler) adoptOne(ctx context.Context, t *tally, ev event.Event) bool {
	ev.Source = event.SourceReconcile
	res, err := r.cfg.Door.Ingest(ctx, ev)
	t.add(func(s *Summary) {
		switch {
		case err != nil:
			s.Errors++
		case res.Reason == string(lifecycle.ReasonFirstSighting):
			s.Adopted++
			if res.Outcome == ingest.OutcomeCompleted {
				s.Settled++
			}
		}
		if err == nil && res.Intent != "" {
			s.IntentsBound++
		}
	})
	return err == nil
}

// Pacing of the stuck alert: raised when an operation becomes stuck (the
// first pass after SubmittedAt + StuckAfter), again 1 h, 6 h and 24 h after
// it became stuck, then every 24 h. A person is told at once, reminded while
// the news is fresh, and then once a day rather than on every pass.
const stuckRepeatEvery = 24 * time.Hour

// alertDue paces an alert raised from since on (an operation stuck since
// then, an intent past its grace), last raised at last (zero: never), at
// now: whether it is due now, the time to record as its last (now when
// due, else last: a key out of step is put back on its cadence without a
// line), and when the one after is due. The stuck alert and the
// intent-unbound alert are both paced by it.
func alertDue(since, last, now time.Time) (alert bool, at, next time.Time) {
	due := nextStuckAlert(since, last)
	if alert = !now.Before(due); alert {
		return true, now, nextStuckAlert(since, now)
	}
	return false, last, due
}

// nextStuckAlert is when the stuck alert of an operation stuck since since
// and last alerted at last (zero: never) is due next.
func nextStuckAlert(since, last time.Time) time.Time {
	if last.IsZero() || last.Before(since) {
		return since
	}
	for _, d := range [...]time.Duration{time.Hour, 6 * time.Hour, stuckRepeatEvery} {
		if p := since.Add(d); p.After(last) {
			return p
		}
	}
	return since.Add((last.Sub(since)/stuckRepeatEvery + 1) * stuckRepeatEvery)
}

// stuck counts the operations pending longer than StuckAfter (the shared
// duty: a count of the whole ledger) and raises the stuck alerts of range
// rg that are due (the ranged duty).
func (r *Reconciler) stuck(ctx context.Context, rg shard.Range, d duties, now time.Time, t *tally) error {
	if d.shared {
		// Counted, not read: the scan reads only the due ones.
		n, err := r.cfg.Ledger.CountOperations(ctx, ledger.Filter{StuckAt: now.Add(-r.cfg.StuckAfter)})
		if err != nil {
			return fmt.Errorf("reconcile: count stuck operations: %w", err)
		}
		t.add(func(s *Summary) { s.Stuck, s.Counted = int(n), s.Counted|FigureStuck })
	}
	if !d.ranged {
		return nil
	}
	return r.alertStuck(ctx, rg, now, t)
}

// alertStuck raises one ERROR line for each whose alert is due (nextStuckAlert),
// recording when on the operation. Nothing is closed: only a person (or
// Gemini) settles it.
//
// The scan reads only operations whose alert is due, earliest due first:
// each alert moves the operation's stuck key (ledger.StuckKey) to when its
// next alert is due, less StuckAfter, so an old stuck operation goes to the
// back and never hides one that became stuck after it, however many there
// are (MaxOperations bounds one pass; the rest are next in line).
func (r *Reconciler) alertStuck(ctx context.Context, rg shard.Range, now time.Time, t *tally) error {
	cutoff := now.Add(-r.cfg.StuckAfter)
	ops, err := r.cfg.Ledger.StuckOperations(ctx, rg, cutoff, r.cfg.MaxOperations)
	if err != nil {
		return fmt.Errorf("reconcile: stuck operations: %w", err)
	}
	alerted := 0
	for _, op := range ops {
		if cut(ctx) {
			t.add(func(s *Summary) { s.Partial = true })
			break
		}
		if op.State.Terminal() {
			// Settled by a version that predates the key, which left it
			// set (a rollback): clear it (a terminal operation's key is
			// zero), no line.
			if _, err := r.cfg.Ledger.RecordStuckAlert(ctx, op, op.StuckAlertedAt, time.Time{}); err != nil && !errors.Is(err, ledger.ErrConflict) {
				t.add(func(s *Summary) { s.Errors++ })
				r.cfg.Log.WarnContext(ctx, "reconcile: could not clear a settled operation's stuck key", "operation", op.Name, "error", err.Error())
			}
			continue
		}
		// Not due: its key is out of step (alerted before keys existed, or
		// StuckAfter changed), put back on its cadence with no line.
		alert, at, due := alertDue(op.SubmittedAt.Add(r.cfg.StuckAfter), op.StuckAlertedAt, now)
		// Recorded first, fenced on the revision read, and the line written
		// only by the pass whose record wins: two passes over one range at
		// once (a redelivered shard request) read the same revision, and
		// both used to raise the alert. A conflict means another pass
		// recorded it, or the operation changed since it was read (a
		// webhook, a check): the next pass reads it again.
		_, err := r.cfg.Ledger.RecordStuckAlert(ctx, op, at, due.Add(-r.cfg.StuckAfter))
		switch {
		case errors.Is(err, ledger.ErrConflict):
			continue
		case err != nil:
			// Not recorded: alert all the same (a repeat next pass beats
			// silence).
			t.add(func(s *Summary) { s.Errors++ })
			r.cfg.Log.WarnContext(ctx, "reconcile: could not record the stuck alert; it is repeated next pass",
				"operation", op.Name, "error", err.Error())
		}
		if alert {
			alerted++
			attrs := []any{"alert", "stuck", "operation", op.Name, "state", string(op.State),
				"submitted_at", op.SubmittedAt, "pending_for", now.Sub(op.SubmittedAt).Round(time.Second).String(),
				"last_check", op.LastCheck, "checks", op.Checks}
			if !op.StuckAlertedAt.IsZero() {
				attrs = append(attrs, "previous_alert_at", op.StuckAlertedAt)
			}
			r.cfg.Log.ErrorContext(ctx, "operation stuck", attrs...)
		}
	}
	t.add(func(s *Summary) { s.StuckAlerts = alerted })
	return nil
}
