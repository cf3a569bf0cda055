package fakegemini

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// BatchState scripts what GET /v1beta/batches/{id} answers. The JSON keys
// are the ones genai's batchJobFromMldev reads.
type BatchState struct {
	// State is sent verbatim as metadata.state, e.g. "BATCH_STATE_RUNNING";
	// the SDK maps BATCH_STATE_* to JOB_STATE_* and passes anything else
	// through. "" omits the field.
	State       string
	DisplayName string
	Model       string
	// Zero times are omitted; a missing updateTime is how the real API gives
	// the SDK a zero BatchJob.UpdateTime.
	CreateTime time.Time
	UpdateTime time.Time
	EndTime    time.Time
	// ErrorCode/ErrorMessage fill the Operation's top-level "error" (the SDK
	// never maps it in Gemini mode; only a raw GET sees it).
	ErrorCode    int
	ErrorMessage string
	// ResponsesFile is metadata.output.responsesFile (and response.responsesFile).
	ResponsesFile string
	// InlinedResponses is how many inlined responses metadata.output carries.
	InlinedResponses int
	// Done overrides the Operation's done flag; nil derives it from State
	// (SUCCEEDED, FAILED, CANCELLED and EXPIRED are done).
	Done *bool
	// Stats, when set, is sent as metadata.batchStats (the SDK drops it in
	// Gemini mode; only a raw GET sees it).
	Stats *BatchStats
	// NotFoundUntil, when set, makes the batch unknown (GET 404, not
	// listed) until that time on the fake's clock (WithClock): a genuine
	// operation the API does not know yet (GEMINI.md §10).
	NotFoundUntil time.Time
	// Webhook is the webhook_config the batch was created with, echoed as
	// metadata.webhookConfig (whether live echoes it is unconfirmed,
	// GEMINI.md §13); nil omits it.
	Webhook *WebhookConfig
	// InputFile and InputRequests say what a create gave as input: the
	// Files API name, or how many inline requests. Never sent; tests read
	// them through Batch.
	InputFile     string
	InputRequests int
}

// WebhookConfig is a create's webhook_config: dynamic URIs (none: the
// project's static webhooks) and the user metadata Gemini returns with the
// operation's deliveries. Numbers in UserMetadata are json.Number, the
// literal the client sent.
type WebhookConfig struct {
	URIs         []string
	UserMetadata map[string]any
}

func (w *WebhookConfig) clone() *WebhookConfig {
	if w == nil {
		return nil
	}
	return &WebhookConfig{URIs: slices.Clone(w.URIs), UserMetadata: cloneJSON(w.UserMetadata)}
}

// cloneJSON deep-copies a decoded JSON object, so a caller's later change
// to what it gave or got does not reach the fake's state.
func cloneJSON(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneJSONValue(v)
	}
	return out
}

func cloneJSONValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneJSON(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneJSONValue(e)
		}
		return out
	}
	return v
}

// webhookConfigJSON is the config as an answer prints it: the container in
// lowerCamel (as every field of the batch's metadata) for batches, but
// user_metadata, the only name the live API knows for that field
// (GEMINI.md §13), inside.
type webhookConfigJSON struct {
	URIs         []string       `json:"uris,omitempty"`
	UserMetadata map[string]any `json:"user_metadata,omitempty"`
}

func (w *WebhookConfig) body() *webhookConfigJSON {
	if w == nil {
		return nil
	}
	return &webhookConfigJSON{URIs: w.URIs, UserMetadata: w.UserMetadata}
}

// BatchStats is metadata.batchStats. The API encodes the int64 counts as
// strings and, like any proto3 JSON, omits zeros: "" omits a field.
type BatchStats struct {
	RequestCount           string `json:"requestCount,omitempty"`
	SuccessfulRequestCount string `json:"successfulRequestCount,omitempty"`
	FailedRequestCount     string `json:"failedRequestCount,omitempty"`
	PendingRequestCount    string `json:"pendingRequestCount,omitempty"`
}

