// Command server is the container entry point: functions-framework serving
// lrosink's functions. With FUNCTION_TARGET=Webhook (or Reconcile, Register,
// Console) it serves that one function at "/" (the console's pages are under
// /ui/, so the console needs its own target); without it, Webhook, Reconcile
// and Register at /Webhook, /Reconcile and /Register, and GET /metrics.
// PORT selects the port (default 8080).
//
// It builds the whole app (configuration validated, webhook secrets
// decoded, store and results sink opened) before it listens: anything wrong
// is one line per bad variable on stderr and exit status 2, and nothing
// was ever served.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	"github.com/lrosink/lrosink/functions"
	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/logging"
)

func main() {
	if err := run(context.Background()); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "lrosink:", line)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context) error {
	target := os.Getenv("FUNCTION_TARGET")
	if target != "" && !slices.Contains(functions.Names(), target) {
		return fmt.Errorf("FUNCTION_TARGET: %q is not one of %s", target, strings.Join(functions.Names(), ", "))
	}
	// config.Container() can open firestore, pubsub:, file: and stdout:
	// only; this binary does not link SQLite.
	cfg, err := config.Load(os.Getenv, config.Container())
	if err != nil {
		return err
	}
	log := logging.New(os.Stdout, slog.LevelInfo, cfg.Project)
	a, err := app.New(ctx, cfg, log, app.Options{Stdout: os.Stdout})
	if err != nil {
		return err // names the variable at fault
	}
	if err := functions.Register(a, target); err != nil {
		return err
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	// Cloud Run stops instances with SIGTERM; functions-framework has no
	// graceful shutdown, and none is needed for correctness: a request cut
	// short is answered by nobody, so Gemini redelivers it, and every crash
	// point of the ingest door is safe (docs/ARCHITECTURE.md).
	return funcframework.StartHostPort(os.Getenv("HOST"), port)
}
