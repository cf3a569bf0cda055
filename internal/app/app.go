// Package app wires lrosink's parts from a validated configuration: the
// ledger, the results sink, the webhook verifier and the ingest door, and the
// HTTP handlers on top. Entry points (functions/, cmd/server, cmd/lrosink)
// stay thin: they load config, build an App and serve it.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/lrosink/lrosink/internal/action"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/console"
	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/fanout"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/humantime"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/metrics"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/register"
	"github.com/lrosink/lrosink/internal/retry"
	"github.com/lrosink/lrosink/internal/sink"
	"github.com/lrosink/lrosink/internal/webhook"
)

// App is a running lrosink.
type App struct {
	Config config.Config
	Log    *slog.Logger
	// Ledger is the store; Claims the claim protocol over it, which the
	// door and the reconciler write through.
	Ledger  ledger.Ledger
	Claims  *claims.Ledger
	Results sink.Sink
	Door    *ingest.Door
	// Intents is the intent path (CONTRACT.md §5) over the ledger, binding
	// through Door: POST /Register's and the embedded lrosink submit's.
	Intents  *register.Intents
	Verifier *webhook.Verifier
	// Reconciler polls Gemini only when GEMINI_API_KEY is set.
	Reconciler *reconcile.Reconciler
	// Coordinator, with LROSINK_RECONCILE_SHARDS > 1, is what the
	// Scheduler's /Reconcile call runs: it publishes the tick's shard
	// requests to LROSINK_RECONCILE_FANOUT_TOPIC and runs the shared
	// duties. Nil: one whole pass per call.
	Coordinator *fanout.Coordinator
	// Actions carries out the console's actions (Replay, Check now,
	// Publish now) here: the in-process console's, and the Reconcile
	// function's action requests (the Console service's on Cloud Run).
	Actions *action.Runner
	// Metrics is this App's own Prometheus registry (GET /metrics).
	Metrics *metrics.Metrics
	// Passes keeps this process's recent reconcile passes for the console.
	Passes        *console.Passes
	signatureHint string
	// Deliveries records every webhook delivery and reconcile observation
	// in the operation's delivery log (after the answer), and this
	// process's webhook traffic of the last hour.
	Deliveries *deliverylog.Log
	// DeliveryStore is the delivery log's store (the ledger's deliveries
	// collection or table); nil if the ledger keeps none.
	DeliveryStore deliverylog.Store
	now           func() time.Time
	closers       []func() error
	// ledgerWrites and resultsWrites follow the outcome of every write of
	// the claim protocol and every publish of the door, for /readyz.
	ledgerWrites, resultsWrites *httpapi.Writes
	// stopping ends when Stop starts: a reconcile pass in flight ends
	// early (partial) instead of outliving the stop's budget.
	stopping context.Context
	stop     context.CancelFunc
	// idTokens and actionTransport: Options'.
	idTokens        action.TokenSource
	actionTransport http.RoundTripper
}

// Options are the parts an entry point may supply instead of the defaults.
type Options struct {
	// Now is the clock (time.Now by default).
	Now func() time.Time
	// Stdout receives `stdout` results.
	Stdout io.Writer
	// HTTPClient fetches the JWKS.
	HTTPClient *http.Client
	// Faults injects crashes at the ingest door's boundaries (tests and the
	// simulator only; nil in production).
	Faults ingest.Faults
	// SignatureHint, if set, is the detail of a webhook's 401
	// no-matching-signature (serve: where its dev secret is).
	SignatureHint string
	// IDTokens gives the Console service the ID token it calls
	// LROSINK_RECONCILE_URL with (action.MetadataIDToken by default: the
	// metadata server's; tests give their own).
	IDTokens action.TokenSource
	// ActionTransport is the base transport of those calls (nil:
	// http.DefaultTransport).
	ActionTransport http.RoundTripper
}

