package fakegemini

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Delivery returns the webhook body Gemini would send for an operation
// the fake holds: the Standard Webhooks envelope {"type", "version":"v1",
// "timestamp", "data":{"id", …}} with data taken from the operation's
// state (output_file_uri for batch.succeeded and video.generated,
// error_code/error_message for a failure) and, at the top level, the
// user_metadata its create was given (GEMINI.md §13: where live puts it is
// unconfirmed; lrosink reads either place). name is batches/ID,
// models/M/operations/ID or interactions/ID; data.id is the API name for a
// batch or a video and the bare id for an interaction, as the Interactions
// API names them. Sign it with webhooktest.Headers (static) or
// webhooktest.V1AHeaders (dynamic).
func (s *Server) Delivery(name, typ string, at time.Time) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data := map[string]any{}
	var hook *WebhookConfig
	segs := strings.Split(name, "/")
	switch {
	case len(segs) == 2 && segs[0] == "batches":
		st, ok := s.batches[segs[1]]
		if !ok {
			return nil, fmt.Errorf("fakegemini: no batch %s", name)
		}
		data["id"], hook = name, st.Webhook
		if st.ResponsesFile != "" && typ == "batch.succeeded" {
			data["output_file_uri"] = st.ResponsesFile
		}
		addError(data, strconv.Itoa(st.ErrorCode), st.ErrorMessage, st.ErrorCode != 0 || st.ErrorMessage != "")
	case len(segs) == 4 && segs[0] == "models" && segs[2] == "operations":
		st, ok := s.videos[videoKey(segs[1], segs[3])]
		if !ok {
			return nil, fmt.Errorf("fakegemini: no video operation %s", name)
		}
		data["id"], hook = name, st.Webhook
		if len(st.VideoURIs) > 0 {
			data["output_file_uri"] = st.VideoURIs[0]
		}
		addError(data, strconv.Itoa(st.ErrorCode), st.ErrorMessage, st.ErrorCode != 0 || st.ErrorMessage != "")
	case len(segs) == 2 && segs[0] == "interactions":
		st, ok := s.interactions[segs[1]]
		if !ok {
			return nil, fmt.Errorf("fakegemini: no interaction %s", name)
		}
		data["id"], hook = segs[1], st.Webhook
		addError(data, st.ErrorCode, st.ErrorMessage, st.ErrorCode != "" || st.ErrorMessage != "")
	default:
		return nil, fmt.Errorf("fakegemini: %q is not batches/ID, models/M/operations/ID or interactions/ID", name)
	}
	env := map[string]any{"type": typ, "version": "v1", "timestamp": at.UTC().Format(time.RFC3339Nano), "data": data}
	if hook != nil && hook.UserMetadata != nil {
		env["user_metadata"] = hook.UserMetadata
	}
	return json.Marshal(env)
}

func addError(data map[string]any, code, msg string, failed bool) {
	if !failed {
		return
	}
	data["error_code"], data["error_message"] = code, msg
}
