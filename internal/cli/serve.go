package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/humantime"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/webhook"
)

// shutdownTimeout bounds a graceful stop, the clients' close included
// (app.StopTimeout, 8 s): most supervisors kill a process 10 s after SIGTERM.
const shutdownTimeout = app.StopTimeout

// defaultAddr is loopback only: serve is the local, embedded run, and
// /Register and /Reconcile have no authentication of their own unless
// LROSINK_ADMIN_TOKEN is set (checkExposure).
const defaultAddr = "127.0.0.1:8080"

func serveDoc() command.Doc {
	return command.Doc{
		Path: "serve",
		Args: "[flags]",
		Summary: `Run every function on one HTTP server: POST /Webhook, POST /Register, POST /Reconcile,
GET /healthz (liveness), GET /readyz (503 while the store does not answer or writes fail), GET /metrics
(Prometheus) and the read-only operations console at GET /ui/ (GET / redirects there). The ledger defaults to the SQLite file ./lrosink.db and results go to
stdout as JSON lines, one per results message; stdout carries nothing else. Logs go to
stderr as JSON. A reconcile pass runs at start-up (so claims left by a crash are retried)
and then every LROSINK_RECONCILE_EVERY.

Without a configured webhook secret, serve signs with a dev secret: generated on the first
run and kept beside a SQLite ledger (sqlite:PATH → PATH.secret, mode 0600), so it survives
restarts; with a firestore ledger it lasts the run. Start-up prints it, and where it is, on
stderr (never in a log record); a delivery signed otherwise gets 401 with that hint.

SIGINT or SIGTERM stops it gracefully, within 8s in all: no new connections, requests
in flight finish, the reconcile loop stops, work the ingest door still runs for callers
that hung up finishes (publish and DONE) until 7.5s, then the ledger and the results
sink are closed, and left behind at 8s if still closing (a ledger another process holds
write-locked). Exit status 0; 1 if something was cut off (a claim it held is then seized
after its lease by the next run).`,
		Env: `  Each flag has a variable (named in its help); a flag overrides its variable.
  PORT, HOST         when --addr is not given: listen on port $PORT (default 8080) of $HOST
                     (default 127.0.0.1); PORT alone never exposes serve beyond this machine.
                     A port that is not a number, or an address in use, is exit 2 at start-up
  LROSINK_ADMIN_TOKEN  required to listen on an address other than loopback (e.g. --addr
                     0.0.0.0:8080); when set, POST /Register, /Reconcile and GET /metrics need the
                     header "Authorization: Bearer <token>" (401 otherwise), and the console at
                     /ui/ is guarded too: a browser signs in with the token through a form (an
                     HttpOnly, SameSite=Lax cookie; Sign out ends it), scripts send the header.
                     /Webhook is authenticated by its signature and /healthz is open. 16+
                     characters: openssl rand -hex 32. On Cloud Run leave it unset: IAM guards
                     the services, the console included
  GEMINI_API_KEY     lets reconcile passes poll Gemini (without it they only retry claims) and
                     confirms dynamic-webhook (v1a, JWT) terminal states, not applied without it
  LROSINK_JWKS_URL   Google's keys for dynamic webhooks (Ed25519 for v1a, RS256 for JWTs); a
                     local set for trying v1a: file:///path/jwks.json (see lrosink send --help)
  LROSINK_WEBHOOK_PUBLIC_KEYS  whpk_... Ed25519 keys: a fixed v1a trust list, never fetched
  LROSINK_LOG_FORMAT  stderr's form: text (one line per delivery, registration and reconcile
                     pass; the default when stderr is a terminal) or json (Cloud Logging's JSON
                     lines; the default otherwise: a pipe, a file)
  LROSINK_PPROF_ADDR  serve Go's profiles (net/http/pprof) at http://ADDR/debug/pprof/;
                     loopback only (e.g. 127.0.0.1:6060); off when unset
  LROSINK_JWT_AUDIENCE, LROSINK_MAX_BODY, GOOGLE_CLOUD_PROJECT  see the contract`,
		Examples: []string{
			"lrosink serve",
			"lrosink serve > results.jsonl",
			"LROSINK_WEBHOOK_SECRETS=whsec_... lrosink serve --addr 127.0.0.1:9000",
			"LROSINK_JWKS_URL=file://$PWD/jwks.json lrosink serve",
			"lrosink serve --store sqlite:/var/lib/lrosink/ledger.db --results file:/var/lib/lrosink/results.jsonl",
			"lrosink serve --reconcile-every 30s --grace 2m",
			"LROSINK_ADMIN_TOKEN=$(openssl rand -hex 32) lrosink serve --addr 0.0.0.0:8080",
		},
	}
}

