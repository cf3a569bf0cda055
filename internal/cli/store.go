package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/urlopen"
	"github.com/lrosink/lrosink/internal/urlopen/sqliteurl"
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
	fs.Visit(func(f *flag.Flag) {
		if v, ok := vars[f.Name]; ok {
			override[v] = f.Value.String()
		}
	})
	cfg, err := config.Load(func(k string) string {
		if v, ok := override[k]; ok {
			return v
		}
		return getenv(k)
	}, config.Serve(openers(false)))
	if err == nil {
		return cfg, nil
	}
	return cfg, &command.ConfigError{Err: nameFlags(err, fs)}
}

// nameFlags rewrites each line of err that starts with a variable a flag of
// fs set ("LROSINK_STORE: …") to name the flag too ("--store
// (LROSINK_STORE): …"): the operator typed the flag, not the variable.
// Errors of no such line are returned as they are (their chain kept).
func nameFlags(err error, fs *flag.FlagSet) error {
	vars := flagVars()
	flagOf := map[string]string{} // variable → flag name
	fs.Visit(func(f *flag.Flag) {
		if v, ok := vars[f.Name]; ok {
			flagOf[v] = f.Name
		}
	})
	lines := strings.Split(err.Error(), "\n")
	changed := false
	for i, line := range lines {
		for v, f := range flagOf {
			if rest, ok := strings.CutPrefix(line, v+":"); ok {
				lines[i], changed = "--"+f+" ("+v+"):"+rest, true
			}
		}
	}
	if !changed {
		return err
	}
	return &flagNamedError{msg: strings.Join(lines, "\n"), err: err}
}

// flagNamedError is an error's text with the flags named, its chain kept.
type flagNamedError struct {
	msg string
	err error
}

func (e *flagNamedError) Error() string { return e.msg }
func (e *flagNamedError) Unwrap() error { return e.err }

// openers is cmd/lrosink's set of schemes: the container's plus sqlite:.
// With mustExist, sqlite: refuses to create a new database (the read
// commands and replay: a mistyped path must fail, not show an empty ledger).
func openers(mustExist bool) urlopen.Openers {
	return urlopen.Cloud(sqliteurl.Scheme(mustExist))
}

// openReadLedger opens the configured ledger (fs's flags over the
// environment) for the read commands, which need no sink (so `ops list`
// works without Pub/Sub credentials). Closing it has nothing to flush.
func (e *env) openReadLedger(ctx context.Context, fs *flag.FlagSet) (ledger.Ledger, config.Config, func(), error) {
	cfg, err := loadConfig(e.getenv, fs)
	if err != nil {
		return nil, cfg, nil, err
	}
	l, closeFn, err := openers(true).Stores.Open(ctx, cfg.Store, cfg.URLEnv(nil))
	if err != nil {
		return nil, cfg, nil, configIfBadPath(nameFlags(err, fs))
	}
	e.nameLedger(fs.Name(), cfg, false)
	return l, cfg, func() { _ = closeFn() }, nil
}

// nameLedger is the one stderr line of every command that opened a ledger
// (CONTRACT.md §1): which store, and its path or project, so a command run
// from another directory or with another LROSINK_STORE says so.
func (e *env) nameLedger(cmd string, cfg config.Config, created bool) {
	if e.stderr == nil { // an env built by a test for its ledger alone
		return
	}
	note := ""
	if created {
		note = " (new: created now)"
	}
	fmt.Fprintf(e.stderr, "%s: ledger %s%s\n", join("lrosink", cmd), describeStore(cfg), note)
}

// describeStore names cfg's ledger in full: sqlite:ABSOLUTE-PATH, or
// firestore with its project, database and emulator.
func describeStore(cfg config.Config) string {
	if path, ok := strings.CutPrefix(cfg.Store, "sqlite:"); ok {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		return "sqlite:" + path
	}
	if cfg.Store != "firestore" {
		return cfg.Store
	}
	s := "firestore (project " + dash(cfg.Project) + ", database " + cfg.FirestoreDatabase
	if cfg.FirestoreEmulatorHost != "" {
		s += ", emulator " + cfg.FirestoreEmulatorHost
	}
	return s + ")"
}

