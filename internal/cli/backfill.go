package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/fsledger"
)

// bucketBackfiller is a store whose documents may lack the bucket field
// (Firestore: documents written before shards).
type bucketBackfiller interface {
	BackfillBuckets(ctx context.Context, pageSize int) (fsledger.BackfillResult, error)
}

func opsBackfillShardsDoc() command.Doc {
	return command.Doc{
		Path: "ops backfill-shards",
		Args: "[--page N] [flags]",
		Summary: `Write the bucket field (package shard: one of 64, from the document id) on every
pending operation written before it existed, so that shard passes over a range of
buckets see it. Run it once after upgrading a Firestore deployment to more than one
reconcile shard; a single shard needs none (its passes use the unsharded queries), and
every later write of an operation writes the field anyway. It pages through the
pending operations by submission time, one read each and one fenced write for each
that lacks the field; running it again writes nothing. SQLite needs none: its
migration fills the column on open. Prints scanned, written and changed (moved by a
concurrent write, which wrote the field itself) as one JSON line.`,
		Env: storeEnvDoc,
		Examples: []string{
			"LROSINK_STORE=firestore lrosink ops backfill-shards",
		},
	}
}

func runOpsBackfillShards(ctx context.Context, e *env, args []string) error {
	fs := command.NewFlagSet("ops backfill-shards")
	page := fs.Int("page", 500, "`N` pending operations read per query")
	storeFlag(fs)
	if _, err := opsBackfillShardsDoc().Parse(e.stdout, fs, args); err != nil {
		return err
	}
	if *page < 1 || *page > maxListLimit {
		return command.Usagef("--page must be 1 to %d", maxListLimit)
	}
	l, cfg, closeFn, err := e.openReadLedger(ctx, fs)
	if err != nil {
		return err
	}
	defer closeFn()
	type report struct {
		Scanned int    `json:"scanned"`
		Written int    `json:"written"`
		Changed int    `json:"changed"`
		Note    string `json:"note,omitempty"`
	}
	// The store itself, not its bounded wrapper: the backfill pages for as
	// long as it takes.
	b, ok := ledger.As[bucketBackfiller](l)
	if !ok {
		return writeLine(e.stdout, report{Note: cfg.Store + " keeps every operation's bucket already"})
	}
	res, err := b.BackfillBuckets(ctx, *page)
	if err != nil {
		return fmt.Errorf("backfill buckets (written so far %d of %d scanned): %w", res.Written, res.Scanned, err)
	}
	return writeLine(e.stdout, report{Scanned: res.Scanned, Written: res.Written, Changed: res.Changed})
}

// writeLine writes x as one JSON line.
func writeLine(w io.Writer, x any) error {
	if err := json.NewEncoder(w).Encode(x); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}