// VideoState scripts GET /v1beta/models/{m}/operations/{id}, a
// google.longrunning.Operation. Operations carry no update time.
type VideoState struct {
	Done bool
	// ErrorCode/ErrorMessage fill "error" (a google.rpc.Status).
	ErrorCode    int
	ErrorMessage string
	// Error, when non-nil, is sent verbatim as "error" instead, to model
	// statuses with fields missing or added ({}, a status name, details).
	Error map[string]any
	// VideoURIs become response.generateVideoResponse.generatedSamples[].video.uri
	// (FileDownloadURI gives the live shape); the response is sent only when
	// Done and no error is set. With none, generatedSamples is left out, as
	// in the live answer for a prompt whose every video was RAI-filtered.
	VideoURIs               []string
	RAIMediaFilteredCount   int
	RAIMediaFilteredReasons []string
	// Webhook is the webhook_config the operation was created with. It is
	// not echoed in the Operation (no capture shows it there, GEMINI.md
	// §13), only in its deliveries (Server.Delivery).
	Webhook *WebhookConfig
	// Prompt is what the create asked for. Never sent.
	Prompt string
}

// InteractionState scripts GET /v1beta/interactions/{id}, which answers in
// snake_case.
type InteractionState struct {
	// Status is sent verbatim, e.g. "in_progress", "completed", or the end
	// states that have no webhook event: "incomplete", "budget_exceeded".
	Status  string
	Created time.Time // zero omits "created"
	Updated time.Time // zero omits "updated"
	// UpdatedRaw, when set, is sent as "updated" instead of Updated, to
	// model values a client cannot parse.
	UpdatedRaw string
	// ErrorCode/ErrorMessage become one entry of "errors" (code is a string
	// in the Interactions API).
	ErrorCode    string
	ErrorMessage string
	// OutputText becomes one model_output step with a text content; the SDK
	// derives Interaction.OutputText from the steps.
	OutputText string
	// StepError, when set, becomes a model_output step's "error" (a
	// google.rpc.Status): where a failed interaction's error can sit while
	// its top-level errors[] is empty (GEMINI.md §10).
	StepError *StepError
	// NotFoundUntil, when set, makes GET answer 404 until that time on the
	// fake's clock (WithClock), as the live API has for a background
	// interaction right after its create (GEMINI.md §10).
	NotFoundUntil time.Time
	// Model or Agent is what the interaction was created for ("model" or
	// "agent" in the answer; "" omits it).
	Model, Agent string
	// Webhook is echoed as webhook_config, as a live create's answer does
	// (GEMINI.md §13); nil omits it.
	Webhook *WebhookConfig
}

// StepError is the google.rpc.Status of a model_output step.
type StepError struct {
	Code    int // google.rpc.Code, e.g. 13 INTERNAL; 0 omits it
	Message string
}

// FileDownloadURI is the live shape of a generated file's URI (a Veo
// video's generatedSamples[].video.uri): the Files API download of
// files/{id}.
func FileDownloadURI(id string) string {
	return "https://generativelanguage.googleapis.com/v1beta/files/" + id + ":download?alt=media"
}

// ResponsesFile is the live shape of a batch's output file name
// (metadata.output.responsesFile): a Files API resource name.
func ResponsesFile(batchID string) string { return "files/batch-" + batchID }

// SetBatch creates or replaces batch job batches/{id}.
func (s *Server) SetBatch(id string, st BatchState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setBatch(id, st)
}

// setBatch is SetBatch with s.mu held.
func (s *Server) setBatch(id string, st BatchState) {
	if _, ok := s.batches[id]; !ok {
		s.batchOrder = append(s.batchOrder, id)
	}
	if st.Stats != nil {
		c := *st.Stats
		st.Stats = &c
	}
	st.Webhook = st.Webhook.clone()
	s.batches[id] = st
}