func runServe(ctx context.Context, e *env, args []string) error {
	fs := command.NewFlagSet("serve")
	addr := fs.String("addr", "", "listen on `HOST:PORT` (default "+defaultAddr+"; $HOST and $PORT replace its parts); not loopback needs LROSINK_ADMIN_TOKEN")
	storeFlag(fs)
	fs.String("results", "", "results `SPEC`: stdout, file:PATH or pubsub:projects/P/topics/T (env LROSINK_RESULTS; default stdout)")
	var secrets command.ListValue
	fs.Var(&secrets, "webhook-secret", "accept deliveries signed with `whsec_…`; repeatable or comma-separated (env LROSINK_WEBHOOK_SECRETS, which keeps it out of the process list)")
	fs.String("reconcile-every", "", "run a reconcile pass every `DURATION` (env LROSINK_RECONCILE_EVERY; default 1m)")
	fs.String("grace", "", "do not poll a pending operation until `DURATION` after submission (env LROSINK_GRACE; default 90s)")
	fs.String("stuck-after", "", "alert on operations pending longer than `DURATION` (env LROSINK_STUCK_AFTER; default "+humantime.Duration(reconcile.DefaultStuckAfter)+")")
	fs.String("webhook-deadline", "", "answer a webhook 503 (the work goes on) when not done within `DURATION` (env LROSINK_WEBHOOK_DEADLINE; default "+humantime.Duration(webhook.DefaultDeadline)+")")
	fs.String("claim-lease", "", "seize a claim not committed within `DURATION` (env LROSINK_CLAIM_LEASE; default "+humantime.Duration(ingest.DefaultLease)+"; at least twice the webhook deadline)")
	if _, err := serveDoc().Parse(e.stdout, fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(e.getenv, fs)
	if err != nil {
		return err
	}
	listen, err := listenAddr(*addr, e.getenv)
	if err != nil {
		return err
	}
	if err := checkExposure(ctx, listen, cfg.AdminToken); err != nil {
		return err
	}
	// A port in use is found before anything is built or announced (no
	// ledger file, no dev secret, no shutdown lines); the real bind comes
	// after the build, so a bad store never leaves a port answering.
	if err := checkListen(listen); err != nil {
		return err
	}
	profAddr, err := pprofAddr(ctx, e.getenv)
	if err != nil {
		return err
	}
	log, err := serveLogger(e, cfg.Project)
	if err != nil {
		return err
	}
	procs := writerHeadroom(e, cfg.Store)
	var dev *devSecret
	var extra []func(*app.Options)
	if len(cfg.WebhookSecrets) == 0 {
		d, err := loadDevSecret(cfg.Store)
		if err != nil {
			return err
		}
		dev, cfg.WebhookSecrets = &d, []string{d.secret}
		extra = append(extra, func(o *app.Options) { o.SignatureHint = d.hint() })
	}
	// Fail fast: the whole app (store and sink opened) is built before
	// anything listens; a failure here is the configuration's (exit 2).
	created := sqliteMissing(cfg) // serve alone creates a missing ledger
	a, err := e.newApp(ctx, cfg, log, true, extra...)
	if err != nil {
		return &command.ConfigError{Err: err}
	}
	e.nameLedger("", cfg, created)
	if dev != nil {
		if err := dev.save(); err != nil {
			return errors.Join(err, a.Close())
		}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		// Taken since checkListen: rare, and still the configuration's.
		return errors.Join(&command.ConfigError{Err: listenError(listen, err)}, a.Close())
	}
	if dev != nil {
		fmt.Fprintln(e.stderr, dev.notice())
	}
	if profAddr != "" {
		stopPprof, err := startPprof(e, profAddr)
		if err != nil {
			return errors.Join(err, ln.Close(), a.Close())
		}
		defer stopPprof()
	}
	return serveApp(ctx, e, cfg, a, ln, log, procs)
}

// logFormatEnv chooses serve's stderr format (CONTRACT.md §2).
const logFormatEnv = "LROSINK_LOG_FORMAT"

// serveLogger is serve's logger on stderr: one human line per delivery
// and per reconcile pass (logging.NewText) when stderr is a terminal, the
// JSON lines of Cloud Logging (logging.New) otherwise, so that a pipe, a
// file or a log collector gets what it got before. LROSINK_LOG_FORMAT=json
// or text chooses; anything else is exit 2.
func serveLogger(e *env, project string) (*slog.Logger, error) {
	format := strings.TrimSpace(e.getenv(logFormatEnv))
	if format == "" {
		format = "json"
		if isTerminal(e.stderr) {
			format = "text"
		}
	}
	switch format {
	case "json":
		return logging.New(e.stderr, slog.LevelInfo, project), nil
	case "text":
		return logging.NewText(e.stderr, slog.LevelInfo, time.Local), nil
	}
	return nil, &command.ConfigError{Err: fmt.Errorf("%s: %q is neither json nor text", logFormatEnv, format)}
}

// writerHeadroom gives the Go scheduler one P more than it chose (the
// cores, or the container's CPU limit) when serve runs on the SQLite
// ledger, unless GOMAXPROCS is set. It returns GOMAXPROCS as serve runs,
// for its start line (0 when e.procs is unset: in-process tests).
//
// The ledger's one writer goroutine is what bounds serve under load, and
// it waits its turn in Go's run queues behind the HTTP and door goroutines
// like any other: traced under 500 senders it was runnable but not running
// 31 % of the time, mostly after waiting on a lock SQLite's readers held.
// One more P than cores lets the kernel interleave it sooner: +3–8 %
// deliveries/s at 500 senders and +6 % at 50, with p99 lower at both
// (docs/BENCHMARKS.md).
func writerHeadroom(e *env, store string) int {
	if e.procs == nil {
		return 0
	}
	n := e.procs(0)
	if !strings.HasPrefix(store, "sqlite:") || strings.TrimSpace(e.getenv("GOMAXPROCS")) != "" {
		return n
	}
	e.procs(n + 1)
	return n + 1
}

// listenAddr: --addr, else $HOST:$PORT, each defaulting to defaultAddr's
// part: PORT alone changes only the port, never the interface. A port that
// is not a number is a configuration error naming the flag or variable
// (net.Listen would look it up as a service name).
func listenAddr(flagAddr string, getenv func(string) string) (string, error) {
	if flagAddr != "" {
		_, port, err := net.SplitHostPort(flagAddr)
		if err != nil || !validPort(port) {
			return "", &command.ConfigError{Err: fmt.Errorf("--addr: %q is not HOST:PORT with a port number 0-65535 (e.g. 127.0.0.1:8080)", flagAddr)}
		}
		return flagAddr, nil
	}
	host, port, _ := net.SplitHostPort(defaultAddr)
	if h := strings.TrimSpace(getenv("HOST")); h != "" {
		host = h
	}
	if p := strings.TrimSpace(getenv("PORT")); p != "" {
		if !validPort(p) {
			return "", &command.ConfigError{Err: fmt.Errorf("PORT: %q is not a port number 0-65535", p)}
		}
		port = p
	}
	return net.JoinHostPort(host, port), nil
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535 && p == strconv.Itoa(n)
}

// checkListen binds addr and lets it go again: a configuration error naming
// the address when it cannot be bound (in use, not an address of this host).
func checkListen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return &command.ConfigError{Err: listenError(addr, err)}
	}
	return ln.Close()
}