// sqliteMissing reports whether cfg's ledger is a SQLite file that does not
// exist yet (opening it may create it).
func sqliteMissing(cfg config.Config) bool {
	path, ok := strings.CutPrefix(cfg.Store, "sqlite:")
	if !ok {
		return false
	}
	_, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist)
}

// join joins the non-empty words with spaces.
func join(words ...string) string {
	return strings.Join(slices.DeleteFunc(words, func(w string) bool { return w == "" }), " ")
}

// newApp builds the App: the ingest door, sink and reconciler on the
// configured ledger. newDB says whether a new SQLite file may be created.
// extra adjusts the App's options (serve's dev-secret hint).
func (e *env) newApp(ctx context.Context, cfg config.Config, log *slog.Logger, newDB bool, extra ...func(*app.Options)) (*app.App, error) {
	cfg.Openers = openers(!newDB)
	o := app.Options{Now: e.now, Stdout: e.stdout, Faults: e.faults}
	for _, f := range extra {
		f(&o)
	}
	// app.New names the variable at fault.
	return app.New(ctx, cfg, log, o)
}

// toolApp builds the App of a one-shot command (register, replay,
// reconcile) from the environment and fs's flags, logging to stderr at
// toolLogger's level. Without an explicit results sink its `stdout` sink
// refuses to publish: a one-shot command must never put a results message
// on the operator's terminal, where no consumer reads it (and the claim
// would be committed DONE as if one had).
func (e *env) toolApp(ctx context.Context, fs *flag.FlagSet, newDB bool) (*app.App, error) {
	cfg, err := loadConfig(e.getenv, fs)
	if err != nil {
		return nil, err
	}
	stdout := e.stdout
	if !resultsConfigured(e.getenv, fs) {
		stdout = noResultsSink{}
	}
	created := newDB && sqliteMissing(cfg)
	a, err := e.newApp(ctx, cfg, toolLogger(e.stderr, cfg), newDB, func(o *app.Options) { o.Stdout = stdout })
	if err != nil {
		return nil, configIfBadPath(nameFlags(err, fs))
	}
	e.nameLedger(fs.Name(), cfg, created)
	return a, nil
}

// configIfBadPath makes a store path that cannot hold a database (a
// directory, a missing directory) the configuration error it is: exit 2;
// and a missing ledger, in its own words (which name the path and the
// variable), without the variable's prefix of the opener's error.
func configIfBadPath(err error) error {
	var nl *sqliteurl.NoLedgerError
	switch {
	case errors.As(err, &nl):
		return &command.ConfigError{Err: nl}
	case errors.Is(err, sqliteurl.ErrBadPath):
		return &command.ConfigError{Err: err}
	}
	return err
}

// resultsConfigured reports whether LROSINK_RESULTS or --results names the
// results sink (serve's default of stdout does not count).
func resultsConfigured(getenv func(string) string, fs *flag.FlagSet) bool {
	set := strings.TrimSpace(getenv("LROSINK_RESULTS")) != ""
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "results" && strings.TrimSpace(f.Value.String()) != "" {
			set = true
		}
	})
	return set
}

// requireResults is the refusal of a command whose purpose is to publish
// (replay, reconcile) when no results sink is configured: exit 2, one line.
func requireResults(getenv func(string) string, fs *flag.FlagSet, cmd string) error {
	if resultsConfigured(getenv, fs) {
		return nil
	}
	return &command.ConfigError{Err: fmt.Errorf("LROSINK_RESULTS: not set; %s publishes only to an explicitly configured results sink: "+
		"set LROSINK_RESULTS or --results to the one your consumers read (pubsub:projects/P/topics/T, file:PATH, or stdout to print it here)", cmd)}
}

// errNoResultsSink is what a publish through noResultsSink fails with.
var errNoResultsSink = errors.New("no results sink configured (LROSINK_RESULTS is not set)")

// noResultsSink is the `stdout` of a one-shot command without a configured
// results sink: every write fails, so nothing is published by accident.
type noResultsSink struct{}

func (noResultsSink) Write([]byte) (int, error) { return 0, errNoResultsSink }

// toolLogger is the log of the one-shot commands: JSON on stderr like
// serve's, but only warnings and errors, so the command's own answer is
// not buried in per-decision lines.
func toolLogger(w io.Writer, cfg config.Config) *slog.Logger {
	return logging.New(w, slog.LevelWarn, cfg.Project)
}
