package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/opname"
)

func replayDoc() command.Doc {
	return command.Doc{
		Path: "replay",
		Args: "NAME [--kind K] [--json] [flags]",
		Arg:  "NAME",
		Summary: `Publish a settled operation's results message again, on purpose (to recover a
consumer), with a new replay_id attribute; the replay is recorded in the ledger and
the operation's state is not changed. Prints the replay_id. An operation that has not
settled has nothing to replay: exit status 1.

The message goes only to the results sink named by LROSINK_RESULTS or --results (the one
your consumers read); without one, replay refuses (exit status 2) and publishes nothing.
With LROSINK_RESULTS=stdout the message is printed as a JSON line before the replay_id.
--json prints {"operation","replay_id"} as one line instead of the replay_id.`,
		Env: storeEnvDoc + "\n  LROSINK_RESULTS      pubsub:projects/P/topics/T, file:PATH or stdout (required)",
		Examples: []string{
			"lrosink replay batches/abc123 --results pubsub:projects/my-project/topics/results",
			"LROSINK_RESULTS=file:results.jsonl lrosink replay batches/abc123",
		},
	}
}

func runReplay(ctx context.Context, e *env, args []string) error {
	fs := command.NewFlagSet("replay")
	kind := kindFlag(fs)
	asJSON := fs.Bool("json", false, `print {"operation","replay_id"} as one JSON line instead of the replay_id`)
	storeFlag(fs)
	fs.String("results", "", "results `SPEC`: stdout, file:PATH or pubsub:projects/P/topics/T (env LROSINK_RESULTS; required)")
	pos, err := replayDoc().Parse(e.stdout, fs, args)
	if err != nil {
		return err
	}
	name, err := operationName(pos[0], *kind)
	if err != nil {
		return err
	}
	if err := requireResults(e.getenv, fs, "replay"); err != nil {
		return err
	}
	a, err := e.toolApp(ctx, fs, false)
	if err != nil {
		return err
	}
	id, err := a.Door.Replay(ctx, name.Canonical, name.Kind)
	if errors.Is(err, ingest.ErrNotSettled) {
		err = notSettled(ctx, a.Ledger, name)
	}
	if id != "" {
		// Published even if recording it failed: the consumer sees this id.
		if *asJSON {
			_ = writeLine(e.stdout, map[string]string{"operation": name.Canonical, "replay_id": id})
		} else {
			fmt.Fprintln(e.stdout, id)
		}
	}
	if cerr := a.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	return err
}

// notSettled says why there is nothing to replay.
func notSettled(ctx context.Context, l ledger.Reads, name opname.Name) error {
	id, err := opname.DocID(name.Key())
	if err != nil {
		return fmt.Errorf("%s: %w", name.Canonical, err)
	}
	op, err := l.GetOperation(ctx, id)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return fmt.Errorf("%s is not in the ledger, so it has not settled: nothing to replay", name.Canonical)
	case err != nil:
		return fmt.Errorf("%s has not settled (its state could not be read: %w)", name.Canonical, err)
	case op.State.Terminal():
		// Claims carry the message and are deleted by their TTL long after
		// Gemini's retries end; without one there is no message to resend.
		return fmt.Errorf("%s settled (%s) but its claim, which holds the message, has expired: nothing to replay", name.Canonical, op.State)
	default:
		return fmt.Errorf("%s has not settled (state %s): nothing to replay", name.Canonical, op.State)
	}
}
