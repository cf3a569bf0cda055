// Command worker is an example downstream consumer of lrosink's results,
// built on package consume: it runs a processing function effectively once
// per operation (per idempotency_key, and once more per deliberate replay).
//
// Each key is claimed in a store with a lease and a fencing token, the
// handler runs, and DONE is committed only if the claim is still this run's.
// A crash mid-handler leaves the claim to be seized after its lease (-lease)
// and the handler to run again; a handler error releases the key and nacks
// the message for redelivery. See the consume package documentation.
//
// Usage:
//
//	# production: the results subscription (terraform output results_subscription), keys in Firestore
//	go run ./examples/worker -subscription projects/P/subscriptions/lrosink-results-worker
//	# local development against `lrosink serve` (LROSINK_RESULTS=stdout, or file:PATH)
//	lrosink serve | go run ./examples/worker -lines - -store sqlite:worker.db
//	go run ./examples/worker -lines results.jsonl -store sqlite:worker.db
//
// On Google Cloud the account needs roles/pubsub.subscriber on the
// subscription (terraform variable results_subscribers) and
// roles/datastore.user on the Firestore project of the store.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"

	"github.com/lrosink/lrosink/consume"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2) // run has said what is wrong and shown the usage
	case err != nil:
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// process is the example's work: one JSON line per result on stdout.
// Replace it with the real work; make its side effects idempotent on d.Key
// (a run cut off before its DONE commit runs again).
func process(out io.Writer) consume.Handler {
	enc := json.NewEncoder(out)
	return func(_ context.Context, d consume.Delivery) error {
		r := d.Result
		return enc.Encode(map[string]any{"operation": r.Operation, "state": r.State, "kind": r.Kind,
			"settled_by": r.SettledBy, "replay_id": d.ReplayID, "output": r.Output, "error": r.Error})
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sub := fs.String("subscription", "", "results subscription projects/P/subscriptions/S (or an ID with -project)")
	lines := fs.String("lines", "", "read results lines instead: - for stdin, or a file to follow (LROSINK_RESULTS=file:PATH)")
	project := fs.String("project", os.Getenv("GOOGLE_CLOUD_PROJECT"), "project of the subscription and of Firestore")
	storeSpec := fs.String("store", "firestore:processed", "where keys are claimed: firestore:COLLECTION or sqlite:PATH")
	lease := fs.Duration("lease", consume.DefaultLease, "claim lease: longer than the longest processing")
	outstanding := fs.Int("max-outstanding", 10, "Pub/Sub messages processed concurrently")
	// usage reports a bad invocation with the usage, as fs.Parse does.
	usage := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "worker: "+format+"\n", a...)
		fs.Usage()
		return errUsage
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return err
	} else if err != nil {
		return errUsage // fs.Parse printed the error and the usage
	}
	if (*sub == "") == (*lines == "") {
		return usage("give exactly one of -subscription and -lines")
	}
	if !validStore(*storeSpec) {
		return usage("-store %q: want firestore:COLLECTION or sqlite:PATH", *storeSpec)
	}
	if p, ok := projectOf(*sub); ok && *project == "" {
		*project = p
	}

	store, closeStore, err := openStore(ctx, *storeSpec, *project)
	if err != nil {
		return err
	}
	defer closeStore()

	var src consume.Source
	switch {
	case *lines == "-":
		src = consume.Lines(stdin)
	case *lines != "":
		src = consume.TailFile(*lines)
	default:
		if *project == "" {
			return errors.New("-project is required (or GOOGLE_CLOUD_PROJECT, or a full subscription name)")
		}
		ps, err := pubsub.NewClient(ctx, *project)
		if err != nil {
			return fmt.Errorf("pubsub: %w", err)
		}
		defer ps.Close()
		s := ps.Subscriber(*sub)
		s.ReceiveSettings.MaxOutstandingMessages = *outstanding
		src = consume.PubSub(s)
	}

	// Cloud Logging reads severity and message (slog writes level and msg).
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{ReplaceAttr: cloudLogging}))
	c := &consume.Consumer{Store: store, Handler: process(stdout), Lease: *lease,
		OnOutcome: func(o consume.Outcome) {
			attrs := []any{"outcome", string(o.Kind), "key", o.Key, "message_id", o.MessageID, "attempt", o.Attempt}
			level := slog.LevelInfo
			if o.Err != nil {
				attrs, level = append(attrs, "error", o.Err.Error()), slog.LevelWarn
			}
			if o.Kind == consume.Invalid {
				// Not an lrosink result: something else publishes to
				// the results topic. It is not retried (see consume.Invalid).
				level = slog.LevelError
			}
			log.Log(context.Background(), level, "result delivery", attrs...)
		}}
	if err := c.Run(ctx, src); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// cloudLogging renames slog's top-level keys to the ones Cloud Logging
// lifts out of a JSON line, as lrosink's own logs do.
func cloudLogging(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.LevelKey:
		l, _ := a.Value.Any().(slog.Level)
		sev := map[slog.Level]string{slog.LevelDebug: "DEBUG", slog.LevelInfo: "INFO", slog.LevelWarn: "WARNING", slog.LevelError: "ERROR"}[l]
		if sev == "" {
			sev = "DEFAULT"
		}
		return slog.String("severity", sev)
	case slog.MessageKey:
		a.Key = "message"
	}
	return a
}

// validStore: spec is one of the forms openStore opens.
func validStore(spec string) bool {
	kind, arg, _ := strings.Cut(spec, ":")
	return (kind == "sqlite" || kind == "firestore") && arg != ""
}

func openStore(ctx context.Context, spec, project string) (consume.Store, func(), error) {
	kind, arg, _ := strings.Cut(spec, ":")
	switch {
	case kind == "sqlite" && arg != "":
		s, err := consume.OpenSQLite(ctx, arg)
		if err != nil {
			return nil, nil, err
		}
		return s, func() { _ = s.Close() }, nil
	case kind == "firestore" && arg != "":
		if project == "" {
			return nil, nil, errors.New("-store firestore needs -project (or GOOGLE_CLOUD_PROJECT)")
		}
		c, err := firestore.NewClient(ctx, project)
		if err != nil {
			return nil, nil, fmt.Errorf("firestore: %w", err)
		}
		return consume.NewFirestoreStore(c, arg), func() { _ = c.Close() }, nil
	}
	return nil, nil, fmt.Errorf("-store %q: want firestore:COLLECTION or sqlite:PATH", spec)
}

// projectOf extracts P from projects/P/subscriptions/S.
func projectOf(sub string) (string, bool) {
	p := strings.Split(sub, "/")
	if len(p) == 4 && p[0] == "projects" && p[2] == "subscriptions" && p[1] != "" {
		return p[1], true
	}
	return "", false
}

// errUsage: the invocation is wrong; the usage has been shown (exit 2).
var errUsage = errors.New("usage")
