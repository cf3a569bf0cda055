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
	"fmt"
	"io"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/redact"
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
// status (0 ok, 1 failure, 2 usage). Every line of an error passes through
// the redactor, like every warning.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return CommandWith(ctx, args, stdout, stderr, getenv, Deps{})
}

// CommandWith is Command with injected dependencies (tests give it an
// in-memory SecretWriter: Secret Manager has no emulator).
func CommandWith(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, deps Deps) int {
	r := &runner{stdout: stdout, stderr: stderr, getenv: getenv, deps: deps}
	g := &command.Group{Doc: groupDoc(), Commands: r.subcommands(), Stdout: stdout, Stderr: stderr, Redact: r.redact}
	return g.Run(ctx, args)
}

func (r *runner) subcommands() map[string]command.Command {
	return map[string]command.Command{
		"create": command.Func("register a webhook with Gemini and store its signing secret", r, runCreate),
		"list":   command.Func("list the project's webhooks (all pages)", r, runList),
		"rotate": command.Func("issue a new signing secret for a webhook", r, runRotate),
		"ping":   command.Func("ask Gemini to send a test event to a webhook", r, runPing),
		"delete": command.Func("delete a webhook (Gemini stops sending to it)", r, runDelete),
	}
}

func groupDoc() command.Doc {
	return command.Doc{
		Path: "webhooks",
		Summary: `Manages the static webhook that sends Gemini's batch, interaction and video
events to lrosink, through the Gemini webhooks management API.`,
		Env: envDoc,
		Examples: []string{
			"lrosink webhooks create --uri https://lrosink-webhook-xyz.a.run.app/ --secret projects/P/secrets/lrosink-webhook-secrets",
			"lrosink webhooks list",
			"lrosink webhooks rotate wh_123 --secret projects/P/secrets/lrosink-webhook-secrets",
			"lrosink webhooks ping wh_123",
			"lrosink webhooks delete wh_123",
		},
	}
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

// redact masks every sensitive string in s, also one cut short by a
// bounded error text (redact.Mask). Errors from the SDKs, the transport or
// Secret Manager are not ours to trust: a proxy echoing headers or a body
// echoed in an error would otherwise print the key.
func (r *runner) redact(s string) string {
	return redact.Mask(s, r.sensitive...)
}

// warnf writes one redacted line to stderr.
func (r *runner) warnf(format string, a ...any) {
	fmt.Fprintln(r.stderr, r.redact(fmt.Sprintf(format, a...)))
}
