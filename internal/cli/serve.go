package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// shutdownTimeout bounds a graceful stop: Cloud Run and most supervisors
// kill a process about 10 s after SIGTERM anyway.
const shutdownTimeout = 10 * time.Second

// defaultAddr is loopback only: serve is the local, embedded run, and
// /Register has no authentication of its own.
const defaultAddr = "127.0.0.1:8080"

func serveDoc() doc {
	return doc{
		cmd:  "serve",
		args: "[flags]",
		summary: `Run every function on one HTTP server: POST /Webhook, POST /Register, POST /Reconcile,
GET /healthz and the read-only operations console at GET /ui/. The ledger defaults to the SQLite file ./lrosink.db and results go to
stdout as JSON lines, one per results message; stdout carries nothing else. Logs go to
stderr as JSON. A reconcile pass runs at start-up (so claims left by a crash are retried)
and then every LROSINK_RECONCILE_EVERY.

Without a configured webhook secret, serve generates a dev signing secret for this run,
prints it once on stderr and accepts deliveries signed with it.

SIGINT or SIGTERM stops it gracefully, within 10s in all: no new connections, requests
in flight finish, the reconcile loop stops, work the ingest door still runs for callers
that hung up finishes (publish and DONE), then the ledger and the results sink are
closed. Exit status 0; 1 if something was cut off (a claim it held is then seized after
its lease by the next run).`,
		env: `  Each flag has a variable (named in its help); a flag overrides its variable.
  PORT, HOST         listen on $HOST:$PORT when --addr is not given (as cmd/server does)
  GEMINI_API_KEY     lets reconcile passes poll Gemini (without it they only retry claims) and
                     confirms dynamic-webhook (JWT) terminal states, which are not applied without it
  LROSINK_JWKS_URL, LROSINK_JWT_AUDIENCE, LROSINK_MAX_BODY, GOOGLE_CLOUD_PROJECT  see the contract`,
		examples: []string{
			"lrosink serve",
			"lrosink serve > results.jsonl",
			"LROSINK_WEBHOOK_SECRETS=whsec_... lrosink serve --addr 127.0.0.1:9000",
			"lrosink serve --store sqlite:/var/lib/lrosink/ledger.db --results file:/var/lib/lrosink/results.jsonl",
			"lrosink serve --reconcile-every 30s --grace 2m",
		},
	}
}

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet("serve")
	addr := fs.String("addr", "", "listen on `HOST:PORT` (default "+defaultAddr+", or $HOST:$PORT when PORT is set)")
	storeFlag(fs)
	fs.String("results", "", "results `SPEC`: stdout, file:PATH or pubsub:projects/P/topics/T (env LROSINK_RESULTS; default stdout)")
	var secrets listValue
	fs.Var(&secrets, "webhook-secret", "accept deliveries signed with `whsec_…`; repeatable or comma-separated (env LROSINK_WEBHOOK_SECRETS, which keeps it out of the process list)")
	fs.String("reconcile-every", "", "run a reconcile pass every `DURATION` (env LROSINK_RECONCILE_EVERY; default 1m)")
	fs.String("grace", "", "do not poll a pending operation until `DURATION` after submission (env LROSINK_GRACE; default 90s)")
	fs.String("stuck-after", "", "alert on operations pending longer than `DURATION` (env LROSINK_STUCK_AFTER; default 6h)")
	fs.String("claim-lease", "", "seize a claim not committed within `DURATION` (env LROSINK_CLAIM_LEASE; default 10m)")
	pos, err := e.parse(fs, serveDoc(), args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("serve", "unexpected argument %q", pos[0])
	}
	cfg, err := loadConfig(e.getenv, fs)
	if err != nil {
		return err
	}
	log := logging.New(e.stderr, slog.LevelInfo, cfg.Project)
	if len(cfg.WebhookSecrets) == 0 {
		// A plain line, never a log record: log pipelines keep records, and
		// this secret is only for the person running the server.
		s := webhooktest.NewSecret()
		cfg.WebhookSecrets = []string{s}
		fmt.Fprintf(e.stderr, "lrosink: DEV webhook signing secret, generated for this run only (set LROSINK_WEBHOOK_SECRETS for a real one): %s\n", s)
	}
	a, err := e.newApp(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listenAddr(*addr, e.getenv))
	if err != nil {
		return errors.Join(fmt.Errorf("listen: %w", err), a.Close())
	}
	return serveApp(ctx, e, cfg, a, ln, log)
}

// listenAddr: --addr, else $HOST:$PORT when PORT is set, else loopback.
func listenAddr(flagAddr string, getenv func(string) string) string {
	if flagAddr != "" {
		return flagAddr
	}
	if port := strings.TrimSpace(getenv("PORT")); port != "" {
		return net.JoinHostPort(strings.TrimSpace(getenv("HOST")), port)
	}
	return defaultAddr
}

// serveApp serves a on ln until ctx ends (a signal), then stops gracefully.
// It owns a and closes it.
func serveApp(ctx context.Context, e *env, cfg config.Config, a *app.App, ln net.Listener, log *slog.Logger) error {
	srv := &http.Server{
		Handler:           a.Mux(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(e.stderr, "lrosink: listening on http://%s\n", ln.Addr())
	log.InfoContext(ctx, "lrosink serve started", "addr", ln.Addr().String(), "store", cfg.Store,
		"results", cfg.Results, "reconcile_every", cfg.ReconcileEvery.String())

	// The loop's passes are not cancelled by the signal: a pass in progress
	// may finish within the shutdown budget. hardStop ends it after that.
	hard, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	stopLoop, loopDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(loopDone)
		reconcileLoop(hard, stopLoop, a.Reconciler, cfg.ReconcileEvery, log)
	}()

	var errs []error
	select {
	case <-ctx.Done():
	case err := <-served:
		errs = append(errs, fmt.Errorf("serve: %w", err))
	}
	log.InfoContext(ctx, "shutting down")
	// One budget for the whole stop: requests, the reconcile pass, the door.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Cut-off requests are answered by nobody, so Gemini redelivers them.
		errs = append(errs, fmt.Errorf("shutdown: requests still running after %s were cut off: %w", e.shutdownTimeout, err))
		_ = srv.Close()
	}
	close(stopLoop)
	select {
	case <-loopDone:
	case <-sctx.Done():
		// A claim the pass held is seized after its lease by the next run.
		hardStop()
		<-loopDone
	}
	// Last, the door's detached work (callers that hung up), then what it uses.
	if err := a.Shutdown(sctx); err != nil {
		errs = append(errs, fmt.Errorf("close: %w", err))
	}
	if len(errs) == 0 {
		log.InfoContext(ctx, "stopped")
	}
	return errors.Join(errs...)
}

// passer is the part of the reconciler the loop drives.
type passer interface {
	Pass(ctx context.Context) (reconcile.Summary, error)
}

// reconcileLoop runs a pass at once, then every `every` until stop is
// closed; a pass in progress then finishes unless ctx is cancelled.
func reconcileLoop(ctx context.Context, stop <-chan struct{}, r passer, every time.Duration, log *slog.Logger) {
	// A pass stops early 2 s before its deadline; give it at least 30 s and
	// at most 10 min, however short or long the interval.
	timeout := min(max(every, 30*time.Second), 10*time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		if _, err := r.Pass(pctx); err != nil {
			log.ErrorContext(ctx, "reconcile pass failed", "error", err.Error())
		}
		cancel()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}