// Batch returns batches/{id} as stored (a copy): a test moves a created
// batch on by changing what it got and setting it again.
func (s *Server) Batch(id string) (BatchState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.batches[id]
	if !ok {
		return BatchState{}, false
	}
	if st.Stats != nil {
		c := *st.Stats
		st.Stats = &c
	}
	st.Webhook = st.Webhook.clone()
	return st, true
}

// DeleteBatch removes batches/{id}; later GETs answer 404.
func (s *Server) DeleteBatch(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.batches[id]; !ok {
		return
	}
	delete(s.batches, id)
	for i, b := range s.batchOrder {
		if b == id {
			s.batchOrder = append(s.batchOrder[:i:i], s.batchOrder[i+1:]...)
			break
		}
	}
}

// SetVideo creates or replaces models/{model}/operations/{id}.
func (s *Server) SetVideo(model, id string, st VideoState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.videos[videoKey(model, id)] = st.clone()
}

func (st VideoState) clone() VideoState {
	st.VideoURIs = append([]string(nil), st.VideoURIs...)
	st.RAIMediaFilteredReasons = append([]string(nil), st.RAIMediaFilteredReasons...)
	st.Error = maps.Clone(st.Error)
	st.Webhook = st.Webhook.clone()
	return st
}

// Video returns models/{model}/operations/{id} as stored (a copy).
func (s *Server) Video(model, id string) (VideoState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.videos[videoKey(model, id)]
	if !ok {
		return VideoState{}, false
	}
	return st.clone(), true
}

// DeleteVideo removes models/{model}/operations/{id}.
func (s *Server) DeleteVideo(model, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.videos, videoKey(model, id))
}

// SetInteraction creates or replaces interactions/{id}.
func (s *Server) SetInteraction(id string, st InteractionState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interactions[id] = st.clone()
}

func (st InteractionState) clone() InteractionState {
	if st.StepError != nil {
		c := *st.StepError
		st.StepError = &c
	}
	st.Webhook = st.Webhook.clone()
	return st
}

// Interaction returns interactions/{id} as stored (a copy).
func (s *Server) Interaction(id string) (InteractionState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.interactions[id]
	if !ok {
		return InteractionState{}, false
	}
	return st.clone(), true
}

// DeleteInteraction removes interactions/{id}.
func (s *Server) DeleteInteraction(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.interactions, id)
}

func videoKey(model, id string) string { return model + "/" + id }

// ---- batches ----

type rpcStatusJSON struct {
	Code    int    `json:"code"`
	Message string `json:"message,omitempty"`
}

type batchOutputJSON struct {
	ResponsesFile    string                `json:"responsesFile,omitempty"`
	InlinedResponses *inlinedResponsesJSON `json:"inlinedResponses,omitempty"`
}

type inlinedResponsesJSON struct {
	InlinedResponses []map[string]any `json:"inlinedResponses"`
}

type batchMetadataJSON struct {
	Type        string             `json:"@type"`
	Name        string             `json:"name"`
	Model       string             `json:"model,omitempty"`
	DisplayName string             `json:"displayName,omitempty"`
	State       string             `json:"state,omitempty"`
	CreateTime  string             `json:"createTime,omitempty"`
	UpdateTime  string             `json:"updateTime,omitempty"`
	EndTime     string             `json:"endTime,omitempty"`
	Output      *batchOutputJSON   `json:"output,omitempty"`
	BatchStats  *BatchStats        `json:"batchStats,omitempty"`
	Webhook     *webhookConfigJSON `json:"webhookConfig,omitempty"`
}

type batchJSON struct {
	Name     string            `json:"name"`
	Metadata batchMetadataJSON `json:"metadata"`
	Done     bool              `json:"done,omitempty"`
	Error    *rpcStatusJSON    `json:"error,omitempty"`
	Response map[string]any    `json:"response,omitempty"`
}

