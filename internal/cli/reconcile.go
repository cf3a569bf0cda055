package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
)

// reconcileTimeout bounds `lrosink reconcile`'s pass, which stops early with
// what it did a little before.
const reconcileTimeout = 5 * time.Minute

func reconcileDoc() command.Doc {
	return command.Doc{
		Path: "reconcile",
		Args: "[flags]",
		Summary: `Run one reconcile pass against the configured ledger, as serve's loop and the Reconcile
function do: retry claims whose lease ran out or that were released, ask Gemini about
pending operations whose next check is due, adopt recent batch jobs missing from the
ledger, and count stuck operations. Prints the pass's summary as one JSON line
{"checked","settled","still_pending","claims_retried","stuck","errors","adopted"} on
stdout. Results messages the pass publishes go only to the sink named by LROSINK_RESULTS
or --results; without one, reconcile refuses (exit status 2) and runs no pass. With
LROSINK_RESULTS=stdout they are printed before the summary.

Exit status 0 when the pass ran (failures on single operations are counted in
"errors"), 1 when the ledger could not be queried. Stops with what it did after 5m.`,
		Env: storeEnvDoc + `
  LROSINK_RESULTS      where settled operations are published (required)
  GEMINI_API_KEY       lets the pass poll Gemini (without it, it only retries claims)
  GOOGLE_GEMINI_BASE_URL, LROSINK_STUCK_AFTER, LROSINK_CLAIM_LEASE  see the contract`,
		Examples: []string{
			"lrosink reconcile --store firestore --results pubsub:projects/my-project/topics/results",
			"GEMINI_API_KEY=... lrosink reconcile --results file:results.jsonl | jq .settled",
		},
	}
}

func runReconcile(ctx context.Context, e *env, args []string) error {
	fs := command.NewFlagSet("reconcile")
	storeFlag(fs)
	fs.String("results", "", "results `SPEC`: stdout, file:PATH or pubsub:projects/P/topics/T (env LROSINK_RESULTS; required)")
	fs.String("stuck-after", "", "count operations pending longer than `DURATION` as stuck (env LROSINK_STUCK_AFTER; default 6h)")
	if _, err := reconcileDoc().Parse(e.stdout, fs, args); err != nil {
		return err
	}
	if err := requireResults(e.getenv, fs, "reconcile"); err != nil {
		return err
	}
	a, err := e.toolApp(ctx, fs, false)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()
	s, err := a.Reconciler.Pass(pctx)
	// Close drains the door and flushes the sink before the summary: what
	// it counts as settled has been published.
	if cerr := a.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close: %w", cerr))
	}
	// One line, like the results lines that may precede it on stdout.
	if werr := json.NewEncoder(e.stdout).Encode(s); werr != nil {
		err = errors.Join(err, fmt.Errorf("write the summary: %w", werr))
	}
	if err != nil {
		return fmt.Errorf("reconcile pass: %w", err)
	}
	return nil
}
