// Package submit creates Gemini long-running operations (batch jobs, Veo
// videos, background interactions, managed agents included) so that
// lrosink knows every one of them, even when the submitting process dies
// half-way.
//
// An operation missing from lrosink's ledger is invisible to every later
// path: no webhook delivery is trusted for it, no reconcile pass polls it.
// Creating the operation and then registering it leaves a window between
// the two in which a crash loses it (and videos and interactions have no
// list API to find it by). A Client closes the window the way durable
// start APIs do (Temporal's workflow id, Stripe's idempotency key):
//
//  1. record an intent under an idempotency key (the caller's, or a random
//     int_… one) in lrosink's ledger, through the Register function
//     (HTTP) or a ledger directly (embedded);
//  2. create the operation with webhook_config.user_metadata naming the
//     intent ("lrosink_intent": key) beside the caller's metadata,
//     snake_case on the wire (the genai Go SDK sends camelCase, which the
//     live API refuses: googleapis/go-genai#779);
//  3. bind the operation's name to the intent: the intent becomes the
//     operation's registration, its metadata kept exactly.
//
// A crash between 2 and 3 loses nothing and creates nothing twice: a
// delivery naming the intent binds it; for a batch, lrosink's adoption and
// a retried call with the same key find the job by listing; for a video or
// an interaction, a retried call refuses (ErrIntentUnbound) while the
// intent is unbound, and lrosink alerts an intent still unbound after its
// grace. Force creates anew under the same key.
//
// Minimal use, against a Register function:
//
//	g, _ := submit.NewGemini(submit.GeminiConfig{APIKey: os.Getenv("GEMINI_API_KEY")})
//	c, _ := submit.New(g, submit.HTTP("http://127.0.0.1:8080/Register", nil), submit.Options{})
//	sub, err := c.Video(ctx, submit.Video{Model: "veo-3.0-generate-001", Prompt: "a red balloon"})
//	// sub.Key is set even when err is not nil: give it back as Video.Key to retry.
package submit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/intentmatch"
	"github.com/lrosink/lrosink/internal/opname"
)

// DefaultInlineLimit is Options.InlineLimit's default: a batch input up to
// this size is sent inline in the create, a larger one goes up through the
// Files API first (the batch guide draws the line at 20 MB of request).
const DefaultInlineLimit = 1 << 20

// Options configures a Client.
type Options struct {
	// WebhookURIs, when set, are sent as webhook_config.uris: Gemini
	// delivers to them (a dynamic webhook) instead of the project's static
	// webhooks.
	WebhookURIs []string
	// InlineLimit is the largest batch input sent inline; 0:
	// DefaultInlineLimit.
	InlineLimit int64
	// Now is the clock for an intent's age in errors; nil: time.Now.
	Now func() time.Time
}

// Client submits operations. It is safe for concurrent use.
type Client struct {
	gemini  *Gemini
	intents Intents
	uris    []string
	inline  int64
	now     func() time.Time
}

