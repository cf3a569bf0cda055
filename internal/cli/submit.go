package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/redact"
	"github.com/lrosink/lrosink/submit"
)

// The variables `lrosink submit` reads besides the ledger's.
const (
	envGeminiAPIKey  = "GEMINI_API_KEY"
	envGeminiBaseURL = "GOOGLE_GEMINI_BASE_URL"
	envRegisterURL   = "LROSINK_REGISTER_URL"
	envAdminToken    = "LROSINK_ADMIN_TOKEN"
)

const submitEnvDoc = `  GEMINI_API_KEY          the Gemini API key (required; never printed)
  GOOGLE_GEMINI_BASE_URL  the Gemini API's base URL (tests point it at a fake)
  LROSINK_REGISTER_URL    the Register function to record the intent with, e.g.
                          http://127.0.0.1:8080/Register (serve) or the Cloud Run URL;
                          unset: straight into the ledger (--store, LROSINK_STORE)
  LROSINK_ADMIN_TOKEN     sent as "Authorization: Bearer" to the Register function
  LROSINK_INTENT_GRACE    how long an unbound intent is "in flight" (default 1h)
  Without a Register URL the ledger is named on stderr; a SQLite one that does not
  exist is refused (only serve creates one) unless --create.
` + storeEnvDoc

func submitDoc() command.Doc {
	return command.Doc{
		Path: "submit",
		Summary: `Create a Gemini operation so that lrosink knows it from the start: record an
intent under a key, create the operation with the key in its webhook user_metadata
(snake_case on the wire), bind the operation to the intent. A crash in between
creates nothing twice: run the same command again with --key (printed on stderr
first). Completion then arrives by webhook or by lrosink's polling, as printed.`,
		Env: submitEnvDoc,
		Examples: []string{
			"lrosink submit batch --model gemini-2.5-flash --input requests.jsonl",
			"lrosink submit video --model veo-3.0-generate-001 --prompt 'a red balloon over a lake'",
			"lrosink submit interaction --agent deep-research-pro-preview-12-2025 --input 'history of the bicycle'",
		},
	}
}

// runSubmit is the group `lrosink submit`.
func runSubmit(ctx context.Context, e *env, args []string) error {
	key := strings.TrimSpace(e.getenv(envGeminiAPIKey))
	g := &command.Group{Doc: submitDoc(), Stdout: e.stdout, Stderr: e.stderr, Commands: map[string]command.Command{
		"batch":       command.Func("create a batch job from a JSONL file of requests", e, runSubmitBatch),
		"video":       command.Func("start a Veo video generation", e, runSubmitVideo),
		"interaction": command.Func("start a background interaction with a model or a managed agent", e, runSubmitInteraction),
	}, Redact: func(s string) string { return redact.Mask(s, key) }}
	return command.Status(g.Run(ctx, args))
}

// submitFlags are the flags every `submit` command has.
type submitFlags struct {
	meta        metaValue
	webhookURIs command.ListValue
	key         *string
	force       *bool
	registerURL *string
	asJSON      *bool
	create      *bool
}

func addSubmitFlags(fs *flag.FlagSet) *submitFlags {
	f := &submitFlags{meta: metaValue{}}
	fs.Var(f.meta, "meta", "user metadata `k=v`, sent to Gemini and echoed in the results message; repeatable")
	fs.Var(&f.webhookURIs, "webhook-uri", "a dynamic webhook `URL` Gemini delivers to instead of the project's static webhook; repeatable")
	f.key = fs.String("key", "", "the intent `KEY` (default: a new int_… key, printed first): give the same one to retry")
	f.force = fs.Bool("force", false, "create anew although the key's intent is recorded and unbound")
	f.registerURL = fs.String("register-url", "", "the Register function's `URL` (env "+envRegisterURL+"); unset: the ledger of --store")
	f.asJSON = fs.Bool("json", false, "print one JSON line instead of text")
	f.create = fs.Bool("create", false, "without a Register URL: create the SQLite ledger if there is none at the path (by default only serve creates one)")
	storeFlag(fs)
	return f
}

func submitBatchDoc() command.Doc {
	return command.Doc{
		Path: "submit batch",
		Args: "--model M --input FILE [--display-name N] [--meta k=v ...] [--webhook-uri URL] [--key K] [--force] [flags]",
		Summary: `Create a batch job from a JSONL file, one request a line:
{"key": "q1", "request": {"contents": [{"parts": [{"text": "..."}]}]}}
Up to 1 MiB it goes inline in the create; a larger file goes up through the Files
API first. The display name defaults to lrosink-KEY. A retried key whose job was
created is found by listing and not created again.`,
		Env: submitEnvDoc,
		Examples: []string{
			"lrosink submit batch --model gemini-2.5-flash --input requests.jsonl",
			"lrosink submit batch --model gemini-2.5-flash --input requests.jsonl --meta job=nightly --key nightly-2026-12-01",
			"LROSINK_REGISTER_URL=http://127.0.0.1:8080/Register lrosink submit batch --model gemini-2.5-flash --input requests.jsonl --json",
		},
	}
}