// New builds an App. On error, whatever was opened is closed again.
func New(ctx context.Context, cfg config.Config, log *slog.Logger, o Options) (_ *App, err error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.IDTokens == nil {
		o.IDTokens = action.MetadataIDToken
	}
	a := &App{Config: cfg, Log: log, Metrics: metrics.New(), Passes: console.NewPasses(20), now: o.Now, signatureHint: o.SignatureHint,
		idTokens: o.IDTokens, actionTransport: o.ActionTransport}
	a.stopping, a.stop = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			_ = a.Close()
		}
	}()
	// The verifier first: it needs no I/O, and a bad secret should be the
	// error reported, not whatever a store client then says.
	if a.Verifier, err = webhook.NewVerifier(webhook.Config{Secrets: cfg.WebhookSecrets, PublicKeys: cfg.WebhookPublicKeys,
		JWKSURL: cfg.JWKSURL, Audience: cfg.JWTAudience, HTTPClient: o.HTTPClient, Now: o.Now}); err != nil {
		return nil, err
	}
	// Both settings go through the binary's registry of schemes
	// (cfg.Openers), which names the variable in every error.
	if cfg.Openers.Stores == nil || cfg.Openers.Results == nil {
		return nil, errors.New("app: config.Config.Openers is not set (load the configuration with config.Load)")
	}
	env := cfg.URLEnv(o.Stdout)
	env.Log = log
	l, closeLedger, err := cfg.Openers.Stores.Open(ctx, cfg.Store, env)
	if err != nil {
		return nil, err
	}
	a.ledgerWrites = httpapi.NewWrites("ledger", "ledger-writes-failing", a.probeLedgerWrite, o.Now)
	a.Ledger, a.Claims, a.closers = l, claims.New(watchedLedger{l, a.ledgerWrites}), append(a.closers, closeLedger)
	if c, ok := ledger.As[metrics.CheckpointCounter](l); ok {
		a.Metrics.CountCheckpointFailures(c)
	}
	s, closeSink, err := cfg.Openers.Results.Open(ctx, cfg.Results, env)
	if err != nil {
		return nil, err
	}
	a.Results, a.closers = s, append(a.closers, closeSink)
	a.resultsWrites = httpapi.NewWrites("results", "results-writes-failing", resultsProbe(s), o.Now)
	a.Deliveries = &deliverylog.Log{Traffic: deliverylog.NewTraffic(o.Now)}
	if ds, ok := a.Ledger.(deliverylog.Store); ok {
		a.DeliveryStore = ds
		a.Deliveries.Recorder = deliverylog.NewRecorder(ds, deliverylog.Retention{TTL: cfg.DeliveryLogTTL}, log)
		a.Metrics.CountDeliveryLogDrops(a.Deliveries.Recorder)
	}
	// Gemini is read by the reconciler and by the door, which confirms
	// dynamic-webhook (v1a, JWT) hints; without a key neither polls.
	dc := ingest.Config{Store: a.Claims, Sink: a.Metrics.Sink(watchSink(a.Results, a.resultsWrites)), Log: log, Now: o.Now,
		Lease: cfg.ClaimLease, Grace: cfg.Grace, Faults: o.Faults, Observer: a.Metrics}
	rc := reconcile.Config{Ledger: a.Claims, Log: log, Now: o.Now, StuckAfter: cfg.StuckAfter, IntentGrace: cfg.IntentGrace, AdoptPageSize: 50,
		Observers: []reconcile.Observer{a.Metrics, a.Passes.Observer(o.Now)}, Deliveries: a.Deliveries}
	if a.Deliveries.Recorder != nil {
		rc.Observers = append(rc.Observers, flushLog{a.Deliveries.Recorder, log})
	}
	rc.Counter = a.Ledger
	a.Metrics.CountFrom(a.Ledger, o.Now)
	// SQLite and memory prune in the pass; Firestore (not a Pruner) has
	// its TTL policy delete by the expire_at it writes. Every store's pass
	// knows the retention: adoption must not take a job whose operation it
	// deleted for a new one.
	rc.Retention = cfg.Retention
	if p, ok := a.Ledger.(reconcile.Pruner); ok && cfg.Retention > 0 {
		rc.Pruner = p
	}
	if cfg.GeminiAPIKey != "" {
		// One Gemini budget (LROSINK_GEMINI_QPS) for every request this
		// process sends, retries included. The reconciler's fetcher waits
		// for a slot; the door's confirmations answer a webhook within its
		// deadline and never queue: with no slot free now, the hint is
		// answered 503 gemini-budget-spent and Gemini redelivers.
		budget := reconcile.NewBudget(cfg.GeminiQPS, cfg.ReconcileShards, time.Now, retry.Sleep)
		f, err := gemini.New(gemini.Options{APIKey: cfg.GeminiAPIKey, BaseURL: cfg.GeminiBaseURL, HTTPClient: o.HTTPClient, Log: log,
			Wait: budget.TryWait})
		if err != nil {
			return nil, fmt.Errorf("GEMINI_API_KEY / GOOGLE_GEMINI_BASE_URL: %w", err)
		}
		rf, err := gemini.New(gemini.Options{APIKey: cfg.GeminiAPIKey, BaseURL: cfg.GeminiBaseURL, HTTPClient: o.HTTPClient, Log: log,
			Wait: budget.Wait})
		if err != nil {
			return nil, fmt.Errorf("GEMINI_API_KEY / GOOGLE_GEMINI_BASE_URL: %w", err)
		}
		// The metrics wrapper hides the fetcher's ListWebhooks, so the
		// webhook health check is given the fetcher itself.
		dc.Confirmer, rc.Gemini, rc.Webhooks = a.Metrics.Gemini(f), a.Metrics.Gemini(rf), rf
	}
	if a.Door, err = ingest.New(dc); err != nil {
		return nil, err
	}
	if a.Intents, err = register.NewIntents(a.Door, a.Claims, o.Now, cfg.IntentGrace); err != nil {
		return nil, err
	}
	rc.Door = a.Door
	if a.Reconciler, err = reconcile.New(rc); err != nil {
		return nil, err
	}
	ac := action.Config{Door: a.Door, Ledger: a.Ledger, Log: log, Now: o.Now, Deliveries: a.Deliveries}
	if rc.Gemini != nil {
		ac.Checker = a.Reconciler
	}
	if a.Deliveries.Recorder != nil {
		// Written before the answer: the page the action redirects to
		// shows it, and on Cloud Run the CPU is throttled after it.
		ac.Flush = a.Deliveries.Recorder.Flush
	}
	if a.Actions, err = action.NewRunner(ac); err != nil {
		return nil, err
	}
	if cfg.ReconcileShards > 1 {
		pub, err := fanout.OpenPubSub(ctx, cfg.FanOutTopic)
		if err != nil {
			return nil, err
		}
		a.closers = append(a.closers, pub.Close)
		if a.Coordinator, err = fanout.NewCoordinator(fanout.Coordinator{Shared: a.Reconciler, Publisher: pub,
			Shards: cfg.ReconcileShards, Now: o.Now, Log: log}); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// killAfter is how long Cloud Run waits between SIGTERM and SIGKILL, as do
// most supervisors: the one figure every stop's timing derives from.
const killAfter = 10 * time.Second

// StopTimeout bounds a graceful stop in all (Stop, Close), from the signal
// to the clients closed: killAfter less 2 s for the last lines to get out
// and the process to exit. Nothing of the stop runs past it.
const StopTimeout = killAfter - 2*time.Second

// closeGrace is the end of a stop's budget kept for closing the clients
// (ledger, sink): the requests, the reconcile loop and the door's drain end
// closeGrace before the stop's deadline. Enough for a ledger and a sink with
// nothing outstanding; one still busy at the deadline is left behind.
const closeGrace = 500 * time.Millisecond

// Close is Shutdown bounded by StopTimeout.
func (a *App) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
	defer cancel()
	return a.Shutdown(ctx)
}

