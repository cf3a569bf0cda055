package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/config"
	"google.golang.org/genai"
	"google.golang.org/genai/interactions"
	"google.golang.org/genai/interactions/models/apierrors"
	"google.golang.org/genai/interactions/models/operations"
	"google.golang.org/genai/interactions/retry"
)

// webhooksClient builds the genai client from the environment and returns
// its Webhooks service. The API key is registered as sensitive before
// anything can fail, so no later error can print it.
func (r *runner) webhooksClient(ctx context.Context) (*interactions.Webhooks, error) {
	key := strings.TrimSpace(r.getenv(envAPIKey))
	if key == "" {
		// Configuration: exit 2 (CONTRACT.md §1).
		return nil, &command.ConfigError{Err: fmt.Errorf("%s is not set: the webhooks management API needs a Gemini API key of the project the webhook belongs to", envAPIKey)}
	}
	r.addSensitive(key)
	// The base URL comes through getenv like everything else, so tests can
	// point the client at a fake; when it is empty the SDK falls back to
	// its default (and to the process's own GOOGLE_GEMINI_BASE_URL). A bad
	// one is configuration (exit 2), checked before anything is sent: the
	// request would fail without leaving, and create's "may have been
	// created anyway" advice would be wrong.
	base := strings.TrimSpace(r.getenv(envBaseURL))
	if err := config.CheckGeminiBaseURL(base); err != nil {
		return nil, &command.ConfigError{Err: err}
	}
	client, err := genai.NewClient(ctx, &genai.ClientConfig{
		APIKey:      key,
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: base},
	})
	if err != nil {
		return nil, fmt.Errorf("create genai client: %w", err)
	}
	if client.Webhooks == nil {
		return nil, errors.New("the genai client has no Webhooks service")
	}
	return client.Webhooks, nil
}

// noRetries turns the SDK's own retries off (408/409/429/5xx, up to 4, 30 s)
// for create and rotate: both issue a signing secret, and a retry after an
// answer lost in transit would issue a second one (and, for create, a second
// webhook) while the first secret, the one Gemini may already sign with, is
// never seen. Failing once and telling the operator to check is safer.
// list and ping keep the SDK's retries: repeating them is harmless.
func noRetries() operations.Option {
	return operations.WithRetries(retry.Config{Strategy: "none"})
}

// apiError is a non-2xx answer of the management API, reduced to what an
// operator needs. The SDK's own error text is the raw body on a new line.
type apiError struct {
	Code    int
	Status  string // google.rpc code name, e.g. INVALID_ARGUMENT
	Reason  string // the google.rpc.ErrorInfo reason, e.g. API_KEY_INVALID
	Message string
	err     error
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("gemini: HTTP %d", e.Code)
	if e.Status != "" {
		s += " " + e.Status
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.keyRefused() {
		s += " (check " + envAPIKey + ")"
	}
	return s
}

// keyRefused: the live API answers a wrong key 400 with reason
// API_KEY_INVALID and a missing one 403 (GEMINI.md §10); 401 is kept for
// proxies in front of it.
func (e *apiError) keyRefused() bool {
	switch e.Code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return true
	case http.StatusBadRequest:
		return e.Reason == "API_KEY_INVALID"
	}
	return false
}

func (e *apiError) Unwrap() error { return e.err }

// maxErrorMessage bounds how much of an error body ends up on the terminal.
const maxErrorMessage = 512

// describe turns the SDK's *apierrors.APIError into an *apiError; other
// errors (transport, decoding) pass unchanged.
func describe(err error) error {
	var ae *apierrors.APIError
	if !errors.As(err, &ae) {
		return err
	}
	out := &apiError{Code: ae.StatusCode, err: err}
	// Only the message, status and ErrorInfo reason are kept: a DebugInfo
	// detail can echo the API key (GEMINI.md §10).
	var body struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
			Details []struct {
				Type   string `json:"@type"`
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(ae.Body), &body) == nil && (body.Error.Message != "" || body.Error.Status != "") {
		out.Message, out.Status = body.Error.Message, body.Error.Status
		for _, d := range body.Error.Details {
			if strings.HasSuffix(d.Type, "google.rpc.ErrorInfo") {
				out.Reason = d.Reason
			}
		}
	} else {
		out.Message = strings.TrimSpace(ae.Body)
	}
	if len(out.Message) > maxErrorMessage {
		out.Message = out.Message[:maxErrorMessage] + "..."
	}
	return out
}

// statusOf returns the HTTP status of an API error, 0 for any other error.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}

// maybeApplied says whether the server may have acted although the call
// failed: no answer at all, or a 5xx. For create and rotate that means a
// secret may have been issued that nobody saw.
func maybeApplied(err error) bool {
	code := statusOf(err)
	return code == 0 || code >= 500
}

// webhookError says what failed on webhook id; a 404 means there is no
// such webhook (also the answer to a retried delete whose first attempt
// deleted it). err has been through describe.
func webhookError(id string, err error) error {
	if statusOf(err) == http.StatusNotFound {
		return fmt.Errorf("webhook %s: no such webhook (see 'lrosink webhooks list'): %w", id, err)
	}
	return fmt.Errorf("webhook %s: %w", id, err)
}

// parseID parses the command line of a subcommand that acts on one webhook
// (d.Arg) and returns its ID.
func (r *runner) parseID(d command.Doc, fs *flag.FlagSet, args []string) (string, error) {
	pos, err := d.Parse(r.stdout, fs, args)
	if err != nil {
		return "", err
	}
	return webhookID(pos[0])
}

// webhookID accepts a bare id or the "webhooks/ID" resource-name form (the
// JS SDK's docs use it) and rejects what would change the request path.
func webhookID(arg string) (string, error) {
	id := strings.TrimPrefix(strings.TrimSpace(arg), "webhooks/")
	if id == "" || strings.ContainsAny(id, "/:?#% ") {
		return "", command.Usagef("invalid webhook ID %q (see 'lrosink webhooks list')", arg)
	}
	return id, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