// New returns a Client creating operations through g and recording and
// binding intents through intents.
func New(g *Gemini, intents Intents, o Options) (*Client, error) {
	if g == nil || intents == nil {
		return nil, errors.New("submit: New needs a Gemini and an Intents")
	}
	for _, u := range o.WebhookURIs {
		if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return nil, fmt.Errorf("submit: webhook URI %q is not an http(s) URL", u)
		}
	}
	c := &Client{gemini: g, intents: intents, uris: append([]string(nil), o.WebhookURIs...), inline: o.InlineLimit, now: o.Now}
	if c.inline <= 0 {
		c.inline = DefaultInlineLimit
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

// Completion says how an operation's completion reaches lrosink.
const (
	CompletionWebhook = "webhook" // a webhook delivers it (reconcile passes still back it up)
	CompletionPolling = "polling" // only lrosink's reconcile passes, asking Gemini
)

// Submission is what a call did.
type Submission struct {
	// Key is the intent key: the caller's, or the one generated. It is set
	// even when the call failed, so the caller can retry with it.
	Key  string
	Kind string
	// Operation is the canonical name (batches/ID, operations/ID,
	// interactions/ID); APIName the name to call Gemini with
	// (models/M/operations/ID for a video). Empty when nothing was created.
	Operation, APIName string
	// Existing: the key's operation existed already (bound, or a batch
	// found by listing); nothing was created.
	Existing bool
	// Completion is CompletionWebhook or CompletionPolling, and
	// CompletionReason why.
	Completion, CompletionReason string
}

// Batch is a batch job to submit. Input is JSONL, one request a line, as
// the batch API's input file holds them: {"key": "…", "request":
// {GenerateContentRequest}}. Up to InlineLimit bytes it is sent inline
// (each line's key becomes its request's metadata.key), above it uploaded
// through the Files API. FileName instead names an input already uploaded.
type Batch struct {
	Key   string // optional; generated when empty
	Force bool   // create anew although the key's intent is unbound
	Model string // "gemini-2.5-flash" or "models/gemini-2.5-flash"
	// DisplayName defaults to "lrosink-" + key.
	DisplayName string
	Metadata    map[string]any
	Input       io.Reader
	// InputSize is Input's size in bytes; below 0: unknown (uploaded).
	InputSize int64
	FileName  string
}

// Video is a Veo generation to submit.
type Video struct {
	Key      string
	Force    bool
	Model    string // "veo-3.0-generate-001" or "models/…"
	Prompt   string
	Metadata map[string]any
	// Parameters are sent as the request's "parameters" (aspectRatio,
	// durationSeconds, …) as they are.
	Parameters map[string]any
}

// Interaction is a background interaction to submit: with a model, or
// with a managed agent (Agent, e.g. deep-research-pro-preview-12-2025).
type Interaction struct {
	Key      string
	Force    bool
	Model    string
	Agent    string
	Input    string
	Metadata map[string]any
}

// Batch submits a batch job.
func (c *Client) Batch(ctx context.Context, b Batch) (Submission, error) {
	sub, err := newSubmission(b.Key, KindBatch)
	if err != nil {
		return sub, err
	}
	model, err := modelName(b.Model)
	if err != nil {
		return sub, err
	}
	if err := checkMetadata(b.Metadata); err != nil {
		return sub, err
	}
	display := b.DisplayName
	if display == "" {
		display = "lrosink-" + sub.Key
	}
	in, err := c.batchInput(b)
	if err != nil {
		return sub, err
	}
	intent := Intent{Key: sub.Key, Kind: KindBatch, Model: model, DisplayName: display, Metadata: b.Metadata}
	return c.run(ctx, sub, intent, b.Force, c.findBatch, func(ctx context.Context) (gemini.Created, error) {
		req := gemini.BatchRequest{Model: model, DisplayName: display, Webhook: c.webhook(sub.Key, b.Metadata)}
		switch {
		case b.FileName != "":
			req.FileName = b.FileName
		case in.inline != nil:
			req.Requests = in.inline
		default:
			name, err := c.gemini.creator.Upload(ctx, in.upload, b.InputSize, display)
			if err != nil {
				return gemini.Created{}, fmt.Errorf("%w (nothing was created)", err)
			}
			req.FileName = name
		}
		return c.gemini.creator.CreateBatch(ctx, req)
	})
}

// Video submits a Veo generation.
func (c *Client) Video(ctx context.Context, v Video) (Submission, error) {
	sub, err := newSubmission(v.Key, KindVideo)
	if err != nil {
		return sub, err
	}
	model, err := modelName(v.Model)
	if err != nil {
		return sub, err
	}
	if strings.TrimSpace(v.Prompt) == "" {
		return sub, invalid("a video needs a prompt")
	}
	if err := checkMetadata(v.Metadata); err != nil {
		return sub, err
	}
	intent := Intent{Key: sub.Key, Kind: KindVideo, Model: model, Metadata: v.Metadata}
	return c.run(ctx, sub, intent, v.Force, nil, func(ctx context.Context) (gemini.Created, error) {
		return c.gemini.creator.CreateVideo(ctx, gemini.VideoRequest{Model: model, Prompt: v.Prompt,
			Parameters: v.Parameters, Webhook: c.webhook(sub.Key, v.Metadata)})
	})
}

// Interaction submits a background interaction (a model's or an agent's).
func (c *Client) Interaction(ctx context.Context, i Interaction) (Submission, error) {
	sub, err := newSubmission(i.Key, KindInteraction)
	if err != nil {
		return sub, err
	}
	if (i.Model == "") == (i.Agent == "") {
		return sub, invalid("an interaction needs exactly one of a model and an agent")
	}
	model := i.Agent
	if i.Model != "" {
		if model, err = modelName(i.Model); err != nil {
			return sub, err
		}
	}
	if strings.TrimSpace(i.Input) == "" {
		return sub, invalid("an interaction needs an input")
	}
	if err := checkMetadata(i.Metadata); err != nil {
		return sub, err
	}
	intent := Intent{Key: sub.Key, Kind: KindInteraction, Model: model, Metadata: i.Metadata}
	return c.run(ctx, sub, intent, i.Force, nil, func(ctx context.Context) (gemini.Created, error) {
		return c.gemini.creator.CreateInteraction(ctx, gemini.InteractionRequest{Model: i.Model, Agent: i.Agent,
			Input: i.Input, Webhook: c.webhook(sub.Key, i.Metadata)})
	})
}

func newSubmission(key, kind string) (Submission, error) {
	sub := Submission{Key: key, Kind: kind}
	if key == "" {
		k, err := NewKey()
		if err != nil {
			return sub, err
		}
		sub.Key = k
	}
	return sub, CheckKey(sub.Key)
}

// modelName is the model as the intent keeps it: models/M.
func modelName(m string) (string, error) {
	m = strings.TrimSpace(m)
	id := strings.TrimPrefix(m, "models/")
	if id == "" || strings.ContainsAny(id, "/?#% ") {
		return "", invalid("model %q: want a model name such as gemini-2.5-flash", m)
	}
	return "models/" + id, nil
}

// checkMetadata refuses the reserved key and what is no JSON object (a
// value encoding/json cannot write), before anything is recorded.
func checkMetadata(m map[string]any) error {
	if _, ok := m[MetadataKey]; ok {
		return invalid("metadata key %q is reserved: submit puts the intent key there", MetadataKey)
	}
	if _, err := json.Marshal(m); err != nil {
		return invalid("metadata is not JSON: %v", err)
	}
	return nil
}

// webhook is the create's webhook_config: the caller's metadata plus the
// intent key, and the dynamic URIs if any.
func (c *Client) webhook(key string, meta map[string]any) gemini.WebhookConfig {
	m := maps.Clone(meta)
	if m == nil {
		m = map[string]any{}
	}
	m[MetadataKey] = key
	return gemini.WebhookConfig{URIs: c.uris, UserMetadata: m}
}

// batchInput is a batch's input as the create will send it.
type batchInput struct {
	inline []json.RawMessage // small input, converted
	upload io.Reader         // large input, checked, at its start
}

// batchInput checks the JSONL before anything is recorded: bad input
// records no intent. Small input is read and converted to inline
// requests; large input is checked in one pass when it can be rewound.
func (c *Client) batchInput(b Batch) (batchInput, error) {
	switch {
	case b.FileName != "" && b.Input != nil:
		return batchInput{}, invalid("give a batch's Input or its FileName, not both")
	case b.FileName != "":
		if !strings.HasPrefix(b.FileName, "files/") {
			return batchInput{}, invalid("FileName %q: want files/ID", b.FileName)
		}
		return batchInput{}, nil
	case b.Input == nil:
		return batchInput{}, invalid("a batch needs an Input (JSONL) or a FileName")
	}
	if b.InputSize >= 0 && b.InputSize <= c.inline {
		data, err := io.ReadAll(io.LimitReader(b.Input, c.inline+1))
		if err != nil {
			return batchInput{}, fmt.Errorf("submit: read the batch input: %w", err)
		}
		if int64(len(data)) <= c.inline {
			reqs, err := inlineRequests(data)
			return batchInput{inline: reqs}, err
		}
		return batchInput{}, invalid("the batch input is larger than its InputSize of %d bytes", b.InputSize)
	}
	if rs, ok := b.Input.(io.ReadSeeker); ok {
		if err := checkJSONL(rs); err != nil {
			return batchInput{}, err
		}
		if _, err := rs.Seek(0, io.SeekStart); err != nil {
			return batchInput{}, fmt.Errorf("submit: rewind the batch input: %w", err)
		}
	}
	return batchInput{upload: b.Input}, nil
}

// jsonlLine is one line of a batch input file.
type jsonlLine struct {
	Key     json.RawMessage `json:"key"`
	Request json.RawMessage `json:"request"`
}

func parseLine(n int, line []byte) (jsonlLine, error) {
	var l jsonlLine
	if err := json.Unmarshal(line, &l); err != nil {
		return l, invalid("batch input line %d is not a JSON object: %v", n, err)
	}
	if len(l.Request) == 0 || l.Request[0] != '{' {
		return l, invalid(`batch input line %d has no "request" object`, n)
	}
	return l, nil
}

// inlineRequests converts JSONL lines to inline requests
// ({"request": …, "metadata": {"key": …}}), refusing a bad line by number.
func inlineRequests(data []byte) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		l, err := parseLine(n+1, line)
		if err != nil {
			return nil, err
		}
		r := map[string]json.RawMessage{"request": l.Request}
		if len(l.Key) > 0 {
			r["metadata"] = json.RawMessage(`{"key":` + string(l.Key) + `}`)
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, invalid("batch input line %d: %v", n+1, err)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, invalid("the batch input holds no request")
	}
	return out, nil
}

