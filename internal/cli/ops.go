package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/humantime"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
)

// maxListLimit bounds one `ops list`: every query is bounded (never a scan).
const maxListLimit = 1000

func opsDoc() command.Doc {
	return command.Doc{
		Path:    "ops",
		Summary: "Inspect the ledger.",
		Env:     storeEnvDoc,
		Examples: []string{
			"lrosink ops list",
			"lrosink ops show batches/abc123",
			"lrosink ops list --help",
		},
	}
}

// runOps is the group `lrosink ops`.
func runOps(ctx context.Context, e *env, args []string) error {
	g := &command.Group{Doc: opsDoc(), Stdout: e.stdout, Stderr: e.stderr, Commands: map[string]command.Command{
		"list": command.Func("operations, newest submission first, as a table or JSON", e, runOpsList),
		"show": command.Func("one operation: state, timestamps, claim, event history, replays, output", e, runOpsShow),
		"backfill-shards": command.Func("write the shard bucket on pending operations stored before it (Firestore, once, before sharding)",
			e, runOpsBackfillShards),
	}}
	return command.Status(g.Run(ctx, args))
}

func opsListDoc() command.Doc {
	return command.Doc{
		Path: "ops list",
		Args: "[--state S] [--kind K] [--name PREFIX] [--stuck] [--limit N] [--page P] [--json] [flags]",
		Summary: `List operations, newest submission first: NAME (as submitted: a Veo operation's
models/M/operations/ID), KIND, STATE, VERSION, SUBMITTED,
AGE (since submission), SETTLED_BY and LAST_CHECK (the last reconcile answer that was
not a state, e.g. not-found). --state and --kind keep the operations in that state
or of that kind. --name PREFIX keeps those whose name starts with PREFIX
(batches/bench_, or bench_ for any kind; a Veo operation by the name shown:
models/veo, models/M/operations/ID), listed in name order; it reads at most
a few pages of names, and says so when more may match. When nothing matches, it
says "no operations match". --stuck keeps only the operations still pending after
LROSINK_STUCK_AFTER, and lists after them the intents bound to no Gemini
operation past LROSINK_INTENT_GRACE (KEY, KIND, MODEL, DISPLAY_NAME, RECORDED,
AGE; with --json one object each, told apart by its "intent" field). Pages hold
--limit rows; the line after the table says how many rows are on later pages
(on stderr with --json).`,
		Env: storeEnvDoc + "\n  LROSINK_STUCK_AFTER  pending longer than this is stuck (default 6h)" +
			"\n  LROSINK_INTENT_GRACE an intent bound to no operation longer than this is alerted (default 1h)",
		Examples: []string{
			"lrosink ops list",
			"lrosink ops list --state PENDING --limit 200",
			"lrosink ops list --kind video --state FAILED",
			"lrosink ops list --name batches/nightly-",
			"lrosink ops list --name models/veo-3.0-generate-001/operations/",
			"lrosink ops list --stuck --stuck-after 2h",
			"lrosink ops list --limit 100 --page 3",
			"lrosink ops list --json | jq -r '.[] | select(.state==\"FAILED\") | .name'",
		},
	}
}

