// Package functions registers lrosink's Cloud Run functions with
// functions-framework-go: Webhook, Register, Reconcile and Console (the
// read-only console, served privately: IAM invoker only). The handlers are
// thin; the App behind them is built on first use from the environment
// (CONTRACT.md §2), because functions-framework registers in init() before any
// configuration could be passed in. cmd/server validates the same
// configuration before it starts serving, so a bad deployment fails at
// start-up, not at the first request.
package functions

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"sync"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/logging"
)

func init() {
	l := &lazy{}
	functions.HTTP("Webhook", l.serve(func(a *app.App) http.Handler { return a.Webhook() }))
	functions.HTTP("Register", l.serve(func(a *app.App) http.Handler { return a.Register() }))
	functions.HTTP("Reconcile", l.serve(func(a *app.App) http.Handler { return a.Reconcile() }))
	functions.HTTP("Console", l.serve(func(a *app.App) http.Handler {
		h, err := a.Console()
		if err != nil { // embedded templates that do not parse: a broken build
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "console unavailable", http.StatusInternalServerError)
			})
		}
		return h
	}))
}

// lazy builds the App once; a failed build is retried on the next request
// (a transient client error must not wedge the instance).
type lazy struct {
	mu  sync.Mutex
	app *app.App
}

func (l *lazy) get(ctx context.Context) (*app.App, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.app != nil {
		return l.app, nil
	}
	cfg, err := config.Load(os.Getenv, config.Container())
	if err != nil {
		return nil, err
	}
	log := logging.New(os.Stdout, slog.LevelInfo, cfg.Project)
	a, err := app.New(context.WithoutCancel(ctx), cfg, log, app.Options{Stdout: os.Stdout})
	if err != nil {
		return nil, err
	}
	l.app = a
	return a, nil
}

func (l *lazy) serve(pick func(*app.App) http.Handler) func(http.ResponseWriter, *http.Request) {
	var (
		once sync.Once
		h    http.Handler
	)
	return func(w http.ResponseWriter, r *http.Request) {
		a, err := l.get(r.Context())
		if err != nil {
			logging.New(os.Stdout, slog.LevelInfo, "").ErrorContext(r.Context(), "lrosink is not configured", "error", err.Error())
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]string{"outcome": "error", "reason": "not-configured", "operation": ""})
			return
		}
		once.Do(func() { h = pick(a) })
		h.ServeHTTP(w, r)
	}
}
