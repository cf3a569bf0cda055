package app_test

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/urlopen"
	"github.com/lrosink/lrosink/internal/urlopen/sqliteurl"
)

// testConfig is the configuration every App test starts from: a fresh
// SQLite ledger, results on stdout, Gemini at geminiURL; edit sets the rest.
func testConfig(t *testing.T, geminiURL string, edit func(*config.Config)) config.Config {
	cfg := config.Config{Store: "sqlite:" + filepath.Join(t.TempDir(), "l.db"), Results: "stdout",
		GeminiBaseURL: geminiURL, Grace: time.Minute, StuckAfter: time.Hour, ClaimLease: time.Minute, MaxBody: 1 << 20, IntentGrace: time.Hour,
		Openers: urlopen.Cloud(sqliteurl.Scheme(false))}
	edit(&cfg)
	return cfg
}

// newApp builds the App for cfg, logging to logs (nil: nowhere), closed
// when the test ends.
func newApp(t *testing.T, cfg config.Config, logs io.Writer, stdout io.Writer, now func() time.Time) *app.App {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	a, err := app.New(t.Context(), cfg, logging.New(logs, slog.LevelDebug, ""), app.Options{Now: now, Stdout: stdout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}