// Stop stops srv, which serves a, gracefully by ctx's deadline (SIGTERM):
// srv stops taking requests and waits for those in flight (after half of
// their part of the budget the door takes no new work and lets its waiting
// callers go, both answered 503 stopping), then each of then runs with that
// same part (serve stops its reconcile loop there), then Shutdown drains the
// door's detached work and closes the clients in the last closeGrace. A
// request still running when its part ends is cut off (its sender retries:
// Gemini redelivers, Scheduler retries); door work still running then
// fails on the closed clients, and its claim is seized after its lease. No
// step outlasts ctx; an error says what was cut off.
func (a *App) Stop(ctx context.Context, srv *http.Server, then ...func(context.Context)) error {
	var errs []error
	a.Log.InfoContext(ctx, "shutting down")
	a.endPasses()
	work, cancel := workPart(ctx)
	defer cancel()
	if a.Door != nil {
		// The requests in flight get half of their part of the budget to
		// finish as usual. Then the door takes no new work and lets those
		// still waiting on it go, answered 503 stopping, so that they do
		// not hold srv.Shutdown for up to the webhook deadline (10 s, past
		// the budget): their work goes on, and Shutdown drains it.
		stopWaiting := func() { a.Door.StopTaking(); a.Door.LetWaitersGo() }
		if dl, ok := work.Deadline(); ok {
			t := time.AfterFunc(time.Until(dl)/2, stopWaiting)
			defer t.Stop()
		} else {
			stopWaiting()
		}
	}
	if err := srv.Shutdown(work); err != nil {
		errs = append(errs, fmt.Errorf("shutdown: requests still running were cut off: %w", err))
		_ = srv.Close()
	}
	for _, f := range then {
		if err := within(ctx, func() error { f(work); return nil }); err != nil {
			errs = append(errs, fmt.Errorf("a step of the stop outlasted the budget: %w", err))
		}
	}
	if err := a.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("close: %w", err))
	}
	if len(errs) == 0 {
		a.Log.InfoContext(ctx, "stopped")
	}
	return errors.Join(errs...)
}

