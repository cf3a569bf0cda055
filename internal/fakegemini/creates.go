package fakegemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The kinds Creates counts.
const (
	KindBatch       = "batch"
	KindVideo       = "video"
	KindInteraction = "interaction"
)

// Creates returns how many operations of kind (KindBatch, KindVideo,
// KindInteraction) the create endpoints made. A refused create (bad
// body, camelCase userMetadata, a fault, a wrong key) made none; Calls
// counts the attempts.
func (s *Server) Creates(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates[kind]
}

// nextID returns a deterministic id for a created operation. Called with
// s.mu held.
func (s *Server) nextID(prefix string) string {
	s.createSeq++
	return fmt.Sprintf("%s%06d", prefix, s.createSeq)
}

// typeBadRequest is google.rpc.BadRequest, the detail Google's JSON parser
// attaches to an unknown or malformed field.
const typeBadRequest = "type.googleapis.com/google.rpc.BadRequest"

// invalidPayload is Google's answer to a body its JSON parser refuses:
// "Invalid JSON payload received. Unknown name "x" at 'batch.webhook_config':
// Cannot find field." (go-genai #779, GEMINI.md §13), with the field
// violation naming the path.
func invalidPayload(what, at string) response {
	msg := "Invalid JSON payload received. " + what
	if at != "" {
		msg = fmt.Sprintf("Invalid JSON payload received. %s at '%s'", what, at)
	}
	msg += ": Cannot find field."
	return errorResponse(http.StatusBadRequest, msg, "INVALID_ARGUMENT",
		map[string]any{"@type": typeBadRequest, "fieldViolations": []any{map[string]any{"field": at, "description": msg}}})
}

// object decodes raw as a JSON object whose members keep their bytes;
// numbers stay literal when decoded further with decodeJSON.
func object(raw []byte) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

// decodeJSON decodes with numbers as json.Number, so metadata echoed back
// is the literal the client sent (big integers included).
func decodeJSON(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}

// fields is a message's JSON names: each accepted spelling maps to the
// proto field name. Google's parser takes a field's lowerCamel JSON name
// and its proto name alike; the names listed are all a field has.
type fields map[string]string

// checkFields refuses the first member m has that the message does not
// (in sorted order, so the answer is deterministic), as the live API does.
func checkFields(m map[string]json.RawMessage, known fields, at string) *response {
	for _, k := range slicesSorted(m) {
		if _, ok := known[k]; !ok {
			r := invalidPayload(fmt.Sprintf("Unknown name %q", k), at)
			return &r
		}
	}
	return nil
}