func runOpsList(ctx context.Context, e *env, args []string) error {
	fs := command.NewFlagSet("ops list")
	stateFlag := fs.String("state", "", "only operations in `STATE`: "+statesList())
	kindFlag := fs.String("kind", "", "only operations of `KIND`: batch, video or interaction")
	namePrefix := fs.String("name", "", "only operations whose name starts with `PREFIX` (in name order)")
	stuck := fs.Bool("stuck", false, "only operations pending longer than the stuck threshold")
	limit := fs.Int("limit", 50, "show at most `N` operations (1-1000)")
	page := fs.Int("page", 1, "show page `P` of --limit rows (1 is the newest)")
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	storeFlag(fs)
	fs.String("stuck-after", "", "stuck threshold `DURATION` for --stuck (env LROSINK_STUCK_AFTER; default 6h)")
	if _, err := opsListDoc().Parse(e.stdout, fs, args); err != nil {
		return err
	}
	switch {
	case *limit < 1 || *limit > maxListLimit:
		return command.Usagef("--limit %d: want 1 to %d", *limit, maxListLimit)
	case *page < 1:
		return command.Usagef("--page %d: want 1 or more", *page)
	case *stuck && *stateFlag != "":
		return command.Usagef("--stuck and --state cannot be combined (stuck operations are pending)")
	}
	state := lifecycle.State(strings.ToUpper(strings.TrimSpace(*stateFlag)))
	if state != "" && !state.Known() {
		hint := ""
		if st := command.Suggest(string(state), strings.Split(statesList(), ", ")); st != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", st)
		}
		return command.Usagef("--state %q: want one of %s%s", *stateFlag, statesList(), hint)
	}
	kind, err := parseKindFlag(strings.ToLower(strings.TrimSpace(*kindFlag)))
	if err != nil {
		return err
	}
	prefix := strings.TrimSpace(*namePrefix)
	if prefix != "" && *page != 1 {
		return command.Usagef("--name lists the first --limit matches in name order: narrow the PREFIX instead of --page")
	}
	l, cfg, closeFn, err := e.openReadLedger(ctx, fs)
	if err != nil {
		return err
	}
	defer closeFn()
	f := ledger.Filter{State: state, Kind: kind}
	if *stuck {
		f.StuckAt = e.now().Add(-cfg.StuckAfter)
	}
	var ops []ledger.Operation
	rest := ""
	if prefix != "" {
		var more bool
		if ops, more, err = searchNames(ctx, l, prefix, f, *limit); err != nil {
			return err
		}
		if more {
			rest = fmt.Sprintf("… more may match; narrow --name %s or raise --limit\n", prefix)
		}
	} else {
		var more int64
		if ops, more, err = listPage(ctx, l, f, *page, *limit); err != nil {
			return err
		}
		if more > 0 {
			rest = fmt.Sprintf("… and %d more; use --page %d\n", more, *page+1)
		}
	}
	var intents []intentView
	var moreIntents int64
	if *stuck && *page == 1 {
		if intents, moreIntents, err = unboundIntents(ctx, l, e.now(), cfg.IntentGrace, *limit); err != nil {
			return err
		}
	}
	if *asJSON {
		fmt.Fprint(e.stderr, rest)
		if moreIntents > 0 {
			fmt.Fprintf(e.stderr, "… and %d more unbound intents\n", moreIntents)
		}
		rows := make([]any, 0, len(ops)+len(intents))
		for _, v := range opViews(ops) {
			rows = append(rows, v)
		}
		for _, v := range intents {
			rows = append(rows, v)
		}
		return writeJSON(e.stdout, rows)
	}
	if err := writeList(e.stdout, ops, e.now()); err != nil {
		return err
	}
	if _, err = fmt.Fprint(e.stdout, rest); err != nil {
		return err
	}
	if *stuck && *page == 1 {
		return writeIntents(e.stdout, intents, moreIntents, cfg.IntentGrace)
	}
	return nil
}

// intentView is an unbound intent as `ops list --stuck` shows it
// (CONTRACT.md §1, §5): never its metadata.
type intentView struct {
	Intent      string    `json:"intent"`
	Kind        string    `json:"kind"`
	Model       string    `json:"model"`
	DisplayName string    `json:"display_name"`
	State       string    `json:"state"`
	CreatedAt   time.Time `json:"created_at"`
	GraceUntil  time.Time `json:"grace_until"`
	// AgeSeconds is how long it has been recorded, unbound.
	AgeSeconds int64      `json:"age_seconds"`
	AlertedAt  *time.Time `json:"alerted_at"`
}

// unboundIntents reads up to limit intents bound to no operation past
// grace at now, oldest first, and counts the rest.
func unboundIntents(ctx context.Context, l ledger.Queries, now time.Time, grace time.Duration, limit int) ([]intentView, int64, error) {
	cutoff := now.Add(-grace)
	ins, err := l.UnboundIntents(ctx, cutoff, ledger.IntentCursor{}, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("list unbound intents: %w", err)
	}
	n, err := l.CountUnboundIntents(ctx, cutoff)
	if err != nil {
		return nil, 0, fmt.Errorf("count unbound intents: %w", err)
	}
	out := make([]intentView, len(ins))
	for i, in := range ins {
		out[i] = intentView{Intent: in.Key, Kind: string(in.Kind), Model: in.Model, DisplayName: in.DisplayName, State: "unbound",
			CreatedAt: in.CreatedAt, GraceUntil: in.CreatedAt.Add(grace), AgeSeconds: int64(now.Sub(in.CreatedAt) / time.Second),
			AlertedAt: when(in.AlertedAt)}
	}
	return out, max(0, n-int64(len(out))), nil
}

