package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/fsledger"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/simulate"
	"github.com/lrosink/lrosink/internal/urlopen"
)

func simulateDoc() command.Doc {
	return command.Doc{
		Path: "simulate",
		Args: "[flags]",
		Summary: `Runs the real webhook handler, reconcile pass, ingest door and store against a
built-in fake Gemini API, with a seeded workload of duplicated, reordered,
delayed and dropped deliveries and injected crashes, store errors, publish
errors, expiring leases, metadata a Firestore map cannot hold and poison
operations (the door always fails for them), and Gemini's whole state space:
interactions ending incomplete or budget_exceeded (no webhook event), batches
that succeed with failed requests, failures as "error" objects, and the project
webhook disabled for a while mid-run. A share of the operations is created
through lrosink's own submission path (package submit: intent, create at the
fake's create endpoints, bind), some killed between create and bind, some
submitted twice with the same key; then checks the invariants:
  1. no operation's stored state ever regresses (every read is checked);
  2. every operation that finished in Gemini ends in the same first terminal state
     (INCOMPLETE included), its message says gemini_status, a failure carries
     Gemini's error and is never SUCCEEDED, a batch settled by reconcile
     carries Gemini's batch_stats;
  3. exactly one results message per finished operation (extras only from an
     injected crash after the publish, with the same idempotency_key);
  4. no claim is left un-DONE; every stuck operation was alerted, none closed;
  5. stored and published metadata stay within the ledger's bound, and what a
     submitter registered is kept exactly, whatever its shape.
  6. poison operations stay pending, are rescheduled with backoff and alerted;
  7. stuck alerts follow their schedule; a disabled webhook is alerted once,
     its recovery logged once, and polling runs at the minimum interval meanwhile;
  8. after the intent grace, every operation a submission created has a ledger
     entry naming its intent, with the caller's metadata exactly; every intent is
     bound to its operation, or (a video or an interaction no delivery or listing
     could show lrosink) alerted as intent-unbound; Gemini saw exactly one create
     per key.
Exit status 1 on any violation.`,
		Env: `  FIRESTORE_EMULATOR_HOST  required by --store firestore (the simulator writes thousands of documents)
  GOOGLE_CLOUD_PROJECT, LROSINK_FIRESTORE_DATABASE  for --store firestore`,
		Examples: []string{
			"lrosink simulate --ops 1000 --seed 7",
			"lrosink simulate --store firestore --results pubsub:projects/P/topics/T   (uses the emulators)",
			"lrosink simulate --ops 10000 --json > report.json",
		},
	}
}

// runSimulate is `lrosink simulate`: it runs the simulator (package
// simulate) and prints its report; a violation is exit status 1.
func runSimulate(ctx context.Context, e *env, args []string) error {
	o := simulate.Defaults()
	fs := command.NewFlagSet("simulate")
	fs.IntVar(&o.Ops, "ops", o.Ops, "`N` operations")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "seed `S`: the same seed gives the same workload and fault plan")
	fs.Float64Var(&o.Dup, "dup", o.Dup, "chance `P` of each extra copy of a delivery")
	fs.Float64Var(&o.Reorder, "reorder", o.Reorder, "chance `P` a delivery is held back past later ones")
	fs.Float64Var(&o.Drop, "drop", o.Drop, "chance `P` a delivery is lost for good")
	fs.Float64Var(&o.Crash, "crash", o.Crash, "chance `P` of a process kill at each crash boundary")
	fs.Float64Var(&o.LedgerErrors, "ledger-errors", o.LedgerErrors, "chance `P` a store call fails")
	fs.Float64Var(&o.PublishErrors, "publish-errors", o.PublishErrors, "chance `P` a publish fails")
	fs.Float64Var(&o.SlowEffects, "slow-effects", o.SlowEffects, "chance `P` a side effect outlives its lease")
	fs.Float64Var(&o.UnstorableMetadata, "unstorable-metadata", o.UnstorableMetadata,
		"share `P` of operations whose registrations and webhooks carry metadata a Firestore map cannot hold (half also over the size bound)")
	fs.Float64Var(&o.Poison, "poison", o.Poison, "share `P` of operations the store refuses Gemini's answers for (the door always fails)")
	fs.Float64Var(&o.Incomplete, "incomplete", o.Incomplete,
		`share `+"`P`"+` of finishing interactions that end "incomplete" or "budget_exceeded" (no webhook event: only the reconciler sees them)`)
	fs.Float64Var(&o.PartialBatches, "partial-batches", o.PartialBatches, "share `P` of succeeding batches whose batchStats report failed requests")
	fs.Float64Var(&o.ErrorObjects, "error-objects", o.ErrorObjects, `share `+"`P`"+` of failing videos and interactions reported as an "error" object`)
	fs.DurationVar(&o.WebhookOutage, "webhook-outage", o.WebhookOutage,
		"how long (`D`) Gemini disables the project webhook mid-run (nothing delivered; 0: none)")
	fs.Float64Var(&o.Submit, "submit", o.Submit, "share `P` of operations created through lrosink's submission path (intent, create, bind) instead of registered by hand")
	fs.Float64Var(&o.CrashBeforeBind, "crash-before-bind", o.CrashBeforeBind, "chance `P` a submission's process is killed between its Gemini create and its bind")
	fs.Float64Var(&o.DuplicateSubmit, "duplicate-submit", o.DuplicateSubmit, "chance `P` a submission is run again with the same key (at once or up to 30 min later)")
	fs.DurationVar(&o.IntentGrace, "intent-grace", o.IntentGrace, "`D`: LROSINK_INTENT_GRACE, how long an intent may stay unbound before it is alerted")
	fs.DurationVar(&o.Horizon, "horizon", o.Horizon, "simulated time span `D`")
	store := fs.String("store", "sqlite", "ledger `STORE`: sqlite (a temporary file), sqlite:PATH, or firestore (needs FIRESTORE_EMULATOR_HOST; project GOOGLE_CLOUD_PROJECT, else lrosink-local)")
	results := fs.String("results", "", "also send results to `SPEC`: pubsub:projects/P/topics/T, file:PATH or stdout")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("quiet", false, "no progress bar (it is drawn only when stderr is a terminal)")
	if _, err := simulateDoc().Parse(e.stdout, fs, args); err != nil {
		return err
	}
	// Validate names the flag at fault: one line, before anything runs.
	if err := o.Validate(); err != nil {
		return &command.ConfigError{Err: err}
	}
	// The bar redraws itself with \r: only a terminal shows it as one line;
	// a file or a pipe would collect every frame.
	if !*quiet && !*asJSON && isTerminal(e.stderr) {
		o.Progress = e.stderr
	}
	b, closeFn, err := openSimulateBackend(ctx, *store, *results, e.stdout, e.stderr, e.getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	rep, err := simulate.Run(ctx, o, b)
	if err != nil {
		return err
	}
	if *asJSON {
		err = rep.WriteJSON(e.stdout)
	} else {
		err = rep.WriteText(e.stdout)
	}
	switch {
	case err != nil:
		return fmt.Errorf("write the report: %w", err)
	case !rep.OK():
		return command.ExitStatus(command.ExitError) // the report says which invariant failed
	}
	return nil
}