// workPart is the part of a stop's budget (ctx) before the clients' close:
// it ends closeGrace before ctx's deadline (at once when less is left), or
// with ctx if it has none.
func workPart(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, dl.Add(-closeGrace))
	}
	return context.WithCancel(ctx)
}

// Stopping ends when Stop (or Shutdown) starts: a reconcile pass run
// outside the Reconcile handler (serve's loop) ends early with it, partial
// (cause reconcile.ErrStopping), as the handler's passes do.
func (a *App) Stopping() context.Context { return a.stopping }

// endPasses ends the reconcile passes in flight (partial), first thing in a
// stop: a pass's budget (270 s) is far longer than the stop's 8 s.
func (a *App) endPasses() {
	if a.stop != nil {
		a.stop()
	}
}

// Shutdown drains the ingest door (no new work; the work in flight, which
// runs detached from its callers, finishes) until closeGrace before ctx's
// deadline, then releases clients and flushes the sink, in reverse order of
// opening, until ctx ends. Work still running when the drain ends fails on
// the closed clients; a claim it held is seized after its lease. A client
// still closing when ctx ends is left behind: Shutdown returns by ctx's
// end.
func (a *App) Shutdown(ctx context.Context) error {
	a.endPasses()
	work, cancel := workPart(ctx)
	defer cancel()
	var errs []error
	if a.Door != nil {
		a.Log.InfoContext(ctx, "draining the ingest door")
		if err := a.Door.Drain(work); err != nil {
			errs = append(errs, fmt.Errorf("%w; closing anyway (a claim it holds is seized after its lease)", err))
		}
	}
	// The delivery log's queue is written before the ledger closes; what
	// is still queued when the drain's time ends is lost (only the log,
	// never state).
	if a.Deliveries != nil && a.Deliveries.Recorder != nil {
		if err := a.Deliveries.Recorder.Close(work); err != nil {
			errs = append(errs, err)
		}
	}
	closers := a.closers
	a.closers = nil
	errs = append(errs, closeWithin(ctx, closers))
	return errors.Join(errs...)
}

