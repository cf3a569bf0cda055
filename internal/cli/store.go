package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"cloud.google.com/go/firestore"

	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/ledger"
	fsledger "github.com/lrosink/lrosink/internal/ledger/firestore"
	"github.com/lrosink/lrosink/internal/ledger/sqlite"
	"github.com/lrosink/lrosink/internal/logging"
)

// flagVars maps the flags that stand for configuration variables to them.
func flagVars() map[string]string {
	return map[string]string{
		"store":            "LROSINK_STORE",
		"results":          "LROSINK_RESULTS",
		"webhook-secret":   "LROSINK_WEBHOOK_SECRETS",
		"reconcile-every":  "LROSINK_RECONCILE_EVERY",
		"grace":            "LROSINK_GRACE",
		"stuck-after":      "LROSINK_STUCK_AFTER",
		"claim-lease":      "LROSINK_CLAIM_LEASE",
		"webhook-deadline": "LROSINK_WEBHOOK_DEADLINE",
	}
}

// storeFlag adds --store to a command that works on the ledger.
func storeFlag(fs *flag.FlagSet) {
	fs.String("store", "", "ledger `STORE`: sqlite:PATH or firestore (env LROSINK_STORE; default sqlite:lrosink.db)")
}

// storeEnvDoc is the Environment section of the ledger commands.
const storeEnvDoc = `  LROSINK_STORE        sqlite:PATH or firestore (default sqlite:lrosink.db)
  GOOGLE_CLOUD_PROJECT, LROSINK_FIRESTORE_DATABASE, FIRESTORE_EMULATOR_HOST  for firestore`

// loadConfig reads the configuration with `lrosink serve`'s defaults; the
// flags of fs that were set and stand for a variable take precedence over the
// environment. Validation stays in config.Load, so flags and variables get
// the same checks; an error line names the flag when a flag supplied the
// value.
func loadConfig(getenv func(string) string, fs *flag.FlagSet) (config.Config, error) {
	vars := flagVars()
	override := map[string]string{} // variable → value
	flagOf := map[string]string{}   // variable → flag name
	fs.Visit(func(f *flag.Flag) {
		if v, ok := vars[f.Name]; ok {
			override[v], flagOf[v] = f.Value.String(), f.Name
		}
	})
	cfg, err := config.Load(func(k string) string {
		if v, ok := override[k]; ok {
			return v
		}
		return getenv(k)
	}, config.Serve())
	if err == nil {
		return cfg, nil
	}
	lines := strings.Split(err.Error(), "\n")
	for i, line := range lines {
		for v, f := range flagOf {
			if rest, ok := strings.CutPrefix(line, v+":"); ok {
				lines[i] = "--" + f + " (" + v + "):" + rest
			}
		}
	}
	return cfg, &configError{err: errors.New(strings.Join(lines, "\n"))}
}

// openSQLite opens a sqlite:PATH store. With mustExist it refuses to create
// a new database: a read command pointed at a mistyped path (or run in the
// wrong directory) should fail, not report an empty ledger.
func openSQLite(ctx context.Context, store string, mustExist bool) (*sqlite.Store, error) {
	path, ok := strings.CutPrefix(store, "sqlite:")
	if !ok || path == "" {
		return nil, fmt.Errorf("%q is not sqlite:PATH", store)
	}
	if mustExist {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s (run lrosink serve or lrosink register first, or set --store)", path)
		}
	}
	return sqlite.Open(ctx, path)
}

// openLedger opens the configured ledger for the read commands, which need
// no sink (so `ops list` works without Pub/Sub credentials).
func openLedger(ctx context.Context, cfg config.Config) (ledger.Ledger, func() error, error) {
	if cfg.Store == "firestore" {
		project := cfg.Project
		if project == "" {
			project = firestore.DetectProjectID // the emulator needs none
		}
		c, err := firestore.NewClientWithDatabase(ctx, project, cfg.FirestoreDatabase)
		if err != nil {
			return nil, nil, fmt.Errorf("LROSINK_STORE=firestore: %w", err)
		}
		return fsledger.New(c, nil), c.Close, nil
	}
	s, err := openSQLite(ctx, cfg.Store, true)
	if err != nil {
		return nil, nil, fmt.Errorf("LROSINK_STORE=%s: %w", cfg.Store, err)
	}
	return s, s.Close, nil
}

// newApp builds the App: the ingest door, sink and reconciler on the
// configured ledger. newDB says whether a new SQLite file may be created.
func (e *env) newApp(ctx context.Context, cfg config.Config, log *slog.Logger, newDB bool) (*app.App, error) {
	a, err := app.New(ctx, cfg, log, app.Options{
		Now:    e.now,
		Stdout: e.stdout,
		OpenLedger: func(ctx context.Context, store string) (ledger.Ledger, func() error, error) {
			s, err := openSQLite(ctx, store, !newDB)
			if err != nil {
				return nil, nil, err
			}
			return s, s.Close, nil
		},
		Faults: e.faults,
	})
	if err != nil {
		return nil, err // app.New names the variable at fault
	}
	return a, nil
}

// toolLogger is the log of the one-shot commands: JSON on stderr like
// serve's, but only warnings and errors, so the command's own answer is
// not buried in per-decision lines.
func toolLogger(w io.Writer, cfg config.Config) *slog.Logger {
	return logging.New(w, slog.LevelWarn, cfg.Project)
}