func runSubmitBatch(ctx context.Context, e *env, args []string) error {
	fs := command.NewFlagSet("submit batch")
	model := fs.String("model", "", "the `MODEL`, e.g. gemini-2.5-flash (required)")
	input := fs.String("input", "", "the JSONL `FILE` of requests (required)")
	display := fs.String("display-name", "", "the batch's display `NAME` (default lrosink-KEY)")
	f := addSubmitFlags(fs)
	if _, err := submitBatchDoc().Parse(e.stdout, fs, args); err != nil {
		return err
	}
	if *model == "" || *input == "" {
		return command.Usagef("--model and --input are required")
	}
	file, err := os.Open(*input)
	if err != nil {
		return command.Usagef("--input: %v", err)
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return command.Usagef("--input %s: not a regular file", *input)
	}
	return e.submit(ctx, fs, f, "submit batch", func(ctx context.Context, c *submit.Client, key string) (submit.Submission, error) {
		return c.Batch(ctx, submit.Batch{Key: key, Force: *f.force, Model: *model, DisplayName: *display,
			Metadata: f.metadata(), Input: file, InputSize: info.Size()})
	})
}

func submitVideoDoc() command.Doc {
	return command.Doc{
		Path:    "submit video",
		Args:    "--model M --prompt P [--meta k=v ...] [--webhook-uri URL] [--key K] [--force] [flags]",
		Summary: `Start a Veo video generation. Videos have no list API: a retried key whose intent is unbound is refused until --force, and alerted after its grace.`,
		Env:     submitEnvDoc,
		Examples: []string{
			"lrosink submit video --model veo-3.0-generate-001 --prompt 'a red balloon over a lake'",
			"lrosink submit video --model veo-3.0-generate-001 --prompt 'waves' --key promo-7 --force",
		},
	}
}

func runSubmitVideo(ctx context.Context, e *env, args []string) error {
	fs := command.NewFlagSet("submit video")
	model := fs.String("model", "", "the Veo `MODEL`, e.g. veo-3.0-generate-001 (required)")
	prompt := fs.String("prompt", "", "the `PROMPT` (required)")
	f := addSubmitFlags(fs)
	if _, err := submitVideoDoc().Parse(e.stdout, fs, args); err != nil {
		return err
	}
	if *model == "" || strings.TrimSpace(*prompt) == "" {
		return command.Usagef("--model and --prompt are required")
	}
	return e.submit(ctx, fs, f, "submit video", func(ctx context.Context, c *submit.Client, key string) (submit.Submission, error) {
		return c.Video(ctx, submit.Video{Key: key, Force: *f.force, Model: *model, Prompt: *prompt, Metadata: f.metadata()})
	})
}

func submitInteractionDoc() command.Doc {
	return command.Doc{
		Path: "submit interaction",
		Args: "(--model M | --agent A) --input TEXT [--meta k=v ...] [--webhook-uri URL] [--key K] [--force] [flags]",
		Summary: `Start a background interaction, with a model or a managed agent. Interactions have
no list API: a retried key whose intent is unbound is refused until --force, and
alerted after its grace.`,
		Env: submitEnvDoc,
		Examples: []string{
			"lrosink submit interaction --model gemini-2.5-flash --input 'summarize the attached report'",
			"lrosink submit interaction --agent deep-research-pro-preview-12-2025 --input 'history of the bicycle'",
		},
	}
}

func runSubmitInteraction(ctx context.Context, e *env, args []string) error {
	fs := command.NewFlagSet("submit interaction")
	model := fs.String("model", "", "the `MODEL`, e.g. gemini-2.5-flash")
	agent := fs.String("agent", "", "the managed `AGENT`, e.g. deep-research-pro-preview-12-2025")
	input := fs.String("input", "", "the input `TEXT` (required)")
	f := addSubmitFlags(fs)
	if _, err := submitInteractionDoc().Parse(e.stdout, fs, args); err != nil {
		return err
	}
	if (*model == "") == (*agent == "") {
		return command.Usagef("give exactly one of --model and --agent")
	}
	if strings.TrimSpace(*input) == "" {
		return command.Usagef("--input is required")
	}
	return e.submit(ctx, fs, f, "submit interaction", func(ctx context.Context, c *submit.Client, key string) (submit.Submission, error) {
		return c.Interaction(ctx, submit.Interaction{Key: key, Force: *f.force, Model: *model, Agent: *agent, Input: *input, Metadata: f.metadata()})
	})
}

func (f *submitFlags) metadata() map[string]any {
	if len(f.meta) == 0 {
		return nil
	}
	return f.meta
}