// closeWithin runs closers in reverse order and waits for them until ctx
// ends. A Pub/Sub sink's Close flushes for up to its publish timeout (60 s),
// and a SQLite ledger's waits for its writer, which may be waiting up to
// busy_timeout (10 s) for another process's write lock: both past Cloud
// Run's kill. The process then exits without waiting, which loses nothing
// the door counted as published or committed: a message still being
// flushed belongs to a claim not yet DONE, seized and published again after
// its lease, and SQLite's write-ahead log keeps every committed
// transaction, as after a crash.
func closeWithin(ctx context.Context, closers []func() error) error {
	err := within(ctx, func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	})
	if errors.Is(err, errOutlasted) {
		return fmt.Errorf("closing the clients outlasted the stop's budget; not waiting for them (a message still being flushed is published again after its claim's lease): %w", context.Cause(ctx))
	}
	return err
}

// errOutlasted: within returned at ctx's end, with f still running.
var errOutlasted = errors.New("still running at the stop's deadline")

// within runs f and returns its error, or errOutlasted (wrapping ctx's
// cause) once ctx ends with f still running, which goes on unwaited.
func within(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// Both ready: f's own answer, not a cut-off that is none.
	select {
	case err := <-done:
		return err
	default:
		return fmt.Errorf("%w: %w", errOutlasted, context.Cause(ctx))
	}
}

// Webhook is the Webhook function's handler.
func (a *App) Webhook() http.Handler {
	return a.Metrics.Webhook(logging.Middleware(httpapi.Webhook(a.Door, a.Verifier, a.Log, a.Config.MaxBody,
		httpapi.WithDeadline(a.Config.WebhookDeadline), httpapi.WithSignatureHint(a.signatureHint),
		httpapi.WithDeliveryLog(webhookLog{a.Deliveries, a.Metrics}, a.now))))
}

// webhookLog tells the delivery log of every delivery and the metrics of
// every rejection.
type webhookLog struct {
	*deliverylog.Log
	m *metrics.Metrics
}

func (w webhookLog) Rejected(at time.Time, deliveryID, reason string, status int) {
	w.Log.Rejected(at, deliveryID, reason, status)
	w.m.Rejected(at, deliveryID, reason, status)
}

// Register is the Register function's handler; with LROSINK_ADMIN_TOKEN
// set it requires that bearer token (so does Reconcile).
func (a *App) Register() http.Handler {
	return logging.Middleware(httpapi.SameOrigin(a.Log, httpapi.RequireBearer(a.Config.AdminToken, a.Log,
		httpapi.Register(a.Door, a.Log, httpapi.WithIntents(a.Intents)))))
}

// Reconcile is the Reconcile function's handler. A Pub/Sub push of a shard
// request runs that range's pass, whatever this instance's shard count (a
// request in flight while the count changes is still a valid range); a
// plain call coordinates when the passes are sharded, and is one whole pass
// otherwise.
func (a *App) Reconcile() http.Handler {
	opts := []httpapi.ReconcileOption{httpapi.WithShardPasses(a.Reconciler), httpapi.WithActions(a.Actions)}
	if a.Coordinator != nil {
		opts = append(opts, httpapi.WithCoordinator(a.Coordinator))
	}
	return logging.Middleware(httpapi.SameOrigin(a.Log, httpapi.RequireBearer(a.Config.AdminToken, a.Log,
		httpapi.Reconcile(a.Reconciler, a.Log, a.Config.ReconcileDeadline, a.stopping, opts...))))
}

