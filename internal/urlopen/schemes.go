package urlopen

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/fsledger"
	"github.com/lrosink/lrosink/internal/sink"
)

// EmulatorProject is the project used against the Firestore emulator when
// GOOGLE_CLOUD_PROJECT is not set: the emulator accepts any project, and a
// fixed one lets `serve`, `ops` and `replay` see the same data.
const EmulatorProject = "lrosink-local"

// FirestoreProject is the one project fallback order for Firestore:
//  1. GOOGLE_CLOUD_PROJECT;
//  2. with FIRESTORE_EMULATOR_HOST set, EmulatorProject;
//  3. otherwise an error naming GOOGLE_CLOUD_PROJECT. There is no detection
//     from credentials or the metadata server: a deployment says which
//     project it writes to, and start-up needs no network call to find out.
func FirestoreProject(env Env) (string, error) {
	switch {
	case env.Project != "":
		return env.Project, nil
	case env.FirestoreEmulatorHost != "":
		return EmulatorProject, nil
	default:
		return "", &VarError{Var: "GOOGLE_CLOUD_PROJECT", Err: errors.New("required for LROSINK_STORE=firestore (unless FIRESTORE_EMULATOR_HOST is set)")}
	}
}

// FirestoreClient opens the one kind of Firestore client lrosink uses: the
// project from FirestoreProject, the database env.FirestoreDatabase
// ("(default)" when empty). The Google client itself connects to
// FIRESTORE_EMULATOR_HOST when that is set.
func FirestoreClient(ctx context.Context, env Env) (*firestore.Client, error) {
	project, err := FirestoreProject(env)
	if err != nil {
		return nil, err
	}
	db := env.FirestoreDatabase
	if db == "" {
		db = firestore.DefaultDatabaseID
	}
	c, err := firestore.NewClientWithDatabase(ctx, project, db)
	if err != nil {
		return nil, fmt.Errorf("firestore client for project %s, database %s: %w", project, db, err)
	}
	return c, nil
}

// firestoreWhere names the Firestore a client talks to, for errors.
func firestoreWhere(env Env) string {
	db := env.FirestoreDatabase
	if db == "" {
		db = firestore.DefaultDatabaseID
	}
	if env.FirestoreEmulatorHost != "" {
		return "Firestore emulator at " + env.FirestoreEmulatorHost + " (FIRESTORE_EMULATOR_HOST)"
	}
	return "Firestore at firestore.googleapis.com (project " + env.Project + ", database " + db + ")"
}

// Firestore is the `firestore` ledger scheme.
func Firestore() Scheme[ledger.Ledger] {
	return Scheme[ledger.Ledger]{
		Name: "firestore",
		Form: "firestore",
		Check: func(_ string, env Env) error {
			_, err := FirestoreProject(env)
			return err
		},
		Open: func(ctx context.Context, _ string, env Env) (ledger.Ledger, func() error, error) {
			c, err := FirestoreClient(ctx, env)
			if err != nil {
				return nil, nil, err
			}
			// The client retries an unreachable host until the call's
			// context ends: every call gets a bound, and its error names
			// the host.
			return ledger.NewBounded(fsledger.New(c, nil).WithRetention(env.Retention), env.StoreTimeout, firestoreWhere(env)), c.Close, nil
		},
	}
}

// PubSub is the `pubsub:projects/P/topics/T` results scheme.
func PubSub() Scheme[sink.Sink] {
	return Scheme[sink.Sink]{
		Name: "pubsub",
		Form: "pubsub:projects/P/topics/T",
		Check: func(topic string, _ Env) error {
			_, err := sink.ParseTopic(topic)
			return err
		},
		Open: func(ctx context.Context, topic string, _ Env) (sink.Sink, func() error, error) {
			p, err := sink.OpenPubSub(ctx, topic)
			if err != nil {
				return nil, nil, err
			}
			return p, p.Close, nil
		},
	}
}

// File is the `file:PATH` results scheme (JSON lines, appended).
func File() Scheme[sink.Sink] {
	return Scheme[sink.Sink]{
		Name: "file",
		Form: "file:PATH",
		Check: func(path string, _ Env) error {
			if path == "" {
				return errors.New("empty path")
			}
			return nil
		},
		Open: func(_ context.Context, path string, env Env) (sink.Sink, func() error, error) {
			f, err := sink.NewFile(path, env.Log)
			if err != nil {
				return nil, nil, err
			}
			return f, f.Close, nil
		},
	}
}

// Stdout is the `stdout` results scheme: JSON lines on env.Stdout.
func Stdout() Scheme[sink.Sink] {
	return Scheme[sink.Sink]{
		Name:  "stdout",
		Form:  "stdout",
		Check: func(string, Env) error { return nil },
		Open: func(_ context.Context, _ string, env Env) (sink.Sink, func() error, error) {
			if env.Stdout == nil {
				return nil, nil, errors.New("no stdout writer given")
			}
			w := sink.NewWriter(env.Stdout)
			return w, w.Close, nil
		},
	}
}
