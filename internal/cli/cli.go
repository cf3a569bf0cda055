// Package cli is the `lrosink` command: `serve` (every function on one HTTP
// server with the embedded defaults) and the operator commands that work on
// the configured ledger directly (register, ops, replay).
//
// Each command is a function in the map returned by commands(); adding a
// command is one entry there plus its function. Every command parses its own
// flag.FlagSet, accepts flags after positional arguments (`register NAME
// --kind batch`), and answers --help with usage, flags and examples.
//
// Exit codes: 0 ok, 1 operational error, 2 usage or configuration error.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/cli/webhooks"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/simulate"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// env is what one Run gives its command: the process's streams and
// environment, made explicit so commands run in-process in tests.
type env struct {
	stdin  io.Reader // for commands that read input; none of these four does
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	now    func() time.Time
	faults ingest.Faults
	// shutdownTimeout bounds serve's graceful stop (tests shorten it).
	shutdownTimeout time.Duration
}

// Option adjusts a Run.
type Option func(*env)

// WithFaults hands f to every ingest door the command builds (the
// faultinject build of cmd/lrosink; nil otherwise).
func WithFaults(f ingest.Faults) Option { return func(e *env) { e.faults = f } }

// cliCommand is one top-level command.
type cliCommand struct {
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// commands is the dispatch table; the usage lists it in name order.
func commands() map[string]cliCommand {
	return map[string]cliCommand{
		"serve":     {"run every function on one HTTP server (SQLite ledger, results on stdout)", runServe},
		"reconcile": {"run one reconcile pass against the configured ledger; print its summary", runReconcile},
		"register":  {"put an operation in the ledger as PENDING", runRegister},
		"ops":       {"inspect the ledger: ops list, ops show NAME", runOps},
		"replay":    {"publish an operation's completion again, with a new replay_id", runReplay},
		"send":      {"sign and send one webhook delivery (to a local serve by default); print the answer", runSend},
		"simulate":  {"fault-injection run against a built-in fake Gemini; prints the invariant report", delegate(simulate.Command)},
		"webhooks":  {"manage the Gemini project webhook: create, list, rotate, ping, delete", delegate(webhooks.Command)},
		"version":   {"print the version and VCS revision of this binary", runVersion},
	}
}

// exitStatus is the exit code of a command that prints its own output and
// errors (simulate, webhooks): nothing more is printed for it.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// delegate adapts a self-contained subcommand to the dispatch table.
func delegate(f func(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		if code := f(ctx, args, e.stdout, e.stderr, e.getenv); code != exitOK {
			return exitStatus(code)
		}
		return nil
	}
}

// Run runs the lrosink command line args (without the program name) and
// returns the process exit code. ctx ends when the process is asked to stop.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string, opts ...Option) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, now: time.Now, shutdownTimeout: shutdownTimeout}
	for _, o := range opts {
		o(e)
	}
	cmds := commands()
	if len(args) == 0 {
		topUsage(e.stderr, cmds)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		topUsage(e.stdout, cmds)
		return exitOK
	case "-version", "--version":
		name = "version"
		args = args[:1]
	case "help":
		if len(args) == 1 {
			topUsage(e.stdout, cmds)
			return exitOK
		}
		// `lrosink help ops list` is `lrosink ops list --help`.
		name, args = args[1], append(slices.Clone(args[1:]), "--help")
	}
	c, ok := cmds[name]
	if !ok {
		fmt.Fprintf(e.stderr, "lrosink: unknown command %q\n\n", name)
		topUsage(e.stderr, cmds)
		return exitUsage
	}
	return e.exitCode(name, c.run(ctx, e, args[1:]))
}

func topUsage(w io.Writer, cmds map[string]cliCommand) {
	fmt.Fprint(w, `lrosink makes completion handling of Gemini long-running operations correct:
webhooks and reconcile passes go through one ingest door into a ledger, and each
operation yields exactly one results message.

Usage:
  lrosink COMMAND [ARGS] [FLAGS]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, name := range slices.Sorted(maps.Keys(cmds)) {
		fmt.Fprintf(tw, "  %s\t%s\n", name, cmds[name].summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, `
Configuration comes from the environment (LROSINK_STORE, LROSINK_RESULTS,
LROSINK_WEBHOOK_SECRETS, ...); flags of a command override it.

Examples:
  lrosink serve
  lrosink register batches/abc123 --kind batch --meta job=nightly
  lrosink ops list --state PENDING
  lrosink ops show batches/abc123

Run 'lrosink COMMAND --help' for a command's usage.
`)
}

// usageError is a mistake on the command line: exit 2 with a pointer to
// --help.
type usageError struct {
	cmd string // "ops show"
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(cmd, format string, a ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, a...)}
}

// configError is invalid configuration: exit 2, one line per problem.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

// subcommandError names the subcommand ("ops show") an error came from.
type subcommandError struct {
	cmd string
	err error
}

func (e *subcommandError) Error() string { return e.err.Error() }
func (e *subcommandError) Unwrap() error { return e.err }

// errHelpShown: --help was answered; exit 0.
var errHelpShown = flag.ErrHelp

func (e *env) exitCode(name string, err error) int {
	var ue *usageError
	var ce *configError
	var es exitStatus
	if errors.As(err, &es) {
		return int(es)
	}
	if se := (*subcommandError)(nil); errors.As(err, &se) {
		name = se.cmd
	}
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelpShown):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "lrosink %s: %s\nRun 'lrosink %s --help' for usage.\n", ue.cmd, ue.msg, ue.cmd)
		return exitUsage
	case errors.As(err, &ce):
		for _, line := range strings.Split(ce.Error(), "\n") {
			fmt.Fprintf(e.stderr, "lrosink %s: %s\n", name, line)
		}
		return exitUsage
	default:
		fmt.Fprintf(e.stderr, "lrosink %s: %v\n", name, err)
		return exitError
	}
}

// doc is a command's --help text.
type doc struct {
	cmd      string // command path, e.g. "ops list"
	args     string // synopsis after the command path
	summary  string // what it does, one or more lines
	env      string // environment notes, optional
	examples []string
}

func newFlagSet(cmd string) *flag.FlagSet { return command.NewFlagSet(cmd) }

// parse parses args against fs and returns the positional arguments
// (command.Parse); --help prints d to stdout and returns errHelpShown.
func (e *env) parse(fs *flag.FlagSet, d doc, args []string) ([]string, error) {
	pos, err := command.Parse(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		command.WriteHelp(e.stdout, fs, command.Doc{Path: d.cmd, Args: d.args, Summary: d.summary, Env: d.env, Examples: d.examples})
		return nil, errHelpShown
	case err != nil:
		return nil, usagef(d.cmd, "%v", err)
	}
	return pos, nil
}

// listValue is a repeatable, comma-separated flag.
type listValue = command.ListValue

// metaValue collects repeated k=v pairs.
type metaValue map[string]any

func (m metaValue) String() string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, ",")
}

func (m metaValue) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("%q is not k=v", s)
	}
	m[strings.TrimSpace(k)] = v
	return nil
}
