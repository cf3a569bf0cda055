// Command server is the container entry point: lrosink's functions on one
// HTTP server. With FUNCTION_TARGET=Webhook (or Reconcile, Register,
// Console) it serves that one function at "/" (the console's pages are under
// /ui/, so the console needs its own target); without it, Webhook, Reconcile
// and Register at /Webhook, /Reconcile and /Register, and GET /metrics.
// PORT selects the port (default 8080).
//
// It builds the whole app (configuration validated, webhook secrets
// decoded, store and results sink opened) before it listens: anything wrong
// is one line per bad variable on stderr and exit status 2, and nothing
// was ever served.
//
// SIGTERM (Cloud Run's stop, 10 s before it kills) or SIGINT stops it
// gracefully within app.StopTimeout (8 s), the clients' close included: no
// new connections, requests in flight finish (a /Reconcile pass ends at
// once, "partial":true), the ingest door's detached work (a webhook
// answered 503 deadline-exceeded) publishes and commits DONE, then the
// store and the sink are closed in the last 0.5 s. Exit status 0; 1 if
// something was cut off (a claim it held is then seized after its lease).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lrosink/lrosink/functions"
	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/logging"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	// After the first signal starts the graceful stop, a second one kills.
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := run(ctx)
	var startErr startupError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &startErr):
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "lrosink:", line)
		}
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "lrosink:", strings.ReplaceAll(err.Error(), "\n", "; "))
		os.Exit(1)
	}
}

// startupError is a configuration that could not be served (exit 2).
type startupError struct{ error }

func (e startupError) Unwrap() error { return e.error }

func run(ctx context.Context) error {
	target := os.Getenv("FUNCTION_TARGET")
	if err := functions.CheckTarget(target); err != nil {
		return startupError{err}
	}
	// config.Container() can open firestore, pubsub:, file: and stdout:
	// only; this binary does not link SQLite.
	cfg, err := config.Load(os.Getenv, config.Container())
	if err != nil {
		return startupError{err}
	}
	log := logging.New(os.Stdout, slog.LevelInfo, cfg.Project)
	a, err := app.New(ctx, cfg, log, app.Options{Stdout: os.Stdout})
	if err != nil {
		return startupError{err} // names the variable at fault
	}
	h, err := functions.Handler(a, target)
	if err != nil {
		return startupError{errors.Join(err, a.Close())}
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(os.Getenv("HOST"), port))
	if err != nil {
		return startupError{errors.Join(fmt.Errorf("listen: %w", err), a.Close())}
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.InfoContext(ctx, "lrosink server started", "addr", ln.Addr().String(), "function_target", target)
	var errs []error
	select {
	case <-ctx.Done():
	case err := <-served:
		errs = append(errs, fmt.Errorf("serve: %w", err))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), app.StopTimeout)
	defer cancel()
	if err := a.Stop(sctx, srv); err != nil {
		errs = append(errs, fmt.Errorf("stop within %s: %w", app.StopTimeout, err))
	}
	return errors.Join(errs...)
}