// checkJSONL checks every line of a large input without keeping it.
func checkJSONL(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	n, seen := 0, 0
	for sc.Scan() {
		n++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if _, err := parseLine(n, sc.Bytes()); err != nil {
			return err
		}
		seen++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("submit: read the batch input: %w", err)
	}
	if seen == 0 {
		return invalid("the batch input holds no request")
	}
	return nil
}

// finder looks for the operation an unbound intent's earlier create made.
type finder func(ctx context.Context, st IntentStatus) (string, bool, error)

// findBatch lists batches for the intent's job, by the rule the
// reconciler's adoption follows too (intentmatch.Batch): its metadata names
// the intent, else its display name and model are the intent's.
func (c *Client) findBatch(ctx context.Context, st IntentStatus) (string, bool, error) {
	in := intentmatch.Intent{Key: st.Key, DisplayName: st.DisplayName, Model: st.Model, CreatedAt: st.CreatedAt}
	job, ok, err := c.gemini.creator.FindBatch(ctx, intentmatch.Since(in), func(j gemini.BatchJob) bool {
		return intentmatch.Batch(j.Match(), in)
	})
	return job.Name, ok, err
}

// run is the one submission protocol (CONTRACT.md §5): record, decide
// from the answer, create, bind.
func (c *Client) run(ctx context.Context, sub Submission, intent Intent, force bool, find finder,
	create func(context.Context) (gemini.Created, error)) (Submission, error) {
	st, err := c.intents.Record(ctx, intent)
	if err != nil {
		return sub, fmt.Errorf("submit: %w", err)
	}
	if st.State == StateBound {
		sub.Existing = true
		return c.done(ctx, sub, st.APIName, st.Name)
	}
	if !st.Recorded {
		if find != nil {
			name, ok, err := find(ctx, st)
			if err != nil {
				return sub, fmt.Errorf("submit: intent %s is unbound and its batch could not be looked for: %w", sub.Key, err)
			}
			if ok {
				if _, err := c.intents.Bind(ctx, sub.Key, name); err != nil {
					sub.APIName = name
					return sub, fmt.Errorf("submit: found %s for intent %s but could not bind it: %w", name, sub.Key, err)
				}
				sub.Existing = true
				return c.done(ctx, sub, name, "")
			}
		}
		if !force {
			return sub, c.unbound(st)
		}
	}
	created, err := create(ctx)
	switch {
	case errors.Is(err, ErrCreateRefused):
		return sub, fmt.Errorf("submit: create the %s of intent %s: %w; the intent stays recorded, unbound: retry with the same key and --force (Force), or with a new key",
			sub.Kind, sub.Key, err)
	case err != nil && sub.Kind == KindBatch:
		return sub, fmt.Errorf("submit: create the %s of intent %s: %w; retry with the same key: a batch it created is found by listing, none is created twice",
			sub.Kind, sub.Key, err)
	case err != nil:
		return sub, fmt.Errorf("submit: create the %s of intent %s: %w; if it was created, its first trusted delivery binds the intent, and an intent still unbound after its grace is alerted; "+
			"a retry with the same key is refused until then, --force (Force) creates anew", sub.Kind, sub.Key, err)
	}
	if _, err := c.intents.Bind(ctx, sub.Key, created.Name); err != nil {
		sub, _ = c.done(ctx, sub, created.Name, "")
		return sub, &BindError{Key: sub.Key, Operation: created.Name, Err: err}
	}
	return c.done(ctx, sub, created.Name, "")
}