// submit builds the client from the configuration, prints the intent key
// on stderr before anything is sent (a crash then leaves the user the key
// to retry with), runs call and prints what it did.
func (e *env) submit(ctx context.Context, fs *flag.FlagSet, f *submitFlags, path string,
	call func(context.Context, *submit.Client, string) (submit.Submission, error)) error {
	key := *f.key
	if key == "" {
		k, err := submit.NewKey()
		if err != nil {
			return err
		}
		key = k
	}
	if err := submit.CheckKey(key); err != nil {
		return command.Usagef("--key: %s", invalidText(err))
	}
	for _, u := range f.webhookURIs {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			return command.Usagef("--webhook-uri %q: want an https:// URL", u)
		}
	}
	apiKey := strings.TrimSpace(e.getenv(envGeminiAPIKey))
	if apiKey == "" {
		return &command.ConfigError{Err: fmt.Errorf("%s is not set: submit creates the operation with the Gemini API key of your project", envGeminiAPIKey)}
	}
	base := strings.TrimSpace(e.getenv(envGeminiBaseURL))
	if err := config.CheckGeminiBaseURL(base); err != nil {
		return &command.ConfigError{Err: err}
	}
	intents, closeIntents, err := e.submitIntents(ctx, fs, f)
	if err != nil {
		return err
	}
	defer closeIntents()
	if e.beforeBind != nil {
		intents = toldBeforeBind{intents, e.beforeBind}
	}
	g, err := submit.NewGemini(submit.GeminiConfig{APIKey: apiKey, BaseURL: base})
	if err != nil {
		return err
	}
	c, err := submit.New(g, intents, submit.Options{WebhookURIs: f.webhookURIs})
	if err != nil {
		return command.Usagef("%v", err)
	}
	fmt.Fprintf(e.stderr, "lrosink %s: intent key %s (if this does not finish, run it again with --key %s: nothing is created twice)\n", path, key, key)
	sub, err := call(ctx, c, key)
	if errors.Is(err, submit.ErrInvalidRequest) {
		return command.Usagef("%s", invalidText(err))
	}
	if err != nil {
		// The command's own prefix names it already.
		return errors.New(strings.TrimPrefix(err.Error(), "submit: "))
	}
	if *f.asJSON {
		return json.NewEncoder(e.stdout).Encode(map[string]any{
			"operation": sub.Operation, "api_name": sub.APIName, "kind": sub.Kind, "intent": sub.Key,
			"existing": sub.Existing, "completion": sub.Completion, "completion_reason": sub.CompletionReason,
		})
	}
	fmt.Fprintf(e.stdout, "operation   %s\n", sub.APIName)
	fmt.Fprintf(e.stdout, "intent      %s\n", sub.Key)
	if sub.Existing {
		fmt.Fprintf(e.stdout, "existing    the key's operation was created before; nothing was created now\n")
	}
	fmt.Fprintf(e.stdout, "completion  %s: %s\n", sub.Completion, sub.CompletionReason)
	return nil
}

// submitIntents is where the intent is recorded: the Register function
// at --register-url or LROSINK_REGISTER_URL (with LROSINK_ADMIN_TOKEN as
// its Bearer token), else the configured ledger.
func (e *env) submitIntents(ctx context.Context, fs *flag.FlagSet, f *submitFlags) (submit.Intents, func(), error) {
	u := strings.TrimSpace(*f.registerURL)
	if u == "" {
		u = strings.TrimSpace(e.getenv(envRegisterURL))
	}
	if u == "" {
		return e.ledgerIntents(ctx, fs, *f.create)
	}
	if p, err := url.Parse(u); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
		return nil, nil, &command.ConfigError{Err: fmt.Errorf("%s (or --register-url): %q is not an http(s) URL", envRegisterURL, u)}
	}
	client := &http.Client{}
	if tok := strings.TrimSpace(e.getenv(envAdminToken)); tok != "" {
		client.Transport = submit.BearerTransport(tok, nil)
	}
	return submit.HTTP(u, client), func() {}, nil
}

// ledgerIntents records intents in the configured ledger directly (the
// embedded path: --store or LROSINK_STORE, as the other ledger commands;
// a SQLite ledger is shared with a `serve` on the same file), through the
// same register.Intents as POST /Register.
func (e *env) ledgerIntents(ctx context.Context, fs *flag.FlagSet, create bool) (submit.Intents, func(), error) {
	// As every command but serve: a missing SQLite ledger is refused unless
	// --create, or the intent would land in a ledger no serve reads.
	a, err := e.toolApp(ctx, fs, create)
	if err != nil {
		return nil, nil, err
	}
	return submit.Embedded(a.Intents), func() { _ = a.Close() }, nil
}

// toldBeforeBind tells before of every bind (cli.WithBeforeBind).
type toldBeforeBind struct {
	submit.Intents
	before func(key, name string)
}

func (t toldBeforeBind) Bind(ctx context.Context, key, name string) (submit.IntentStatus, error) {
	t.before(key, name)
	return t.Intents.Bind(ctx, key, name)
}

// invalidText is a refused request's reason without the package's prefix.
func invalidText(err error) string {
	return strings.TrimPrefix(err.Error(), submit.ErrInvalidRequest.Error()+": ")
}
