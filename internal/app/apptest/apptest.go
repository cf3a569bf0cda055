// Package apptest serves a real lrosink for the tests of its clients
// (package submit, `lrosink submit`): the App `lrosink serve` builds
// (internal/app), its handlers (App.Mux) over real HTTP and a fresh SQLite
// ledger, so a client's test speaks to the Register function's intent
// protocol as it runs, not to a stand-in of it.
package apptest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/register"
	"github.com/lrosink/lrosink/internal/urlopen"
	"github.com/lrosink/lrosink/internal/urlopen/sqliteurl"
)

// Options adjust the App.
type Options struct {
	// Config edits the configuration: a fresh SQLite ledger, results on
	// Stdout, LROSINK_INTENT_GRACE 1h, no admin token, no webhook secret.
	Config func(*config.Config)
	// Now is the App's clock (time.Now when nil).
	Now func() time.Time
	// Stdout receives the `stdout` results; nil discards them.
	Stdout io.Writer
	// Logs receives the App's log lines; nil discards them.
	Logs io.Writer
	// Wrap, when set, wraps the App's handlers: a test's network faults
	// (a 503 the ledger cannot be made to answer on demand).
	Wrap func(http.Handler) http.Handler
}

// Server is a running App.
type Server struct {
	App *app.App
	// URL is the server's base: URL+"/Register", URL+"/Webhook".
	URL string
	// Store is its LROSINK_STORE (sqlite:PATH), for a command of the test
	// to open the same ledger.
	Store string
}

// Start builds the App and serves it until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s, stop, err := Serve(t.Context(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s
}

// Serve builds the App with its ledger in dir and serves it until stop is
// called (for an Example, which has no testing.T).
func Serve(ctx context.Context, dir string, o Options) (*Server, func(), error) {
	cfg := config.Config{Store: "sqlite:" + filepath.Join(dir, "ledger.db"), Results: "stdout",
		Grace: 90 * time.Second, StuckAfter: 6 * time.Hour, ClaimLease: 10 * time.Minute, MaxBody: 1 << 20,
		IntentGrace: time.Hour, Openers: urlopen.Cloud(sqliteurl.Scheme(false))}
	if o.Config != nil {
		o.Config(&cfg)
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Logs == nil {
		o.Logs = io.Discard
	}
	a, err := app.New(ctx, cfg, logging.New(o.Logs, slog.LevelInfo, ""), app.Options{Now: o.Now, Stdout: o.Stdout})
	if err != nil {
		return nil, nil, err
	}
	var h http.Handler = a.Mux()
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	srv := httptest.NewServer(h)
	return &Server{App: a, URL: srv.URL, Store: cfg.Store}, func() { srv.Close(); _ = a.Close() }, nil
}

// RegisterURL is the Register function's URL.
func (s *Server) RegisterURL() string { return s.URL + "/Register" }

// Intent is the status of the intent recorded under key (false when none
// is).
func (s *Server) Intent(t testing.TB, key string) (register.IntentStatus, bool) {
	t.Helper()
	st, err := s.App.Intents.Get(t.Context(), key)
	if errors.Is(err, ledger.ErrNotFound) {
		return register.IntentStatus{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return st, true
}

// Unbound counts the intents bound to no operation, whatever their age.
func (s *Server) Unbound(t testing.TB) int64 {
	t.Helper()
	n, err := s.App.Ledger.CountUnboundIntents(t.Context(), time.Now().AddDate(100, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