// done fills in the operation's names and how its completion arrives.
func (c *Client) done(ctx context.Context, sub Submission, apiName, canonical string) (Submission, error) {
	if apiName == "" {
		apiName = canonical
	}
	sub.APIName = apiName
	sub.Operation = canonical
	if n, err := opname.Normalize(apiName, opname.KindUnknown); err == nil {
		sub.Operation = n.Canonical
	}
	sub.Completion, sub.CompletionReason = c.completion(ctx)
	return sub, nil
}

// completion says how completion will arrive. Listing the project's
// webhooks is best effort: failing to, it says polling and why.
func (c *Client) completion(ctx context.Context) (string, string) {
	if len(c.uris) > 0 {
		return CompletionWebhook, fmt.Sprintf("a dynamic webhook: Gemini delivers to %s (v1a-signed deliveries, confirmed with Gemini before they settle anything)", strings.Join(c.uris, ", "))
	}
	id, uri, ok, err := c.gemini.enabledWebhook(ctx)
	switch {
	case err != nil:
		return CompletionPolling, fmt.Sprintf("the project's webhooks could not be read (%v): lrosink's reconcile passes poll Gemini after LROSINK_GRACE", err)
	case ok:
		return CompletionWebhook, fmt.Sprintf("the project's static webhook %s delivers to %s (reconcile passes poll too, for a delivery that is lost)", id, uri)
	}
	return CompletionPolling, "the project has no enabled webhook: lrosink's reconcile passes poll Gemini after LROSINK_GRACE (no public URL needed)"
}