func slicesSorted(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// member returns the member of m under any spelling of proto field name.
func member(m map[string]json.RawMessage, known fields, name string) json.RawMessage {
	for k, v := range m {
		if known[k] == name {
			return v
		}
	}
	return nil
}

// webhookConfigFields are WebhookConfig's names: "user_metadata" only.
// The live API refuses "userMetadata" (go-genai #779), which the Go SDK
// v1.77.0 sends.
var webhookConfigFields = fields{"uris": "uris", "user_metadata": "user_metadata"}

// parseWebhookConfig reads a create's webhook_config (raw may be nil: no
// config). at is its path in the request, for the error.
func parseWebhookConfig(raw json.RawMessage, at string) (*WebhookConfig, *response) {
	if raw == nil || string(raw) == "null" {
		return nil, nil
	}
	m, ok := object(raw)
	if !ok {
		r := badRequest(fmt.Sprintf("Invalid value at '%s': webhook_config must be an object", at))
		return nil, &r
	}
	if r := checkFields(m, webhookConfigFields, at); r != nil {
		return nil, r
	}
	var w WebhookConfig
	if u := m["uris"]; u != nil {
		if err := json.Unmarshal(u, &w.URIs); err != nil {
			r := badRequest(fmt.Sprintf("Invalid value at '%s.uris': want a list of strings", at))
			return nil, &r
		}
		for i, uri := range w.URIs {
			if !strings.HasPrefix(uri, "https://") && !strings.HasPrefix(uri, "http://") {
				r := badRequest(fmt.Sprintf("Invalid value at '%s.uris[%d]': %q is not a URL", at, i, uri))
				return nil, &r
			}
		}
	}
	if u := m["user_metadata"]; u != nil && string(u) != "null" {
		if err := decodeJSON(u, &w.UserMetadata); err != nil || w.UserMetadata == nil {
			r := badRequest(fmt.Sprintf("Invalid value at '%s.user_metadata': want a JSON object", at))
			return nil, &r
		}
	}
	return &w, nil
}

// modelName is the model as a batch's metadata names it.
func modelName(model string) string { return "models/" + model }

// ---- batches: POST /v1beta/models/{m}:batchGenerateContent ----

var (
	batchRequestFields = fields{"batch": "batch"}
	// GenerateContentBatch; the output-only fields are known too (the
	// parser accepts and ignores them).
	batchFields = fields{
		"model": "model", "displayName": "display_name", "display_name": "display_name",
		"inputConfig": "input_config", "input_config": "input_config",
		"webhookConfig": "webhook_config", "webhook_config": "webhook_config",
		"priority": "priority", "name": "name", "output": "output", "state": "state",
		"createTime": "create_time", "create_time": "create_time", "endTime": "end_time", "end_time": "end_time",
		"updateTime": "update_time", "update_time": "update_time", "batchStats": "batch_stats", "batch_stats": "batch_stats",
	}
	inputConfigFields = fields{"fileName": "file_name", "file_name": "file_name", "requests": "requests"}
)

// createBatch stores a PENDING batch from the create's body and answers
// the Operation the SDK's Batches.Create reads (batchJobFromMldev).
func (s *Server) createBatch(model string, body []byte) response {
	top, ok := object(body)
	if !ok {
		return badRequest("Invalid JSON payload received: want an object")
	}
	if r := checkFields(top, batchRequestFields, ""); r != nil {
		return *r
	}
	batch, ok := object(top["batch"])
	if !ok {
		return badRequest("batch is required")
	}
	if r := checkFields(batch, batchFields, "batch"); r != nil {
		return *r
	}
	st := BatchState{State: "BATCH_STATE_PENDING", Model: modelName(model)}
	if raw := member(batch, batchFields, "display_name"); raw != nil {
		if err := json.Unmarshal(raw, &st.DisplayName); err != nil {
			return badRequest("Invalid value at 'batch.display_name': want a string")
		}
	}
	in, ok := object(member(batch, batchFields, "input_config"))
	if !ok {
		return badRequest("batch.input_config is required")
	}
	if r := checkFields(in, inputConfigFields, "batch.input_config"); r != nil {
		return *r
	}
	if r := s.batchInput(in, &st); r != nil {
		return *r
	}
	w, r := parseWebhookConfig(member(batch, batchFields, "webhook_config"), "batch.webhook_config")
	if r != nil {
		return *r
	}
	st.Webhook = w
	now := s.now()
	st.CreateTime, st.UpdateTime = now, now
	id := s.nextID("batch-")
	s.setBatch(id, st)
	s.creates[KindBatch]++
	return jsonResponse(http.StatusOK, batchBody(id, s.batches[id]))
}

// batchInput reads input_config: a Files API file this fake holds, or
// inline requests ({"requests":{"requests":[{"request":{…},"metadata":{…}}]}}).
func (s *Server) batchInput(in map[string]json.RawMessage, st *BatchState) *response {
	file := member(in, inputConfigFields, "file_name")
	reqs := in["requests"]
	switch {
	case file != nil && reqs != nil:
		r := badRequest("batch.input_config: only one of file_name and requests may be set")
		return &r
	case file != nil:
		if err := json.Unmarshal(file, &st.InputFile); err != nil || !strings.HasPrefix(st.InputFile, "files/") {
			r := badRequest("Invalid value at 'batch.input_config.file_name': want files/ID")
			return &r
		}
		// The live wording for a file that does not exist is unconfirmed.
		if _, ok := s.files[strings.TrimPrefix(st.InputFile, "files/")]; !ok {
			r := errorResponse(http.StatusBadRequest, "File "+st.InputFile+" not found.", "INVALID_ARGUMENT")
			return &r
		}
		return nil
	case reqs != nil:
		var list struct {
			Requests []struct {
				Request  map[string]json.RawMessage `json:"request"`
				Metadata json.RawMessage            `json:"metadata"`
			} `json:"requests"`
		}
		if err := json.Unmarshal(reqs, &list); err != nil {
			r := badRequest("Invalid value at 'batch.input_config.requests': " + err.Error())
			return &r
		}
		if len(list.Requests) == 0 {
			r := badRequest("batch.input_config.requests.requests must not be empty")
			return &r
		}
		for i, q := range list.Requests {
			if q.Request == nil {
				r := badRequest(fmt.Sprintf("batch.input_config.requests.requests[%d].request is required", i))
				return &r
			}
		}
		st.InputRequests = len(list.Requests)
		return nil
	}
	r := badRequest("batch.input_config: one of file_name and requests is required")
	return &r
}

// ---- videos: POST /v1beta/models/{m}:predictLongRunning ----

var videoRequestFields = fields{
	"instances": "instances", "parameters": "parameters",
	"webhookConfig": "webhook_config", "webhook_config": "webhook_config",
}

// createVideo stores a running Veo operation and answers its name.
func (s *Server) createVideo(model string, body []byte) response {
	top, ok := object(body)
	if !ok {
		return badRequest("Invalid JSON payload received: want an object")
	}
	if r := checkFields(top, videoRequestFields, ""); r != nil {
		return *r
	}
	var instances []struct {
		Prompt string          `json:"prompt"`
		Image  json.RawMessage `json:"image"`
	}
	if err := json.Unmarshal(top["instances"], &instances); err != nil || len(instances) == 0 ||
		(instances[0].Prompt == "" && instances[0].Image == nil) {
		return badRequest("instances[0] needs a prompt or an image")
	}
	w, r := parseWebhookConfig(member(top, videoRequestFields, "webhook_config"), "webhook_config")
	if r != nil {
		return *r
	}
	id := s.nextID("video-")
	s.videos[videoKey(model, id)] = VideoState{Webhook: w, Prompt: instances[0].Prompt}
	s.creates[KindVideo]++
	return jsonResponse(http.StatusOK, videoJSON{Name: "models/" + model + "/operations/" + id})
}

// ---- interactions: POST /v1beta/interactions ----

// createInteraction stores an interaction and answers it as a live create
// does (GEMINI.md §13: id, status, created, updated, object, model,
// webhook_config). A background interaction is in_progress until a test
// moves it on; a foreground one is answered completed at once, as the
// API does after generating (with a fixed output text here).
func (s *Server) createInteraction(body []byte) response {
	top, ok := object(body)
	if !ok {
		return badRequest("Invalid JSON payload received: want an object")
	}
	var in struct {
		Model      string          `json:"model"`
		Agent      string          `json:"agent"`
		Background bool            `json:"background"`
		Input      json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return badRequest("Invalid JSON payload received: " + err.Error())
	}
	switch {
	case (in.Model == "") == (in.Agent == ""):
		return badRequest("exactly one of model and agent is required")
	case in.Input == nil || string(in.Input) == "null" || string(in.Input) == `""`:
		return badRequest("input is required")
	}
	w, r := parseWebhookConfig(top["webhook_config"], "webhook_config")
	if r != nil {
		return *r
	}
	now := s.now()
	st := InteractionState{Status: "in_progress", Created: now, Updated: now, Model: in.Model, Agent: in.Agent, Webhook: w}
	if !in.Background {
		st.Status, st.OutputText = "completed", "fakegemini: generated text"
	}
	id := s.nextID("v1_interaction")
	s.interactions[id] = st
	s.creates[KindInteraction]++
	return jsonResponse(http.StatusOK, interactionBody(id, st))
}