// listenError says why addr cannot be bound in one line, without Go's
// layers ("listen tcp 127.0.0.1:8080: bind: ...").
func listenError(addr string, err error) error {
	why := err.Error()
	var se *os.SyscallError
	var oe *net.OpError
	switch {
	case errors.As(err, &se):
		why = se.Err.Error()
	case errors.As(err, &oe) && oe.Err != nil:
		why = oe.Err.Error()
	}
	hint := ""
	if errors.Is(err, syscall.EADDRINUSE) {
		hint = " (another lrosink serve? choose another with --addr or PORT)"
	}
	return fmt.Errorf("cannot listen on %s: %s%s", addr, why, hint)
}

// checkExposure refuses an address other hosts can reach unless an admin
// token guards /Register and /Reconcile there: they change the ledger and
// have no authentication of their own. Loopback means every address the
// host resolves to is loopback; an empty or unspecified host (":8080",
// "0.0.0.0") is every interface.
func checkExposure(ctx context.Context, addr, token string) error {
	if token != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return &command.ConfigError{Err: fmt.Errorf("listen address %q: %w", addr, err)}
	}
	if loopback(ctx, host) {
		return nil
	}
	return &command.ConfigError{Err: fmt.Errorf("listen address %q is not loopback: set LROSINK_ADMIN_TOKEN (then /Register and /Reconcile require Authorization: Bearer <token>), or listen on 127.0.0.1", addr)}
}