// writeIntents writes the unbound intents' table after the operations'.
func writeIntents(w io.Writer, ins []intentView, more int64, grace time.Duration) error {
	fmt.Fprintf(w, "\nUnbound intents (no Gemini operation bound to them %s after they were recorded: alerted; docs/OPERATIONS.md, \"Alert: unbound intents\"):\n",
		humantime.Duration(grace))
	if len(ins) == 0 {
		_, err := fmt.Fprintln(w, "  (none)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tKIND\tMODEL\tDISPLAY_NAME\tRECORDED\tAGE")
	for _, in := range ins {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", in.Intent, in.Kind, dash(in.Model), dash(in.DisplayName), ts(in.CreatedAt),
			humantime.Duration(time.Duration(in.AgeSeconds)*time.Second))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if more > 0 {
		_, err := fmt.Fprintf(w, "… and %d more unbound intents\n", more)
		return err
	}
	return nil
}

func opViews(ops []ledger.Operation) []opView {
	views := make([]opView, len(ops))
	for i, op := range ops {
		views[i] = newOpView(op)
	}
	return views
}

// writeList writes ops as `ops list`'s table, or the empty state: a
// header alone reads like a failure.
func writeList(w io.Writer, ops []ledger.Operation, now time.Time) error {
	if len(ops) == 0 {
		_, err := fmt.Fprintln(w, "no operations match")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tSTATE\tVERSION\tSUBMITTED\tAGE\tSETTLED_BY\tLAST_CHECK")
	for _, op := range ops {
		last := "-"
		if !op.LastCheckAt.IsZero() {
			last = strings.TrimSpace(ts(op.LastCheckAt) + " " + op.LastCheck)
		}
		age := "-"
		if !humantime.Never(op.SubmittedAt) {
			age = humantime.Age(now.Sub(op.SubmittedAt))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", shownName(op.Name, op.APIName), dash(string(op.Kind)), op.State,
			op.Rev.Version, ts(op.SubmittedAt), age, dash(op.SettledBy), last)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// listPage reads page (from 1) of limit operations matching f, newest
// first, by walking the cursor from the start (a CLI reads few pages), and
// counts how many matching operations come after it.
func listPage(ctx context.Context, l ledger.Queries, f ledger.Filter, page, limit int) ([]ledger.Operation, int64, error) {
	var (
		after ledger.ListCursor
		ops   []ledger.Operation
		err   error
	)
	for p := 1; p <= page; p++ {
		if ops, err = l.PageOperations(ctx, f, after, limit); err != nil {
			return nil, 0, fmt.Errorf("list operations: %w", err)
		}
		if len(ops) == 0 {
			break
		}
		after = ledger.ListAfter(ops[len(ops)-1])
	}
	total, err := l.CountOperations(ctx, f)
	if err != nil {
		return nil, 0, fmt.Errorf("count operations: %w", err)
	}
	return ops, max(0, total-int64((page-1)*limit)-int64(len(ops))), nil
}

// maxSearchPages bounds the name pages one `ops list --name` reads per
// prefix: every query is bounded (never a scan).
const maxSearchPages = 5

// searchNames reads up to limit operations matching f whose name starts
// with prefix, in the order of the names shown. A prefix without "/" is
// looked for in every kind's names (bench_ → batches/bench_,
// operations/bench_, ...). more says that matches may remain (a page limit
// or the row limit was reached).
//
// A Veo operation is shown as submitted, models/M/operations/ID, but the
// search runs on canonical names (operations/ID): a models/ prefix searches
// operations/ID… when it names the ID part, every video name otherwise
// (models/veo), and keeps the rows whose shown name starts with it, within
// the same page bound.
func searchNames(ctx context.Context, l ledger.Queries, prefix string, f ledger.Filter, limit int) ([]ledger.Operation, bool, error) {
	prefixes, shown := []string{prefix}, ""
	switch {
	case strings.HasPrefix(prefix, "models/"):
		shown = prefix
		p := opname.Collection(opname.KindVideo)
		if _, id, ok := strings.Cut(prefix, "/operations/"); ok {
			p += id
		}
		prefixes = []string{p}
	case !strings.Contains(prefix, "/"):
		prefixes = opname.InEveryKind(prefix)
	}
	var out []ledger.Operation
	seen := map[string]bool{}
	more := false
	for _, p := range prefixes {
		after := ""
		for page := 0; ; page++ {
			if page == maxSearchPages {
				more = true
				break
			}
			found, err := l.SearchOperations(ctx, p, after, limit)
			if errors.Is(err, ledger.ErrBadPrefix) {
				return nil, false, command.Usagef("--name %q: too long to search", prefix)
			}
			if err != nil {
				return nil, false, fmt.Errorf("search operations: %w", err)
			}
			for _, op := range found {
				if !seen[op.ID] && matches(f, op) && strings.HasPrefix(shownName(op.Name, op.APIName), shown) {
					seen[op.ID] = true
					out = append(out, op)
				}
			}
			if len(found) < limit || len(out) > limit {
				break
			}
			after = found[len(found)-1].ID
		}
	}
	slices.SortFunc(out, func(a, b ledger.Operation) int {
		return strings.Compare(shownName(a.Name, a.APIName), shownName(b.Name, b.APIName))
	})
	if len(out) > limit {
		out, more = out[:limit], true
	}
	return out, more, nil
}

// matches applies f to op as PageOperations does.
func matches(f ledger.Filter, op ledger.Operation) bool {
	switch {
	case f.State != "" && op.State != f.State:
		return false
	case f.Kind != opname.KindUnknown && op.Kind != f.Kind:
		return false
	case !f.StuckAt.IsZero() && (op.State.Terminal() || op.SubmittedAt.After(f.StuckAt)):
		return false
	}
	return true
}

func opsShowDoc() command.Doc {
	return command.Doc{
		Path: "ops show",
		Args: "NAME [--kind K] [--json] [flags]",
		Arg:  "NAME",
		Summary: `Show one operation: its name as submitted (a Veo operation's models/M/operations/ID,
its API name) and its canonical name (the key), state, version, kind, timestamps
(submitted, settled, next check: "never: no GEMINI_API_KEY" for a pending operation
when GEMINI_API_KEY is not set here, as no pass run from this environment asks Gemini),
settled by, claim status (holder, attempts, lease), the error labelled with its
google.rpc code's name ("code 3 · INVALID_ARGUMENT: ..."), event history with reasons,
recorded terminal conflicts, replays, the delivery log (every verified webhook delivery
reconcile check and console action with its actor, newest first: webhook-id, event or Gemini status, auth, outcome,
reason, HTTP answer, latency; the newest 50 within LROSINK_DELIVERY_LOG_TTL), output,
error and user metadata. An operation that is not in the ledger is an error (exit
status 1).`,
		Env: storeEnvDoc + "\n  GEMINI_API_KEY       unset: a pending operation's next check is shown as never",
		Examples: []string{
			"lrosink ops show batches/abc123",
			"lrosink ops show abc123 --kind batch",
			"lrosink ops show batches/abc123 --json | jq .claim.status",
			"lrosink ops show batches/abc123 --json | jq '.deliveries[] | [.delivery_id, .outcome, .reason]'",
		},
	}
}

func runOpsShow(ctx context.Context, e *env, args []string) error {
	fs := command.NewFlagSet("ops show")
	kind := kindFlag(fs)
	asJSON := fs.Bool("json", false, "print one JSON object")
	storeFlag(fs)
	pos, err := opsShowDoc().Parse(e.stdout, fs, args)
	if err != nil {
		return err
	}
	name, err := operationName(pos[0], *kind)
	if err != nil {
		return err
	}
	id, err := opname.DocID(name.Key())
	if err != nil {
		return command.Usagef("%v", err)
	}
	l, cfg, closeFn, err := e.openReadLedger(ctx, fs)
	if err != nil {
		return err
	}
	defer closeFn()
	op, err := l.GetOperation(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return fmt.Errorf("%s is not in the ledger (%s)", name.Canonical, cfg.Store)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", name.Canonical, err)
	}
	v := newOpView(op)
	c, err := l.GetClaim(ctx, id)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
	case err != nil:
		return fmt.Errorf("read claim of %s: %w", name.Canonical, err)
	default:
		v.Claim = newClaimView(c)
	}
	if ds, ok := l.(deliverylog.Store); ok {
		log, err := ds.ListDeliveries(ctx, id)
		if err != nil {
			return fmt.Errorf("read the delivery log of %s: %w", name.Canonical, err)
		}
		v.Deliveries = nonNil(deliverylog.Live(log, e.now(), cfg.DeliveryLogTTL))
	}
	if *asJSON {
		return writeJSON(e.stdout, v)
	}
	// Without a key here, passes run from this environment never ask
	// Gemini: the scheduled time would promise a check that never comes.
	return writeShow(e.stdout, v, e.now(), cfg.GeminiAPIKey == "")
}

// writeDeliveries writes the delivery log, newest first, or "(none)".
func writeDeliveries(b *strings.Builder, es []deliverylog.Entry) {
	b.WriteString("\nDeliveries (newest first; webhook deliveries, reconcile checks and console actions):\n")
	if len(es) == 0 {
		b.WriteString("  (none)\n")
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  RECEIVED\tSOURCE\tDELIVERY_ID\tSTATUS\tAUTH\tOUTCOME\tREASON\tANSWER\tLATENCY")
	for _, d := range es {
		answer := "-"
		if d.Answer != 0 {
			answer = fmt.Sprint(d.Answer)
		}
		source := d.Source
		if d.Actor != "" {
			// A console action: who asked.
			source += " (" + d.Actor + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ts(d.At), source, dash(d.DeliveryID), dash(d.Status),
			dash(d.Auth), dash(d.Outcome), dash(d.Reason), answer, humantime.Duration(d.Latency))
	}
	_ = tw.Flush()
}

// opView is an operation as the CLI shows it (and its JSON form). A time
// that was never observed (absent, or stored at the epoch because the
// event carried no server time) is null, never 1970-01-01.
type opView struct {
	Name         string             `json:"name"`
	APIName      string             `json:"api_name"`
	Kind         string             `json:"kind"`
	State        string             `json:"state"`
	Version      int64              `json:"version"`
	UpdateTime   *time.Time         `json:"update_time"`
	SubmittedAt  *time.Time         `json:"submitted_at"`
	SettledAt    *time.Time         `json:"settled_at"`
	SettledBy    string             `json:"settled_by,omitempty"`
	NextCheckAt  *time.Time         `json:"next_check_at"`
	Checks       int                `json:"checks"`
	LastCheck    string             `json:"last_check,omitempty"`
	LastCheckAt  *time.Time         `json:"last_check_at"`
	History      []eventView        `json:"history"`
	Conflicts    []eventView        `json:"conflicts"`
	Replays      []ledger.Replay    `json:"replays"`
	Output       map[string]any     `json:"output"`
	Error        *results.ErrorInfo `json:"error"`
	UserMetadata map[string]any     `json:"user_metadata"`
	// Intent is the key of the intent bound to the operation (CONTRACT.md
	// §5); absent when none is.
	Intent string     `json:"intent,omitempty"`
	Claim  *claimView `json:"claim,omitempty"`
	// Deliveries is the delivery log, newest first (absent when the store
	// keeps none).
	Deliveries []deliverylog.Entry `json:"deliveries,omitempty"`
}

// eventView is a history entry as the CLI shows it: ledger.HistoryEntry
// with a never-observed server time as null.
type eventView struct {
	At         *time.Time      `json:"at"`
	Source     string          `json:"source"`
	State      lifecycle.State `json:"state"`
	UpdateTime *time.Time      `json:"update_time"`
	Reason     string          `json:"reason"`
	DeliveryID string          `json:"delivery_id,omitempty"`
}

// claimView is a claim as the CLI shows it. LeaseUntil is null unless the
// claim is held: a DONE or released claim has no lease that means anything.
type claimView struct {
	Status string `json:"status"`
	// Holder is the first 8 characters of the holder token: enough to tell
	// holders apart; the full token is the fence and stays in the ledger.
	Holder         string     `json:"holder"`
	Attempts       int        `json:"attempts"`
	LeaseUntil     *time.Time `json:"lease_until"`
	CreatedAt      *time.Time `json:"created_at"`
	UpdatedAt      *time.Time `json:"updated_at"`
	DoneAt         *time.Time `json:"done_at"`
	IdempotencyKey string     `json:"idempotency_key"`
}

func newOpView(op ledger.Operation) opView {
	return opView{
		Name: op.Name, APIName: op.APIName, Kind: string(op.Kind), State: string(op.State), Version: op.Rev.Version,
		UpdateTime: when(op.UpdateTime), SubmittedAt: when(op.SubmittedAt), SettledAt: when(op.SettledAt), SettledBy: op.SettledBy,
		NextCheckAt: when(op.NextCheckAt), Checks: op.Checks, LastCheck: op.LastCheck, LastCheckAt: when(op.LastCheckAt),
		History: eventViews(op.History), Conflicts: eventViews(op.Conflicts), Replays: nonNil(op.Replays),
		Output: op.Output, Error: op.Error, UserMetadata: op.UserMetadata, Intent: op.Intent,
	}
}

func eventViews(es []ledger.HistoryEntry) []eventView {
	out := make([]eventView, len(es))
	for i, h := range es {
		out[i] = eventView{At: when(h.At), Source: h.Source, State: h.State, UpdateTime: when(h.UpdateTime), Reason: h.Reason, DeliveryID: h.DeliveryID}
	}
	return out
}

// nonNil makes an absent list empty, so that JSON shows [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func newClaimView(c ledger.Claim) *claimView {
	v := &claimView{
		Status: string(c.Status), Holder: truncate(c.Holder, 8), Attempts: c.Attempts,
		CreatedAt: when(c.CreatedAt), UpdatedAt: when(c.UpdatedAt), DoneAt: when(c.DoneAt), IdempotencyKey: c.Key,
	}
	if c.Status == ledger.ClaimHeld {
		v.LeaseUntil = when(c.LeaseUntil)
	}
	return v
}

// writeShow writes v as `ops show` prints it: the fields, then the event
// history, conflicts, replays, and output, error and metadata as JSON.
// pollingOff: no GEMINI_API_KEY where ops show runs, so "Next check" of a
// pending operation is "never: no GEMINI_API_KEY".
func writeShow(w io.Writer, v opView, now time.Time, pollingOff bool) error {
	if err := writeFields(w, v, now, pollingOff); err != nil {
		return err
	}
	var b strings.Builder // a strings.Builder does not fail
	writeEvents(&b, "History", v.History)
	writeEvents(&b, "Conflicts (terminal states that lost to the recorded one)", v.Conflicts)
	writeReplays(&b, v.Replays)
	writeDeliveries(&b, v.Deliveries)
	writeJSONBlock(&b, "Output", v.Output, len(v.Output) == 0)
	writeJSONBlock(&b, "Error", v.Error, v.Error == nil)
	writeJSONBlock(&b, "User metadata", v.UserMetadata, len(v.UserMetadata) == 0)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// writeFields writes the one-line fields of v, aligned: "Operation:  NAME",
// the name as its submitter knows it (a Veo operation's model path), then
// the canonical name, the key.
func writeFields(w io.Writer, v opView, now time.Time, pollingOff bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, val string) { fmt.Fprintf(tw, "%s\t%s\n", k, val) }
	row("Operation:", shownName(v.Name, v.APIName))
	row("Canonical name:", v.Name)
	row("Kind:", dash(v.Kind))
	row("State:", v.State)
	row("Version:", fmt.Sprint(v.Version))
	row("Update time:", withAgo(v.UpdateTime, now))
	row("Submitted:", withAgo(v.SubmittedAt, now))
	row("Settled:", withAgo(v.SettledAt, now))
	row("Settled by:", dash(v.SettledBy))
	row("Intent:", dash(v.Intent))
	if next := withRel(v.NextCheckAt, now); pollingOff && !lifecycle.State(v.State).Terminal() {
		row("Next check:", "never: no GEMINI_API_KEY")
	} else {
		row("Next check:", next)
	}
	row("Checks:", checksField(v))
	if v.Error != nil {
		row("Error:", v.Error.Label())
	}
	claimFields(row, v.Claim, now)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// checksField is the number of checks and the last answer that was not a state.
func checksField(v opView) string {
	checks := fmt.Sprint(v.Checks)
	if v.LastCheckAt != nil {
		checks += " (last " + strings.TrimSpace(ts(v.LastCheckAt)+" "+v.LastCheck) + ")"
	}
	return checks
}

// claimFields writes the claim's rows; an operation without a terminal
// state has none.
func claimFields(row func(k, val string), c *claimView, now time.Time) {
	if c == nil {
		row("Claim:", "none (no terminal state yet)")
		return
	}
	// A lease means something only while the claim is held: a DONE claim
	// says when it was done.
	switch c.Status {
	case string(ledger.ClaimDone):
		row("Claim:", fmt.Sprintf("%s at %s  attempts %d", c.Status, withAgo(c.DoneAt, now), c.Attempts))
	case string(ledger.ClaimHeld):
		row("Claim:", fmt.Sprintf("%s  holder %s  attempts %d  lease until %s", c.Status, dash(c.Holder), c.Attempts, withRel(c.LeaseUntil, now)))
	default:
		row("Claim:", fmt.Sprintf("%s  attempts %d", c.Status, c.Attempts))
	}
	row("Idempotency key:", c.IdempotencyKey)
}

// writeEvents writes a titled table of history entries, or "(none)".
func writeEvents(b *strings.Builder, title string, es []eventView) {
	fmt.Fprintf(b, "\n%s:\n", title)
	if len(es) == 0 {
		b.WriteString("  (none)\n")
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TIME\tSOURCE\tSTATE\tUPDATE_TIME\tREASON\tDELIVERY_ID")
	for _, h := range es {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", ts(h.At), dash(h.Source), h.State, ts(h.UpdateTime), dash(h.Reason), dash(h.DeliveryID))
	}
	_ = tw.Flush()
}

// writeReplays lists the replays, or "(none)".
func writeReplays(b *strings.Builder, rs []ledger.Replay) {
	b.WriteString("\nReplays:\n")
	if len(rs) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, r := range rs {
		fmt.Fprintf(b, "  %s  %s\n", ts(r.At), r.ID)
	}
}

// writeJSONBlock writes x as indented JSON under title, or "(none)" when empty.
func writeJSONBlock(b *strings.Builder, title string, x any, empty bool) {
	fmt.Fprintf(b, "\n%s:", title)
	if empty {
		b.WriteString(" (none)\n")
		return
	}
	j, err := json.MarshalIndent(x, "  ", "  ")
	if err != nil {
		j = []byte(fmt.Sprintf("(not printable: %v)", err))
	}
	fmt.Fprintf(b, "\n  %s\n", j)
}

func writeJSON(w io.Writer, x any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(x); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

func statesList() string {
	s := make([]string, 0, 7)
	for _, st := range lifecycle.States() {
		s = append(s, string(st))
	}
	return strings.Join(s, ", ")
}

// when is t in UTC, or nil when it was never observed (JSON null).
func when(t time.Time) *time.Time {
	if humantime.Never(t) {
		return nil
	}
	u := t.UTC()
	return &u
}

// ts formats a time for tables: UTC to the second, "—" when never observed.
func ts[T time.Time | *time.Time](t T) string {
	var v time.Time
	switch x := any(t).(type) {
	case time.Time:
		v = x
	case *time.Time:
		if x != nil {
			v = *x
		}
	}
	if humantime.Never(v) {
		return "—"
	}
	return v.UTC().Format("2006-01-02T15:04:05Z")
}

// withRel is ts followed by how far t is from now: "(in 5m)" ahead,
// "(5m overdue)" behind, so a past check time never reads as a countdown.
func withRel(t *time.Time, now time.Time) string {
	if t == nil {
		return ts(t)
	}
	if r := humantime.Until(now, *t); r != "" {
		return ts(t) + " (" + r + ")"
	}
	return ts(t)
}

// shownName is an operation's name as its submitter knows it: the API name
// where it is more specific (models/M/operations/ID), else the canonical
// name, which stays the key (ops show NAME accepts either).
func shownName(canonical, apiName string) string {
	if apiName != "" {
		return apiName
	}
	return canonical
}

// withAgo is ts followed by how long ago t was: "(3h05m ago)"; a time
// ahead of now (another clock) reads "(in 5s)".
func withAgo(t *time.Time, now time.Time) string {
	if t == nil || humantime.Never(*t) {
		return ts(t)
	}
	if t.After(now) {
		return ts(t) + " (in " + humantime.Age(t.Sub(now)) + ")"
	}
	return ts(t) + " (" + humantime.Age(now.Sub(*t)) + " ago)"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
