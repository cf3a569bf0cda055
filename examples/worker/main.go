// Command worker is an example consumer of lrosink's results: it pulls the
// results subscription (terraform output results_subscription) and runs a
// processing function at most once per operation.
//
// Why both exactly-once delivery and a dedupe store: exactly-once delivery
// (pull subscriptions only) stops Pub/Sub from redelivering a message whose
// ack succeeded, but lrosink can publish the same result twice (a crash
// after the publish and before its DONE commit), and those are two messages
// with two message IDs. Both carry the same idempotency_key attribute, so
// the worker claims that key in Firestore (collection "processed", one
// document per key, Create = atomic claim) BEFORE running the handler:
//
//	redelivery / duplicate publish / concurrent copy -> Create fails AlreadyExists -> ack, skip
//	crash after the claim                            -> key stays claimed: at most once, never twice
//	handler returns Retryable(err) (no side effect)  -> claim deleted, nack: redelivered and retried
//
// Usage:
//
//	go run ./examples/worker -project my-project -subscription lrosink-results-worker
//
// The account running it needs roles/pubsub.subscriber on the subscription
// (terraform variable results_subscribers) and roles/datastore.user on the
// Firestore project holding the "processed" collection.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		project      = flag.String("project", os.Getenv("GOOGLE_CLOUD_PROJECT"), "project of the results subscription (default $GOOGLE_CLOUD_PROJECT)")
		subscription = flag.String("subscription", "", "results subscription: ID or projects/P/subscriptions/S (required)")
		fsProject    = flag.String("firestore-project", "", "project of the Firestore database holding processed keys (default -project)")
		database     = flag.String("database", "(default)", "Firestore database of the processed keys")
		collection   = flag.String("collection", "processed", "Firestore collection of the processed keys")
		outstanding  = flag.Int("max-outstanding", 10, "messages processed concurrently")
	)
	flag.Parse()
	if *subscription == "" {
		return errors.New("-subscription is required")
	}
	if *project == "" {
		if p, ok := projectOf(*subscription); ok {
			*project = p
		} else {
			return errors.New("-project is required (or GOOGLE_CLOUD_PROJECT, or a full subscription name)")
		}
	}
	if *fsProject == "" {
		*fsProject = *project
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	fs, err := firestore.NewClientWithDatabase(ctx, *fsProject, *database)
	if err != nil {
		return fmt.Errorf("firestore: %w", err)
	}
	defer fs.Close()
	ps, err := pubsub.NewClient(ctx, *project)
	if err != nil {
		return fmt.Errorf("pubsub: %w", err)
	}
	defer ps.Close()

	sub := ps.Subscriber(*subscription)
	sub.ReceiveSettings.MaxOutstandingMessages = *outstanding

	w := &Worker{
		Dedupe: &FirestoreDeduper{Client: fs, Collection: *collection},
		Handle: printResult,
		OnOutcome: func(o Outcome) {
			attrs := []any{"outcome", string(o.Kind), "key", o.Key, "message_id", o.MessageID}
			if o.Err != nil {
				attrs = append(attrs, "error", o.Err.Error())
			}
			if o.AckErr != nil {
				attrs = append(attrs, "ack_error", o.AckErr.Error())
			}
			level := slog.LevelInfo
			if o.Kind == Failed || o.Kind == Invalid || o.AckErr != nil {
				level = slog.LevelWarn
			}
			log.Log(context.Background(), level, "result delivery", attrs...)
		},
	}
	log.Info("receiving", "subscription", sub.String())
	if err := w.Run(ctx, sub); err != nil && ctx.Err() == nil {
		return fmt.Errorf("receive: %w", err)
	}
	return nil
}

// printResult is the example's processing: one JSON line per result on
// stdout. Replace it with the real work (it runs at most once per key).
func printResult(_ context.Context, r Result, m Meta) error {
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"operation": r.Operation, "state": r.State, "kind": r.Kind,
		"settled_by": r.SettledBy, "replay_id": m.ReplayID, "error": r.Error,
	})
}

// projectOf extracts P from projects/P/subscriptions/S.
func projectOf(sub string) (string, bool) {
	p := strings.Split(sub, "/")
	if len(p) == 4 && p[0] == "projects" && p[2] == "subscriptions" && p[1] != "" {
		return p[1], true
	}
	return "", false
}