func batchBody(id string, st BatchState) batchJSON {
	name := "batches/" + id
	b := batchJSON{
		Name: name,
		Metadata: batchMetadataJSON{
			Type:        "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
			Name:        name,
			Model:       st.Model,
			DisplayName: st.DisplayName,
			State:       st.State,
			CreateTime:  rfc3339(st.CreateTime),
			UpdateTime:  rfc3339(st.UpdateTime),
			EndTime:     rfc3339(st.EndTime),
			BatchStats:  st.Stats,
			Webhook:     st.Webhook.body(),
		},
		Done: terminalBatchState(st.State),
	}
	if st.Done != nil {
		b.Done = *st.Done
	}
	if st.ErrorCode != 0 || st.ErrorMessage != "" {
		b.Error = &rpcStatusJSON{Code: st.ErrorCode, Message: st.ErrorMessage}
	}
	if st.ResponsesFile != "" || st.InlinedResponses > 0 {
		out := &batchOutputJSON{ResponsesFile: st.ResponsesFile}
		if st.InlinedResponses > 0 {
			out.InlinedResponses = &inlinedResponsesJSON{}
			for i := range st.InlinedResponses {
				out.InlinedResponses.InlinedResponses = append(out.InlinedResponses.InlinedResponses, map[string]any{
					"response": map[string]any{"candidates": []any{map[string]any{
						"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": "response " + strconv.Itoa(i)}}},
					}}},
				})
			}
		}
		b.Metadata.Output = out
	}
	if st.ResponsesFile != "" && b.Done && b.Error == nil {
		b.Response = map[string]any{
			"@type":         "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
			"responsesFile": st.ResponsesFile,
		}
	}
	return b
}

func terminalBatchState(state string) bool {
	s := strings.TrimPrefix(strings.TrimPrefix(state, "BATCH_STATE_"), "JOB_STATE_")
	switch s {
	case "SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED":
		return true
	}
	return false
}

// known reports whether the API knows an operation scripted to stay
// unknown until until (zero: known at once). Called with s.mu held.
func (s *Server) known(until time.Time) bool {
	return until.IsZero() || !s.now().Before(until)
}

func (s *Server) getBatch(id string) response {
	st, ok := s.batches[id]
	if !ok || !s.known(st.NotFoundUntil) {
		return notFound()
	}
	return jsonResponse(http.StatusOK, batchBody(id, st))
}

// defaultPageSize is what the list endpoints use without a pageSize.
const defaultPageSize = 50

// maxPageSize caps pageSize like the real API's documented maximum.
const maxPageSize = 1000

// page slices n items by pageSize/pageToken. Tokens are the decimal offset
// prefixed with "p", opaque to clients.
func page(n int, sizeParam, tokenParam string) (start, end int, next string, errResp *response) {
	size := defaultPageSize
	if sizeParam != "" {
		v, err := strconv.Atoi(sizeParam)
		if err != nil || v < 0 {
			r := badRequest("invalid page size " + strconv.Quote(sizeParam))
			return 0, 0, "", &r
		}
		if v > 0 {
			size = min(v, maxPageSize)
		}
	}
	if tokenParam != "" {
		off, err := strconv.Atoi(strings.TrimPrefix(tokenParam, "p"))
		if err != nil || !strings.HasPrefix(tokenParam, "p") || off < 0 || off > n {
			r := badRequest("invalid page token " + strconv.Quote(tokenParam))
			return 0, 0, "", &r
		}
		start = off
	}
	end = min(start+size, n)
	if end < n {
		next = "p" + strconv.Itoa(end)
	}
	return start, end, next, nil
}

// listBatches answers newest first, as the live batches.list does
// (GEMINI.md §8): by CreateTime, latest first, and among equal (or unset)
// create times the batch first Set last comes first.
func (s *Server) listBatches(q url.Values) response {
	order := slices.DeleteFunc(slices.Clone(s.batchOrder), func(id string) bool { return !s.known(s.batches[id].NotFoundUntil) })
	slices.Reverse(order)
	slices.SortStableFunc(order, func(a, b string) int { return s.batches[b].CreateTime.Compare(s.batches[a].CreateTime) })
	start, end, next, errResp := page(len(order), q.Get("pageSize"), q.Get("pageToken"))
	if errResp != nil {
		return *errResp
	}
	ops := make([]batchJSON, 0, end-start)
	for _, id := range order[start:end] {
		ops = append(ops, batchBody(id, s.batches[id]))
	}
	return jsonResponse(http.StatusOK, struct {
		Operations    []batchJSON `json:"operations"`
		NextPageToken string      `json:"nextPageToken,omitempty"`
	}{ops, next})
}