// ErrIntentUnbound is matched (errors.Is) by the error of a retried
// submission whose intent is recorded but bound to no operation, and no
// batch was found for it: its first create may be in flight, may have
// failed, or may have succeeded with the answer lost. Nothing is created
// unless Force is set.
var ErrIntentUnbound = errors.New("submit: intent is unbound")

// UnboundError is ErrIntentUnbound with what is known of the intent.
type UnboundError struct {
	Key, Kind string
	Age       time.Duration // since the intent was recorded
	Grace     time.Duration // LROSINK_INTENT_GRACE as the ledger applies it
}

// Alerted reports whether the intent is past its grace: lrosink alerts it
// (intent-unbound) until it is bound.
func (e *UnboundError) Alerted() bool { return e.Grace > 0 && e.Age >= e.Grace }

func (e *UnboundError) Error() string {
	age := e.Age.Round(time.Second)
	if e.Alerted() {
		return fmt.Sprintf("submit: intent %s (%s) is still bound to no Gemini operation %v after it was recorded, past its grace of %v: "+
			"it is alerted (intent-unbound); check Gemini for the operation; use --force (Force) to create anew with the same key",
			e.Key, e.Kind, age, e.Grace)
	}
	grace := "its grace"
	if e.Grace > 0 {
		grace = fmt.Sprintf("its grace of %v", e.Grace)
	}
	return fmt.Sprintf("submit: intent %s (%s) was recorded %v ago and is not bound to a Gemini operation yet (within %s): "+
		"its first create may still be in flight, or its answer was lost; nothing was created now. Wait for its webhook to bind it, "+
		"or use --force (Force) to create anew with the same key", e.Key, e.Kind, age, grace)
}

// Is matches ErrIntentUnbound.
func (e *UnboundError) Is(target error) bool { return target == ErrIntentUnbound }

func (c *Client) unbound(st IntentStatus) error {
	e := &UnboundError{Key: st.Key, Kind: st.Kind}
	if e.Kind == "" {
		e.Kind = "unknown kind"
	}
	if !st.CreatedAt.IsZero() {
		e.Age = max(c.now().Sub(st.CreatedAt), 0)
		if !st.GraceUntil.IsZero() {
			e.Grace = st.GraceUntil.Sub(st.CreatedAt)
		}
	}
	return e
}

// BindError is a create that succeeded whose bind failed: the operation
// exists (Operation) and nothing is lost, since its deliveries name the
// intent and lrosink binds it on the first one it trusts (and adoption
// finds a batch); until then `lrosink register OPERATION` registers it.
type BindError struct {
	Key, Operation string
	Err            error
}

func (e *BindError) Error() string {
	return fmt.Sprintf("submit: created %s but could not bind it to intent %s: %v; nothing is lost: its first trusted delivery "+
		"(user_metadata names the intent) binds it, and so does adoption for a batch; 'lrosink register %s' registers it now",
		e.Operation, e.Key, e.Err, e.Operation)
}

func (e *BindError) Unwrap() error { return e.Err }