func loopback(ctx context.Context, host string) bool {
	if host == "" {
		return false
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.IsLoopback()
	}
	// A name: loopback only if everything it resolves to is (net.Listen
	// binds one of them). Unresolvable: not known to be loopback.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.Unmap().IsLoopback() {
			return false
		}
	}
	return true
}

// serveApp serves a on ln until ctx ends (a signal), then stops gracefully.
// It owns a and closes it.
func serveApp(ctx context.Context, e *env, cfg config.Config, a *app.App, ln net.Listener, log *slog.Logger, procs int) error {
	srv := &http.Server{
		Handler:           a.Mux(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(e.stderr, "lrosink: listening on http://%s\n", ln.Addr())
	started := []any{"addr", ln.Addr().String(), "store", cfg.Store,
		"results", cfg.Results, "reconcile_every", cfg.ReconcileEvery.String(),
		"webhook_deadline", cfg.WebhookDeadline.String(), "admin_token_set", cfg.AdminToken != ""}
	if procs > 0 {
		started = append(started, "gomaxprocs", procs)
	}
	log.InfoContext(ctx, "lrosink serve started", started...)

	// A pass in progress ends early, partial (cause reconcile.ErrStopping),
	// once the stop starts, as the Reconcile function's passes do: its own
	// budget is far longer than the stop's, which must leave time to drain
	// the door and close. hardStop ends what is left after the budget.
	hard, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	passes, endPasses := context.WithCancelCause(hard)
	defer endPasses(nil)
	defer context.AfterFunc(a.Stopping(), func() { endPasses(reconcile.ErrStopping) })()
	stopLoop, loopDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(loopDone)
		reconcileLoop(passes, stopLoop, a.Reconciler, cfg.ReconcileEvery, log)
	}()

	var errs []error
	select {
	case <-ctx.Done():
	case err := <-served:
		errs = append(errs, fmt.Errorf("serve: %w", err))
	}
	// One budget for the whole stop: requests, the reconcile pass, the door.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.shutdownTimeout)
	defer cancel()
	stopLoopFn := func(sctx context.Context) {
		close(stopLoop)
		select {
		case <-loopDone:
		case <-sctx.Done():
			// A claim the pass held is seized after its lease by the next run.
			hardStop()
			<-loopDone
		}
	}
	if err := a.Stop(sctx, srv, stopLoopFn); err != nil {
		errs = append(errs, fmt.Errorf("stop within %s: %w", e.shutdownTimeout, err))
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
	// A pass keeps the last fifth of its time for stuck alerting; give it at least 30 s and
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