// isTerminal: w is a character device (a terminal; /dev/null too, where the
// frames are harmless). Files and pipes are not.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// openSimulateBackend opens the store and the optional results sink through
// the same registry of schemes as `lrosink serve` (openers), so a value
// means the same here; "sqlite" alone is a temporary database.
func openSimulateBackend(ctx context.Context, store, results string, stdout, stderr io.Writer, getenv func(string) string) (simulate.Backend, func(), error) {
	var b simulate.Backend
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	env := urlopen.Env{Project: getenv("GOOGLE_CLOUD_PROJECT"), FirestoreDatabase: getenv("LROSINK_FIRESTORE_DATABASE"),
		FirestoreEmulatorHost: getenv("FIRESTORE_EMULATOR_HOST"), Stdout: stdout,
		// Only what opening says (a results file's repaired last line): the
		// run's own decisions go to its report.
		Log: logging.New(stderr, slog.LevelWarn, getenv("GOOGLE_CLOUD_PROJECT"))}
	if store == "sqlite" {
		dir, err := os.MkdirTemp("", "lrosink-simulate-")
		if err != nil {
			return b, closeAll, fmt.Errorf("temporary store: %w", err)
		}
		closers = append(closers, func() { _ = os.RemoveAll(dir) })
		store = "sqlite:" + dir + "/simulate.db"
	}
	if store == "firestore" && env.FirestoreEmulatorHost == "" {
		return b, closeAll, &command.ConfigError{Err: errors.New("--store firestore needs FIRESTORE_EMULATOR_HOST: the simulator writes thousands of documents; run it against the emulator")}
	}
	o := openers(false)
	// A value no scheme takes is a usage mistake (exit 2), as in every
	// other command; only a failure to open what is well formed is exit 1.
	if err := o.Stores.Check(store, env); err != nil {
		closeAll()
		return b, func() {}, &command.ConfigError{Err: fmt.Errorf("--store: %w", err)}
	}
	if results != "" {
		if err := o.Results.Check(results, env); err != nil {
			closeAll()
			return b, func() {}, &command.ConfigError{Err: fmt.Errorf("--results: %w", err)}
		}
	}
	l, closeLedger, err := o.Stores.Open(ctx, store, env)
	if err != nil {
		closeAll()
		return b, func() {}, configIfBadPath(fmt.Errorf("--store: %w", err))
	}
	closers = append(closers, func() { _ = closeLedger() })
	name, _, _ := strings.Cut(store, ":")
	b = simulate.Backend{Name: name, Ledger: l}
	if s, ok := ledger.As[*fsledger.Store](l); ok {
		b.Counts = func() (int64, int64) { r, w, _ := s.Counts().Snapshot(); return r, w }
	}
	if results != "" {
		out, closeSink, err := o.Results.Open(ctx, results, env)
		if err != nil {
			closeAll()
			return b, func() {}, fmt.Errorf("--results: %w", err)
		}
		closers = append(closers, func() { _ = closeSink() })
		b.Results = out
		scheme, _, _ := strings.Cut(results, ":")
		b.Name += "+" + scheme
	}
	return b, closeAll, nil
}
