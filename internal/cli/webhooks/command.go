// Package webhooks is `lrosink webhooks`: it registers and maintains
// lrosink's static webhook with Gemini through the genai SDK's Webhooks
// management API (GEMINI.md §5): create, list, rotate the signing secret,
// ping, delete.
//
// The signing secret is the one thing here that must never leak and never
// get lost: Gemini shows it exactly once. It goes either to Secret Manager
// as a new version (--secret) or, deliberately, to stdout as one
// LROSINK_WEBHOOK_SECRETS=... line. Everything written to stderr passes
// through a redactor that knows the API key and every secret seen in the run.
package webhooks

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/lrosink/lrosink/internal/cli/command"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// Exit codes, as for every lrosink command.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// Environment variables.
const (
	envAPIKey  = "GEMINI_API_KEY"
	envBaseURL = "GOOGLE_GEMINI_BASE_URL"
	// envSecrets is what lrosink's webhook receiver reads its secrets from;
	// the stdout line is written in its syntax so it can be pasted as is.
	envSecrets = "LROSINK_WEBHOOK_SECRETS"
)

// Deps are the dependencies CommandWith takes from its caller instead of
// building them. The zero value means production behaviour.
type Deps struct {
	// SecretWriter stores new signing secrets when --secret is given. Nil
	// means a Secret Manager client with Application Default Credentials,
	// built only when --secret is given, so commands that do not store a
	// secret need no Google Cloud credentials.
	SecretWriter SecretWriter
}

// Command is `lrosink webhooks`: it runs one subcommand and returns the exit
// status (0 ok, 1 failure, 2 usage).
func Command(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return CommandWith(ctx, args, stdout, stderr, getenv, Deps{})
}

// CommandWith is Command with injected dependencies (tests give it an
// in-memory SecretWriter: Secret Manager has no emulator).
func CommandWith(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, deps Deps) int {
	r := &runner{stdout: stdout, stderr: stderr, getenv: getenv, deps: deps}
	cmds := subcommands()
	if len(args) == 0 {
		topUsage(stderr, cmds)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(args) > 1 {
			// `webhooks help rotate` is `webhooks rotate --help`.
			name, args = args[1], []string{args[1], "--help"}
			break
		}
		topUsage(stdout, cmds)
		return exitOK
	}
	c, ok := cmds[name]
	if !ok {
		fmt.Fprintf(stderr, "lrosink webhooks: unknown subcommand %q\n\n", name)
		topUsage(stderr, cmds)
		return exitUsage
	}
	return r.exitCode(name, c.run(ctx, r, args[1:]))
}

// subcommand is one `lrosink webhooks` subcommand.
type subcommand struct {
	summary string
	run     func(ctx context.Context, r *runner, args []string) error
}

func subcommands() map[string]subcommand {
	return map[string]subcommand{
		"create": {"register a webhook with Gemini and store its signing secret", runCreate},
		"list":   {"list the project's webhooks (all pages)", runList},
		"rotate": {"issue a new signing secret for a webhook", runRotate},
		"ping":   {"ask Gemini to send a test event to a webhook", runPing},
		"delete": {"delete a webhook (Gemini stops sending to it)", runDelete},
	}
}

func topUsage(w io.Writer, cmds map[string]subcommand) {
	fmt.Fprint(w, `Usage: lrosink webhooks SUBCOMMAND [ARGS] [FLAGS]

Manages the static webhook that sends Gemini's batch, interaction and video
events to lrosink, through the Gemini webhooks management API.

Subcommands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, name := range slices.Sorted(maps.Keys(cmds)) {
		fmt.Fprintf(tw, "  %s\t%s\n", name, cmds[name].summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, `
Environment:
`+envDoc+`
Examples:
  lrosink webhooks create --uri https://lrosink-webhook-xyz.a.run.app/ --secret projects/P/secrets/lrosink-webhook-secrets
  lrosink webhooks list
  lrosink webhooks rotate wh_123 --secret projects/P/secrets/lrosink-webhook-secrets
  lrosink webhooks ping wh_123
  lrosink webhooks delete wh_123

Run 'lrosink webhooks SUBCOMMAND --help' for a subcommand's usage.
`)
}

const envDoc = `  GEMINI_API_KEY           Gemini API key (required)
  GOOGLE_GEMINI_BASE_URL   API base URL (default https://generativelanguage.googleapis.com/)
`

// runner is one run of the command: its streams, environment and the
// strings that must never reach stderr.
type runner struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	deps           Deps
	// sensitive holds the API key and every signing secret seen so far;
	// redact removes them from anything written to stderr.
	sensitive []string
}

func (r *runner) addSensitive(s string) {
	if s != "" {
		r.sensitive = append(r.sensitive, s)
	}
}

// redact replaces every sensitive string in s. Errors from the SDKs, the
// transport or Secret Manager are not ours to trust: a proxy echoing
// headers or a body echoed in an error would otherwise print the key.
func (r *runner) redact(s string) string {
	for _, v := range r.sensitive {
		s = strings.ReplaceAll(s, v, "[REDACTED]")
	}
	return s
}

// warnf writes one redacted line to stderr.
func (r *runner) warnf(format string, a ...any) {
	fmt.Fprintln(r.stderr, r.redact(fmt.Sprintf(format, a...)))
}

// usageError is a mistake on the command line: exit 2 with a pointer to
// --help.
type usageError struct {
	cmd string
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(cmd, format string, a ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, a...)}
}

// errHelpShown: --help was answered; exit 0.
var errHelpShown = flag.ErrHelp

func (r *runner) exitCode(cmd string, err error) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelpShown):
		return exitOK
	case errors.As(err, &ue):
		r.warnf("lrosink webhooks %s: %s\nRun 'lrosink webhooks %s --help' for usage.", ue.cmd, ue.msg, ue.cmd)
		return exitUsage
	default:
		r.warnf("lrosink webhooks %s: %v", cmd, err)
		return exitError
	}
}

// doc is a subcommand's --help text.
type doc struct {
	cmd      string // "rotate"
	args     string // synopsis after the subcommand
	summary  string
	examples []string
}

func newFlagSet(cmd string) *flag.FlagSet { return command.NewFlagSet(cmd) }

// parse parses args against fs and returns the positional arguments
// (command.Parse); --help prints d to stdout and returns errHelpShown.
func (r *runner) parse(fs *flag.FlagSet, d doc, args []string) ([]string, error) {
	pos, err := command.Parse(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		command.WriteHelp(r.stdout, fs, command.Doc{Path: "webhooks " + d.cmd, Args: d.args, Summary: d.summary, Env: envDoc, Examples: d.examples})
		return nil, errHelpShown
	case err != nil:
		return nil, usagef(d.cmd, "%v", err)
	}
	return pos, nil
}

// listValue is a repeatable, comma-separated flag.
type listValue = command.ListValue
