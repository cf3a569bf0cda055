package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/register"
)

func registerDoc() command.Doc {
	return command.Doc{
		Path: "register",
		Args: "NAME [--kind K] [--meta k=v ...] [--create] [--json] [flags]",
		Arg:  "NAME",
		Summary: `Put an operation in the ledger as PENDING, through the same ingest door as webhooks,
so the reconciler polls it after LROSINK_GRACE if no webhook settles it. Registering a
known operation leaves its state untouched and adds the --meta keys it lacks (keys
already stored are kept; a settled operation's results message does not change).
Prints "created NAME" or "already known NAME", NAME as given, normalized (a Veo
operation keeps its models/M/operations/ID; the ledger keys it by operations/ID).

A settled operation whose results message is still owed (its publish failed) is
published to the sink named by LROSINK_RESULTS or --results. Without one, register
records the registration, publishes nothing, and says the message is still owed: the
next reconcile pass (serve's loop or the Reconcile function) publishes it.

NAME is any form Gemini uses (batches/ID, operations/ID, models/M/operations/ID,
interactions/ID); a bare ID needs --kind.

The ledger it used is named on stderr. A SQLite ledger that does not exist is
refused (exit 2: "no ledger at PATH"): only serve creates one, unless --create
says a new one is meant. --json prints {"operation","created","state",...} as one
line instead.`,
		Env: storeEnvDoc + "\n  LROSINK_RESULTS      where an owed results message is published (unset: left to reconcile)",
		Examples: []string{
			"lrosink register batches/abc123",
			"lrosink register abc123 --kind batch --meta job=nightly --meta owner=data-team",
			"lrosink register models/veo-3.0-generate-001/operations/xyz --store sqlite:/var/lib/lrosink/ledger.db",
			"lrosink register batches/abc123 --store sqlite:new.db --create --json",
		},
	}
}

func runRegister(ctx context.Context, e *env, args []string) error {
	fs := command.NewFlagSet("register")
	kind := kindFlag(fs)
	meta := metaValue{}
	fs.Var(meta, "meta", "user metadata `k=v`, echoed in the results message; repeatable")
	storeFlag(fs)
	asJSON := fs.Bool("json", false, "print one JSON line instead of text")
	create := fs.Bool("create", false, "create the SQLite ledger if there is none at the path (by default only serve creates one)")
	fs.String("results", "", "results `SPEC` for an owed message: pubsub:projects/P/topics/T, file:PATH or stdout (env LROSINK_RESULTS; unset: left to reconcile)")
	pos, err := registerDoc().Parse(e.stdout, fs, args)
	if err != nil {
		return err
	}
	req := register.Request{Name: pos[0], Kind: *kind, LeaveOwed: !resultsConfigured(e.getenv, fs)}
	if len(meta) > 0 {
		req.Metadata = meta
	}
	// Checked before the ledger is opened, so a usage error costs nothing.
	if _, err := parseKindFlag(*kind); err != nil {
		return err
	}
	name, err := req.Validate()
	if err != nil {
		return command.Usagef("%v", err)
	}
	a, err := e.toolApp(ctx, fs, *create)
	if err != nil {
		return err
	}
	res, err := register.Register(ctx, a.Door, req)
	if cerr := a.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	var inv *event.InvalidError
	switch {
	case errors.As(err, &inv):
		return command.Usagef("%v", err)
	case err != nil:
		return fmt.Errorf("register %s: %w", pos[0], err)
	case *asJSON:
		return writeLine(e.stdout, map[string]any{"operation": res.Operation, "created": res.Created, "state": res.State,
			"metadata_merged": res.MetadataMerged, "published": res.Published, "effect_owed": res.EffectOwed})
	case res.Created:
		// The name as given (a Veo operation's model path), not only the
		// canonical operations/ID the ledger keys it by.
		fmt.Fprintf(e.stdout, "created %s\n", name.APIName)
	default:
		note := ""
		if res.MetadataMerged {
			note = "; metadata keys it lacked added"
		}
		if res.Published {
			// The door found a settled operation whose results message was
			// still owed (a crashed holder's claim) and published it.
			note += "; its owed results message was published"
		}
		if res.EffectOwed {
			note += "; its results message is still owed and was not published here (LROSINK_RESULTS is not set): the next reconcile pass retries it"
		}
		fmt.Fprintf(e.stdout, "already known %s (%s, state untouched%s)\n", name.APIName, res.State, note)
	}
	return nil
}

// kindFlag adds --kind to a command that takes an operation NAME.
func kindFlag(fs *flag.FlagSet) *string {
	return fs.String("kind", "", "operation `KIND` of a bare ID: batch, video or interaction")
}

// operationName is the NAME argument read with --kind; either may be a
// usage error.
func operationName(arg, kindFlag string) (opname.Name, error) {
	kind, err := parseKindFlag(kindFlag)
	if err != nil {
		return opname.Name{}, err
	}
	name, err := opname.Normalize(arg, kind)
	if err != nil {
		return opname.Name{}, command.Usagef("%v", err)
	}
	return name, nil
}

// parseKindFlag validates --kind; empty means "from the name".
func parseKindFlag(s string) (opname.Kind, error) {
	if s == "" {
		return opname.KindUnknown, nil
	}
	k, ok := opname.ParseKind(s)
	if !ok {
		hint := ""
		if k := command.Suggest(s, []string{"batch", "video", "interaction"}); k != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", k)
		}
		return opname.KindUnknown, command.Usagef("--kind %q: want batch, video or interaction%s", s, hint)
	}
	return k, nil
}
