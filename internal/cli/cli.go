// Package cli is the `lrosink` command: `serve` (every function on one HTTP
// server with the embedded defaults) and the operator commands that work on
// the configured ledger directly (register, ops, replay), beside simulate
// and webhooks.
//
// lrosink and ops are command.Groups; adding a command is one entry in
// commands() (or opsCommands()) plus its function. Every command parses its
// flags with command.Doc.Parse, so flags may follow positional arguments
// (`register NAME --kind batch`) and --help has one layout; the group maps
// what the command returns to the exit status: 0 ok, 1 operational error,
// 2 usage or configuration error.
package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/cli/webhooks"
	"github.com/lrosink/lrosink/internal/ingest"
)

// env is what one Run gives its command: the process's streams and
// environment, made explicit so commands run in-process in tests.
type env struct {
	stdin  io.Reader // for commands that read input; none of these does
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	now    func() time.Time
	faults ingest.Faults
	// beforeBind, when set, is told every bind `lrosink submit` is about
	// to make (WithBeforeBind).
	beforeBind func(key, name string)
	// shutdownTimeout bounds serve's graceful stop (tests shorten it).
	shutdownTimeout time.Duration
	// procs is runtime.GOMAXPROCS in the binary (WithProcs), nil in tests
	// that do not ask: serve on SQLite gives the scheduler one P more.
	procs func(int) int
}

// Option adjusts a Run.
type Option func(*env)

// WithFaults hands f to every ingest door the command builds (the
// faultinject build of cmd/lrosink; nil otherwise).
func WithFaults(f ingest.Faults) Option { return func(e *env) { e.faults = f } }

// WithBeforeBind has f told of every bind `lrosink submit` is about to
// make, after its create (the faultinject build of cmd/lrosink: a process
// killed between the create and the bind; nil otherwise).
func WithBeforeBind(f func(key, name string)) Option { return func(e *env) { e.beforeBind = f } }

// WithProcs hands serve the process's GOMAXPROCS setter (runtime.GOMAXPROCS
// in cmd/lrosink): on the SQLite ledger it adds one P (serve.go,
// writerHeadroom).
func WithProcs(f func(int) int) Option { return func(e *env) { e.procs = f } }

// commands is the table of lrosink's commands; the usage lists it in name
// order.
func (e *env) commands() map[string]command.Command {
	return map[string]command.Command{
		"serve":     command.Func("run every function on one HTTP server (SQLite ledger, results on stdout)", e, runServe),
		"reconcile": command.Func("run one reconcile pass against the configured ledger; print its summary", e, runReconcile),
		"register":  command.Func("put an operation in the ledger as PENDING", e, runRegister),
		"ops":       command.Func("inspect the ledger: ops list, ops show NAME", e, runOps),
		"replay":    command.Func("publish an operation's completion again, with a new replay_id", e, runReplay),
		"bench":     command.Func("load a webhook endpoint with signed deliveries; print rate, latency, statuses (--bare: vs a bare handler)", e, runBench),
		"send":      command.Func("sign and send one webhook delivery (to a local serve by default); print the answer", e, runSend),
		"submit":    command.Func("create a Gemini batch, video or interaction that lrosink knows from the start (intent, create, bind)", e, runSubmit),
		"simulate":  command.Func("fault-injection run against a built-in fake Gemini; prints the invariant report", e, runSimulate),
		"webhooks":  command.Func("manage the Gemini project webhook: create, list, rotate, ping, delete", e, runWebhooks),
		"version":   command.Func("print the version and VCS revision of this binary", e, runVersion),
	}
}

// Run runs the lrosink command line args (without the program name) and
// returns the process exit code. ctx ends when the process is asked to stop.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string, opts ...Option) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, now: time.Now, shutdownTimeout: shutdownTimeout}
	for _, o := range opts {
		o(e)
	}
	top := &command.Group{Doc: topDoc(), Commands: e.commands(), Aliases: map[string]string{"version": "version"},
		Stdout: e.stdout, Stderr: e.stderr}
	return top.Run(ctx, args)
}

func topDoc() command.Doc {
	return command.Doc{
		Summary: `lrosink makes completion handling of Gemini long-running operations correct:
webhooks and reconcile passes go through one ingest door into a ledger, and each
operation yields exactly one results message.`,
		Env: `  Configuration comes from the environment (LROSINK_STORE, LROSINK_RESULTS,
  LROSINK_WEBHOOK_SECRETS, ...); flags of a command override it.`,
		Examples: []string{
			"lrosink serve",
			"lrosink register batches/abc123 --kind batch --meta job=nightly",
			"lrosink ops list --state PENDING",
			"lrosink ops show batches/abc123",
		},
	}
}

// runWebhooks is `lrosink webhooks`, a group of its own package.
func runWebhooks(ctx context.Context, e *env, args []string) error {
	return command.Status(webhooks.Command(ctx, args, e.stdout, e.stderr, e.getenv))
}

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