// ---- videos ----

type videoJSON struct {
	Name     string         `json:"name"`
	Done     bool           `json:"done,omitempty"`
	Error    any            `json:"error,omitempty"`
	Response map[string]any `json:"response,omitempty"`
}

func (s *Server) getVideo(model, id string) response {
	st, ok := s.videos[videoKey(model, id)]
	if !ok {
		return notFound()
	}
	v := videoJSON{Name: "models/" + model + "/operations/" + id, Done: st.Done}
	switch {
	case st.Error != nil:
		v.Error = st.Error
	case st.ErrorCode != 0 || st.ErrorMessage != "":
		v.Error = &rpcStatusJSON{Code: st.ErrorCode, Message: st.ErrorMessage}
	case st.Done:
		gvr := map[string]any{}
		if len(st.VideoURIs) > 0 {
			samples := make([]any, 0, len(st.VideoURIs))
			for _, u := range st.VideoURIs {
				samples = append(samples, map[string]any{"video": map[string]any{"uri": u}})
			}
			gvr["generatedSamples"] = samples
		}
		if st.RAIMediaFilteredCount > 0 {
			gvr["raiMediaFilteredCount"] = st.RAIMediaFilteredCount
		}
		if len(st.RAIMediaFilteredReasons) > 0 {
			gvr["raiMediaFilteredReasons"] = st.RAIMediaFilteredReasons
		}
		v.Response = map[string]any{
			"@type":                 "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
			"generateVideoResponse": gvr,
		}
	}
	return jsonResponse(http.StatusOK, v)
}

// ---- interactions ----

type interactionErrorJSON struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

type interactionJSON struct {
	ID      string                 `json:"id"`
	Status  string                 `json:"status"`
	Created string                 `json:"created,omitempty"`
	Updated string                 `json:"updated,omitempty"`
	Errors  []interactionErrorJSON `json:"errors,omitempty"`
	Steps   []any                  `json:"steps,omitempty"`
	Object  string                 `json:"object"`
	Model   string                 `json:"model,omitempty"`
	Agent   string                 `json:"agent,omitempty"`
	Webhook *webhookConfigJSON     `json:"webhook_config,omitempty"`
}

func (s *Server) getInteraction(id string) response {
	st, ok := s.interactions[id]
	if !ok || !s.known(st.NotFoundUntil) {
		return notFound()
	}
	return jsonResponse(http.StatusOK, interactionBody(id, st))
}

// interactionBody is an Interaction as the API answers it (GET and create).
func interactionBody(id string, st InteractionState) interactionJSON {
	v := interactionJSON{ID: id, Status: st.Status, Created: rfc3339(st.Created), Updated: rfc3339(st.Updated),
		Object: "interaction", Model: st.Model, Agent: st.Agent, Webhook: st.Webhook.body()}
	if st.UpdatedRaw != "" {
		v.Updated = st.UpdatedRaw
	}
	if st.ErrorCode != "" || st.ErrorMessage != "" {
		v.Errors = []interactionErrorJSON{{Code: st.ErrorCode, Message: st.ErrorMessage}}
	}
	if st.OutputText != "" {
		v.Steps = append(v.Steps, map[string]any{
			"type":    "model_output",
			"content": []any{map[string]any{"type": "text", "text": st.OutputText}},
		})
	}
	if e := st.StepError; e != nil {
		status := map[string]any{}
		if e.Code != 0 {
			status["code"] = e.Code
		}
		if e.Message != "" {
			status["message"] = e.Message
		}
		v.Steps = append(v.Steps, map[string]any{"type": "model_output", "error": status})
	}
	return v
}
