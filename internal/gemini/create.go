package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"
	"google.golang.org/genai/interactions/models/apierrors"
	"google.golang.org/genai/interactions/models/interactions"
	"google.golang.org/genai/interactions/models/operations"
	"google.golang.org/genai/interactions/retry"
)

// Creator creates Gemini operations (batch jobs, Veo videos, background
// interactions) and uploads batch input, with the Fetcher's client, key,
// base URL and error handling. A create is never retried, by the Creator
// or the SDK: one answered but lost in transit would make a second
// operation, and exactly one per submission is the point (GEMINI.md §13).
type Creator struct{ f *Fetcher }

// NewCreator returns a Creator over f's client and configuration.
func NewCreator(f *Fetcher) *Creator { return &Creator{f: f} }

// WebhookConfig is what a create sends as webhook_config: dynamic URIs
// (none: the project's static webhooks deliver) and the user metadata
// Gemini returns with the operation's deliveries.
type WebhookConfig struct {
	URIs         []string
	UserMetadata map[string]any
}

// wire is the config on the wire, snake_case throughout: the live API
// refuses the camelCase "userMetadata" the genai SDK v1.77.0 sends
// (googleapis/go-genai#779, GEMINI.md §13), which is why batches and
// videos are created with a raw body. nil when there is nothing to send.
func (w WebhookConfig) wire() map[string]any {
	out := map[string]any{}
	if len(w.URIs) > 0 {
		out["uris"] = w.URIs
	}
	if len(w.UserMetadata) > 0 {
		out["user_metadata"] = w.UserMetadata
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// BatchRequest is a batch job to create: exactly one of FileName (an
// uploaded files/ID holding JSONL requests) and Requests (inline, each
// {"request": GenerateContentRequest, "metadata": {…}}).
type BatchRequest struct {
	Model       string // "gemini-2.5-flash" or "models/gemini-2.5-flash"
	DisplayName string
	FileName    string
	Requests    []json.RawMessage
	Webhook     WebhookConfig
}

// VideoRequest is a Veo generation to start. Parameters, when set, is sent
// as "parameters" (aspectRatio, durationSeconds, …) as it is.
type VideoRequest struct {
	Model      string // "veo-3.0-generate-001" or "models/veo-3.0-generate-001"
	Prompt     string
	Parameters map[string]any
	Webhook    WebhookConfig
}

// InteractionRequest is a background interaction to start, with exactly
// one of Model (a model interaction) and Agent (a managed agent).
type InteractionRequest struct {
	Model, Agent string
	Input        string
	Webhook      WebhookConfig
}

// Created is what a create answered.
type Created struct {
	// Name is the API name: batches/ID, models/M/operations/ID or
	// interactions/ID.
	Name        string
	DisplayName string
	Model       string
	CreateTime  time.Time // zero when the answer has none
}

// The two ways a create fails, told apart because only one of them may
// leave an operation behind (match with errors.Is).
var (
	// ErrCreateRefused: Gemini answered the create with a refusal (a 4xx:
	// a bad request, a refused key, a quota). Nothing was created.
	ErrCreateRefused = errors.New("Gemini refused the create: nothing was created")
	// ErrCreateUnknown: no answer came back (a transport error, the
	// caller's context ended) or a 5xx did: the operation may have been
	// created.
	ErrCreateUnknown = errors.New("the create's outcome is unknown: Gemini may have created the operation")
)

// CreateError is a failed create. Its text never holds the API key.
type CreateError struct {
	Refused bool // else: outcome unknown
	Err     error
}

func (e *CreateError) Error() string {
	if e.Refused {
		return e.Err.Error() + " (" + ErrCreateRefused.Error() + ")"
	}
	return e.Err.Error() + " (" + ErrCreateUnknown.Error() + ")"
}

func (e *CreateError) Unwrap() error { return e.Err }

// Is makes the error match ErrCreateRefused or ErrCreateUnknown.
func (e *CreateError) Is(target error) bool {
	return target == ErrCreateRefused && e.Refused || target == ErrCreateUnknown && !e.Refused
}

// createError classifies a create's failure: a refused key is described
// from its status alone (keyError), and every text is scrubbed of the key.
func (c *Creator) createError(op string, err error) error {
	err = interactionCreateStatus(err)
	if kerr, ok := asKeyError(op, err); ok {
		return &CreateError{Refused: true, Err: scrub(kerr, c.f.apiKey)}
	}
	st, ok := statusOf(err)
	refused := ok && st.Code >= 400 && st.Code < 500 && st.Code != http.StatusRequestTimeout && st.Code != statusCancelled
	return &CreateError{Refused: refused, Err: scrub(fmt.Errorf("gemini: %s: %w", op, err), c.f.apiKey)}
}

// interactionCreateStatus turns the Interactions client's typed create
// errors (a body that matched its error schema) into an *httpError so the
// status is read like every other answer's.
func interactionCreateStatus(err error) error {
	var ce *apierrors.CreateInteractionClientError
	var se *apierrors.CreateInteractionServerError
	var resp *http.Response
	var msg string
	switch {
	case errors.As(err, &ce):
		resp, msg = ce.HTTPMeta.Response, deref(ce.Error_.Message)
	case errors.As(err, &se):
		resp, msg = se.HTTPMeta.Response, deref(se.Error_.Message)
	default:
		return describeInteractionError(err)
	}
	if resp == nil {
		return err
	}
	return fmt.Errorf("%w: %w", &httpError{Code: resp.StatusCode, Message: msg}, err)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// modelID checks a model (or agent) name and returns it without "models/":
// it becomes part of the request path, so anything but a plain id is
// refused before a call is made.
func modelID(what, name string) (string, error) {
	id := strings.TrimPrefix(strings.TrimSpace(name), "models/")
	if id == "" {
		return "", fmt.Errorf("gemini: %s is required", what)
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		if !isAlnum(ch) && ch != '-' && ch != '.' && ch != '_' {
			return "", fmt.Errorf("gemini: %s %q: want a name such as gemini-2.5-flash (letters, digits, '-', '.', '_')", what, name)
		}
	}
	return id, nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// CreateBatch creates a batch job (POST models/{m}:batchGenerateContent).
func (c *Creator) CreateBatch(ctx context.Context, r BatchRequest) (Created, error) {
	model, err := modelID("model", r.Model)
	if err != nil {
		return Created{}, err
	}
	if (r.FileName == "") == (len(r.Requests) == 0) {
		return Created{}, errors.New("gemini: create batch: give exactly one of FileName and Requests")
	}
	input := map[string]any{}
	if r.FileName != "" {
		input["file_name"] = r.FileName
	} else {
		input["requests"] = map[string]any{"requests": r.Requests}
	}
	batch := map[string]any{"display_name": r.DisplayName, "input_config": input}
	if w := r.Webhook.wire(); w != nil {
		batch["webhook_config"] = w
	}
	var op struct {
		Name     string `json:"name"`
		Metadata struct {
			DisplayName string    `json:"displayName"`
			Model       string    `json:"model"`
			CreateTime  time.Time `json:"createTime"`
		} `json:"metadata"`
	}
	if err := c.post(ctx, "create batch", "models/"+model+":batchGenerateContent", map[string]any{"batch": batch}, &op); err != nil {
		return Created{}, err
	}
	if !strings.HasPrefix(op.Name, "batches/") {
		return Created{}, &CreateError{Err: fmt.Errorf("gemini: create batch: the answer names no batch (%q)", op.Name)}
	}
	return Created{Name: op.Name, DisplayName: op.Metadata.DisplayName, Model: op.Metadata.Model, CreateTime: op.Metadata.CreateTime}, nil
}

// CreateVideo starts a Veo generation (POST models/{m}:predictLongRunning).
func (c *Creator) CreateVideo(ctx context.Context, r VideoRequest) (Created, error) {
	model, err := modelID("model", r.Model)
	if err != nil {
		return Created{}, err
	}
	if strings.TrimSpace(r.Prompt) == "" {
		return Created{}, errors.New("gemini: create video: a prompt is required")
	}
	body := map[string]any{"instances": []any{map[string]any{"prompt": r.Prompt}}}
	if len(r.Parameters) > 0 {
		body["parameters"] = r.Parameters
	}
	if w := r.Webhook.wire(); w != nil {
		body["webhook_config"] = w
	}
	var op struct {
		Name string `json:"name"`
	}
	if err := c.post(ctx, "create video", "models/"+model+":predictLongRunning", body, &op); err != nil {
		return Created{}, err
	}
	if !strings.HasPrefix(op.Name, "models/") || !strings.Contains(op.Name, "/operations/") {
		return Created{}, &CreateError{Err: fmt.Errorf("gemini: create video: the answer names no operation (%q)", op.Name)}
	}
	return Created{Name: op.Name, Model: "models/" + model}, nil
}

// CreateInteraction starts a background interaction through the
// Interactions client, which serializes webhook_config.user_metadata
// snake_case (and json.Number as its literal); its own retries are off.
func (c *Creator) CreateInteraction(ctx context.Context, r InteractionRequest) (Created, error) {
	if (r.Model == "") == (r.Agent == "") {
		return Created{}, errors.New("gemini: create interaction: give exactly one of Model and Agent")
	}
	if strings.TrimSpace(r.Input) == "" {
		return Created{}, errors.New("gemini: create interaction: an input is required")
	}
	bg := true
	in := interactions.NewInteractionsInput(r.Input)
	var hook *interactions.WebhookConfig
	if len(r.Webhook.URIs) > 0 || len(r.Webhook.UserMetadata) > 0 {
		hook = &interactions.WebhookConfig{Uris: r.Webhook.URIs, UserMetadata: r.Webhook.UserMetadata}
	}
	var body operations.CreateInteractionRequestBody
	created := Created{}
	if r.Model != "" {
		model, err := modelID("model", r.Model)
		if err != nil {
			return Created{}, err
		}
		created.Model = "models/" + model
		body = operations.NewCreateInteractionRequestBody(interactions.CreateModelInteraction{
			Model: interactions.Model(model), Background: &bg, Input: &in, WebhookConfig: hook})
	} else {
		agent, err := modelID("agent", r.Agent)
		if err != nil {
			return Created{}, err
		}
		created.Model = agent
		body = operations.NewCreateInteractionRequestBody(interactions.CreateAgentInteraction{
			Agent: interactions.AgentOption(agent), Background: &bg, Input: &in, WebhookConfig: hook})
	}
	resp, err := c.f.client.Interactions.Create(ctx, operations.CreateInteractionRequest{Body: body},
		operations.WithRetries(retry.Config{Strategy: "none"}))
	if err != nil {
		return Created{}, c.createError("create interaction", err)
	}
	if resp == nil || resp.Interaction == nil || resp.Interaction.ID == nil || *resp.Interaction.ID == "" {
		return Created{}, &CreateError{Err: errors.New("gemini: create interaction: the answer names no interaction")}
	}
	created.Name = "interactions/" + *resp.Interaction.ID
	if t := resp.Interaction.Created; t != nil {
		created.CreateTime, _ = time.Parse(time.RFC3339Nano, *t)
	}
	return created, nil
}

// Upload puts a batch's JSONL input up through the SDK's Files.Upload (the
// resumable protocol, GEMINI.md §13) and returns its files/ID. size, when
// known (> 0), is announced to the API.
func (c *Creator) Upload(ctx context.Context, r io.Reader, size int64, displayName string) (string, error) {
	opts := &genai.HTTPOptions{Headers: http.Header{}}
	if size > 0 {
		opts.Headers.Set("X-Goog-Upload-Header-Content-Length", strconv.FormatInt(size, 10))
	}
	// "jsonl" is the MIME type the batch guide uploads input with.
	f, err := c.f.client.Files.Upload(ctx, r, &genai.UploadFileConfig{MIMEType: "jsonl", DisplayName: displayName, HTTPOptions: opts})
	if err != nil {
		return "", scrub(fmt.Errorf("gemini: upload batch input: %w", err), c.f.apiKey)
	}
	if f == nil || !strings.HasPrefix(f.Name, "files/") {
		return "", errors.New("gemini: upload batch input: the answer names no file")
	}
	return f.Name, nil
}

// maxCreateAnswer bounds a create's (or a list page's) answer.
const maxCreateAnswer = 16 << 20

// post sends body to {BaseURL}/{version}/{path} once and decodes a 2xx
// answer into out. Failures are *CreateError.
func (c *Creator) post(ctx context.Context, op, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		// Nothing was sent; not a CreateError, since Gemini said nothing.
		return fmt.Errorf("gemini: %s: encode the request: %w", op, err)
	}
	raw, err := c.f.rawDo(ctx, http.MethodPost, path, b)
	if err != nil {
		return c.createError(op, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		// Answered 2xx: the operation exists, whatever the body says.
		return &CreateError{Err: fmt.Errorf("gemini: %s: decode the answer: %w", op, err)}
	}
	return nil
}

// rawDo is one request to {BaseURL}/{version}/{path} with the client's
// headers and key; a non-2xx answer is an *httpError.
func (f *Fetcher) rawDo(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	u := f.apiRoot.JoinPath(path)
	if p, q, ok := strings.Cut(path, "?"); ok {
		u = f.apiRoot.JoinPath(p)
		u.RawQuery = q
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, v := range f.headers {
		req.Header[k] = append([]string(nil), v...)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("x-goog-api-key", f.apiKey)
	resp, err := f.raw.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxCreateAnswer))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		he := newHTTPError(resp.StatusCode, answer)
		he.RetryAfter = resp.Header.Get("Retry-After")
		return nil, he
	}
	return answer, nil
}
