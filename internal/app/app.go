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

	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/metrics"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/sink"
	"github.com/lrosink/lrosink/internal/webhook"
)

// App is a running lrosink.
type App struct {
	Config   config.Config
	Log      *slog.Logger
	Ledger   ledger.Ledger
	Results  sink.Sink
	Door     *ingest.Door
	Verifier *webhook.Verifier
	// Reconciler polls Gemini only when GEMINI_API_KEY is set.
	Reconciler *reconcile.Reconciler
	// Metrics is this App's own Prometheus registry (GET /metrics).
	Metrics *metrics.Metrics
	closers []func() error
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
}

// New builds an App. On error, whatever was opened is closed again.
func New(ctx context.Context, cfg config.Config, log *slog.Logger, o Options) (_ *App, err error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	a := &App{Config: cfg, Log: log, Metrics: metrics.New()}
	defer func() {
		if err != nil {
			_ = a.Close()
		}
	}()
	// The verifier first: it needs no I/O, and a bad secret should be the
	// error reported, not whatever a store client then says.
	if a.Verifier, err = webhook.NewVerifier(webhook.Config{Secrets: cfg.WebhookSecrets, JWKSURL: cfg.JWKSURL,
		Audience: cfg.JWTAudience, HTTPClient: o.HTTPClient, Now: o.Now}); err != nil {
		return nil, err
	}
	// Both settings go through the binary's registry of schemes
	// (cfg.Openers), which names the variable in every error.
	if cfg.Openers.Stores == nil || cfg.Openers.Results == nil {
		return nil, errors.New("app: config.Config.Openers is not set (load the configuration with config.Load)")
	}
	env := cfg.URLEnv(o.Stdout)
	l, closeLedger, err := cfg.Openers.Stores.Open(ctx, cfg.Store, env)
	if err != nil {
		return nil, err
	}
	a.Ledger, a.closers = l, append(a.closers, closeLedger)
	s, closeSink, err := cfg.Openers.Results.Open(ctx, cfg.Results, env)
	if err != nil {
		return nil, err
	}
	a.Results, a.closers = s, append(a.closers, closeSink)
	// One Gemini fetcher serves the reconciler and the door, which confirms
	// dynamic-webhook (JWT) terminals with it; without a key neither polls.
	dc := ingest.Config{Store: a.Ledger, Sink: a.Metrics.Sink(a.Results), Log: log, Now: o.Now,
		Lease: cfg.ClaimLease, Grace: cfg.Grace, Faults: o.Faults, Observer: a.Metrics}
	rc := reconcile.Config{Ledger: a.Ledger, Log: log, Now: o.Now, StuckAfter: cfg.StuckAfter, AdoptPageSize: 50,
		Observer: a.Metrics}
	if cfg.GeminiAPIKey != "" {
		f, err := gemini.New(gemini.Options{APIKey: cfg.GeminiAPIKey, BaseURL: cfg.GeminiBaseURL, HTTPClient: o.HTTPClient, Log: log})
		if err != nil {
			return nil, fmt.Errorf("GEMINI_API_KEY / GOOGLE_GEMINI_BASE_URL: %w", err)
		}
		g := a.Metrics.Gemini(f)
		dc.Confirmer, rc.Gemini = g, g
	}
	if a.Door, err = ingest.New(dc); err != nil {
		return nil, err
	}
	rc.Door = a.Door
	if a.Reconciler, err = reconcile.New(rc); err != nil {
		return nil, err
	}
	return a, nil
}

// DrainTimeout bounds how long Close waits for the ingest door's work in
// flight; supervisors kill a process about 10 s after SIGTERM anyway.
const DrainTimeout = 10 * time.Second

// Close is Shutdown bounded by DrainTimeout.
func (a *App) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	return a.Shutdown(ctx)
}

// Shutdown drains the ingest door (no new work; the work in flight, which
// runs detached from its callers, finishes) until ctx ends, then releases
// clients and flushes the sink, in reverse order of opening. Work still
// running when ctx ends fails on the closed clients; a claim it held is
// seized after its lease.
func (a *App) Shutdown(ctx context.Context) error {
	var errs []error
	if a.Door != nil {
		a.Log.InfoContext(ctx, "draining the ingest door")
		if err := a.Door.Drain(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%w; closing anyway (a claim it holds is seized after its lease)", err))
		}
	}
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	a.closers = nil
	return errors.Join(errs...)
}

// Webhook is the Webhook function's handler.
func (a *App) Webhook() http.Handler {
	return a.Metrics.Webhook(logging.Middleware(httpapi.Webhook(a.Door, a.Verifier, a.Log, a.Config.MaxBody, httpapi.WithDeadline(a.Config.WebhookDeadline))))
}

// Register is the Register function's handler; with LROSINK_ADMIN_TOKEN
// set it requires that bearer token (so does Reconcile).
func (a *App) Register() http.Handler {
	return logging.Middleware(httpapi.RequireBearer(a.Config.AdminToken, a.Log, httpapi.Register(a.Door, a.Log)))
}

// Reconcile is the Reconcile function's handler.
func (a *App) Reconcile() http.Handler {
	return logging.Middleware(httpapi.RequireBearer(a.Config.AdminToken, a.Log, a.Reconciler.Handler()))
}

// Mux serves every function at its own path, as cmd/server does without
// FUNCTION_TARGET, plus GET /healthz and GET /metrics.
func (a *App) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/Webhook", a.Webhook())
	mux.Handle("/Register", a.Register())
	mux.Handle("/Reconcile", a.Reconcile())
	mux.Handle("GET /metrics", a.Metrics.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	return mux
}