// Console is the Console function's handler: the read-only console at
// /ui/ (console.Prefix); with LROSINK_ADMIN_TOKEN set it requires that token,
// as a Bearer header or the session cookie of its sign-in form (a browser
// cannot send the header). passesHere says whether this process
// serves Reconcile too: only then are its recent passes worth showing;
// otherwise the health page says where passes run.
func (a *App) Console(passesHere bool) (http.Handler, error) {
	cfg := console.Config{Ledger: a.Ledger, Log: a.Log, Now: a.now, StuckAfter: a.Config.StuckAfter, IntentGrace: a.Config.IntentGrace,
		Settings: a.settings(), AdminToken: a.Config.AdminToken, Deliveries: a.DeliveryStore, DeliveryLogTTL: a.Config.DeliveryLogTTL,
		Counter: a.Ledger}
	// The traffic figures come from the delivery log wherever the console
	// runs: they survive a restart, and on Cloud Run they are the Webhook
	// service's.
	if tc, ok := a.Ledger.(deliverylog.TrafficCounter); ok && a.DeliveryStore != nil {
		cfg.TrafficLog = tc
	}
	if passesHere {
		// Only here are the recent passes and the webhook traffic this
		// process's own.
		cfg.Passes, cfg.Traffic = a.Passes, a.Deliveries.Traffic
		// Passes here ask Gemini only with a key: without one nothing is
		// ever checked.
		cfg.PollingOff = a.Config.GeminiAPIKey == ""
	}
	switch {
	case passesHere:
		// One process (serve, or every function in one): the actions run
		// here, through the same door and reconciler.
		cfg.Actions = a.Actions
	case a.Config.ReconcileURL != "":
		// The Console service on Cloud Run: read-only on the ledger, it
		// asks the Reconcile service, as itself (run.invoker there).
		cfg.Actions = action.HTTP(a.Config.ReconcileURL, &http.Client{Timeout: action.CallTimeout,
			// The ID token goes to the Reconcile URL alone, never where a
			// redirect points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport:     action.IDTokenTransport(a.Config.ReconcileURL, a.idTokens, a.actionTransport)})
		cfg.TrustIAM = true
	default:
		// The Console alone with nowhere to send them: no actions.
		cfg.TrustIAM = true
	}
	h, err := console.New(cfg)
	if err != nil {
		return nil, err
	}
	return logging.Middleware(h), nil
}

// MetricsHandler is GET /metrics. With LROSINK_ADMIN_TOKEN set it needs
// `Authorization: Bearer <token>` like the other administrative routes (a
// Prometheus scrape config sends it with `authorization: {credentials}`):
// the counts describe the project's traffic, and a token is set exactly
// when serve listens beyond loopback. Without one (loopback serve; Cloud
// Run, where IAM guards the service) it is open.
func (a *App) MetricsHandler() http.Handler {
	return httpapi.RequireBearer(a.Config.AdminToken, a.Log, a.Metrics.Handler())
}

// settings describe the configuration on the console's health page: what
// is configured, never a secret's value.
func (a *App) settings() []console.Setting {
	set := func(v string) string {
		if v == "" {
			return "not set"
		}
		return "set"
	}
	c := a.Config
	out := []console.Setting{
		{Name: "LROSINK_STORE", Value: c.Store},
		{Name: "LROSINK_RESULTS", Value: c.Results},
		{Name: "GEMINI_API_KEY", Value: set(c.GeminiAPIKey) + " (reconcile polls Gemini only when set)"},
		{Name: "LROSINK_WEBHOOK_SECRETS", Value: fmt.Sprintf("%d secret(s)", len(c.WebhookSecrets))},
		{Name: "LROSINK_GRACE", Value: humantime.Duration(c.Grace)},
		{Name: "LROSINK_STUCK_AFTER", Value: humantime.Duration(c.StuckAfter)},
		{Name: "LROSINK_INTENT_GRACE", Value: humantime.Duration(c.IntentGrace)},
		{Name: "LROSINK_CLAIM_LEASE", Value: humantime.Duration(c.ClaimLease)},
		// The operation page's overdue hint refers to it.
		{Name: "LROSINK_RECONCILE_EVERY", Value: humantime.Duration(c.ReconcileEvery) + " (serve's own reconcile loop; on Cloud Run, Cloud Scheduler's schedule runs the passes)"},
		{Name: "LROSINK_RECONCILE_DEADLINE", Value: humantime.Duration(c.ReconcileDeadline)},
		{Name: "LROSINK_DELIVERY_LOG_TTL", Value: humantime.Duration(c.DeliveryLogTTL)},
		{Name: "LROSINK_GEMINI_QPS", Value: qps(c.GeminiQPS, c.ReconcileShards)},
		{Name: "LROSINK_RECONCILE_SHARDS", Value: shards(c.ReconcileShards, c.FanOutTopic)},
		{Name: "LROSINK_RETENTION", Value: retention(c.Retention)},
	}
	if c.Project != "" {
		out = append(out, console.Setting{Name: "GOOGLE_CLOUD_PROJECT", Value: c.Project})
	}
	return out
}

// retention describes LROSINK_RETENTION.
func retention(d time.Duration) string {
	if d <= 0 {
		return "unset (settled operations are kept for ever)"
	}
	return fmt.Sprintf("%dd after settlement", d/(24*time.Hour))
}

// shards describes how a /Reconcile call is divided.
func shards(n int, topic string) string {
	if n <= 1 {
		return "1 (one whole pass per call)"
	}
	return fmt.Sprintf("%d (a call hands out %d shard passes through %s)", n, n, topic)
}

// qps describes the Gemini budget as a pass gets it.
func qps(total float64, shards int) string {
	if total <= 0 {
		return "0 (unlimited)"
	}
	return fmt.Sprintf("%g a second, %g per pass (%d shard(s))", total, total/float64(max(shards, 1)), max(shards, 1))
}

// Mux serves every function at its own path, as cmd/server does without
// FUNCTION_TARGET, plus GET /healthz (liveness), GET /readyz (the store
// answered recently, and its writes and the results sink's are not
// failing), GET /metrics and the console under /ui/ (GET / redirects
// there; GET /favicon.ico is its 204).
func (a *App) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/Webhook", a.Webhook())
	mux.Handle("/Register", a.Register())
	mux.Handle("/Reconcile", a.Reconcile())
	mux.Handle("GET /metrics", a.MetricsHandler())
	if ui, err := a.Console(true); err != nil {
		// The templates are embedded and parsed by the console's tests:
		// this is a broken build, not a configuration.
		a.Log.Error("console unavailable", "error", err.Error())
	} else {
		mux.Handle(console.Prefix, ui)
		mux.Handle("GET /{$}", http.RedirectHandler(console.Prefix, http.StatusFound))
		mux.Handle("GET "+console.Favicon, ui)
	}
	mux.Handle("GET /healthz", httpapi.Healthz())
	mux.Handle("GET /readyz", httpapi.Readyz(a.ProbeStore, a.ledgerWrites, a.resultsWrites))
	return mux
}

// readyProbeTimeout bounds the read /readyz makes, below any probe's own
// timeout.
const readyProbeTimeout = 3 * time.Second

// readyProbeID is the document /readyz reads: it never exists, so the
// answer is ErrNotFound, which means the store answered.
const readyProbeID = "lrosink-readyz-probe"

// ProbeStore reads one document from the ledger, bounded: nil when the
// store answered (found or not), else an error naming the store.
func (a *App) ProbeStore(ctx context.Context) error {
	// Every ledger call is also bounded by LROSINK_STORE_TIMEOUT: the
	// error names whichever limit is the shorter.
	limit := readyProbeTimeout
	if st := a.Config.StoreTimeout; st > 0 && st < limit {
		limit = st
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	_, err := a.Ledger.GetOperation(ctx, readyProbeID)
	if err == nil || errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	where := "LROSINK_STORE=" + a.Config.Store
	if w, ok := a.Ledger.(interface{ Where() string }); ok {
		where = w.Where()
	}
	return fmt.Errorf("%s did not answer a read within %s: %w", where, limit, err)
}

// flushLog writes a pass's observations to the delivery log before the
// pass answers: on Cloud Run the Reconcile service's CPU is throttled once
// it has answered (unlike the Webhook service's, cpu_idle = false), so
// writing after the answer could leave them queued until the next pass.
type flushLog struct {
	rec *deliverylog.Recorder
	log *slog.Logger
}

// flushTimeout bounds that write; the Scheduler waits minutes anyway.
const flushTimeout = 5 * time.Second

func (f flushLog) ObservePass(time.Time, reconcile.Summary, error) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := f.rec.Flush(ctx); err != nil {
		f.log.Warn("delivery log: the pass's checks are not written yet", "error", err.Error())
	}
}
