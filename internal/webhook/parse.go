package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
)

// ErrUnknownType: the delivery is authentic but its event type is not one
// lrosink handles (a ping, a future event). Answer 200 and store nothing,
// or Gemini keeps retrying it for 24 h.
var ErrUnknownType = errors.New("webhook: unknown event type")

// BadEnvelopeError: the delivery is authentic but the body is not a Gemini
// event envelope (answer 400).
type BadEnvelopeError struct{ Reason string }

func (e *BadEnvelopeError) Error() string { return "webhook: bad envelope: " + e.Reason }

func badEnvelope(reason string) error { return &BadEnvelopeError{Reason: reason} }

// maxNameBytes bounds data.id; real operation names are far shorter.
const maxNameBytes = 1024

// eventType maps a Gemini event type to the state it announces and the
// kind hint for bare ids. batch.completed is a stale alias of
// batch.succeeded still shown in some samples.
func eventType(t string) (lifecycle.State, opname.Kind, bool) {
	switch t {
	case "batch.succeeded", "batch.completed":
		return lifecycle.Succeeded, opname.KindBatch, true
	case "batch.failed":
		return lifecycle.Failed, opname.KindBatch, true
	case "batch.cancelled":
		return lifecycle.Cancelled, opname.KindBatch, true
	case "batch.expired":
		return lifecycle.Expired, opname.KindBatch, true
	case "interaction.completed":
		return lifecycle.Succeeded, opname.KindInteraction, true
	case "interaction.failed":
		return lifecycle.Failed, opname.KindInteraction, true
	case "interaction.cancelled":
		return lifecycle.Cancelled, opname.KindInteraction, true
	case "interaction.requires_action":
		return lifecycle.RequiresAction, opname.KindInteraction, true
	case "video.generated":
		// FAILED instead when the event carries an error (see Parse).
		return lifecycle.Succeeded, opname.KindVideo, true
	default:
		return "", opname.KindUnknown, false
	}
}

// EventTypes are the event types Parse handles, as a webhook subscribes to
// them (GEMINI.md §3): each one eventType knows but the stale alias
// batch.completed. `lrosink webhooks create` subscribes to them by default.
// A function, so no caller can change the list.
func EventTypes() []string {
	return []string{
		"batch.succeeded", "batch.failed", "batch.cancelled", "batch.expired",
		"interaction.requires_action", "interaction.completed", "interaction.failed", "interaction.cancelled",
		"video.generated",
	}
}

// Parse turns a verified delivery body into an ingest event. The envelope is
//
//	{"type", "version", "timestamp", "data": {"id", "output_file_uri",
//	 "error_code", "error_message", "error", "errors", "file_name",
//	 "video_uri", "user_metadata"}, "user_metadata"}
//
// and unknown fields are ignored. Errors: *BadEnvelopeError for a body
// that is not an envelope, ErrUnknownType (wrapped) for an envelope whose
// type is not handled.
//
// Decisions on unconfirmed protocol points:
//   - an unknown type only needs a non-empty string type, not data.id:
//     Gemini's ping event shape is undocumented and must get a 2xx;
//   - user_metadata is read from the top level, else from data (top level
//     wins when both are objects); a non-object value is ignored;
//   - error_code may be a number, a numeric string or a status name such as
//     "INVALID_ARGUMENT": numbers become Code; a name leaves Code 0 and is
//     put in front of the message ("INVALID_ARGUMENT: msg"); a numeric 0
//     alone is gRPC OK and is not an error;
//   - when a JWT delivery has an empty body and its claims carry type and
//     data, the claims are the envelope (the dynamic payload shape is
//     unconfirmed).
func Parse(body []byte, v Verified) (event.Event, error) {
	raw, err := envelopeBytes(body, v)
	if err != nil {
		return event.Event{}, err
	}
	if ev, ok := parseFast(raw, v); ok {
		return ev, nil
	}
	return parseEnvelope(raw, v)
}

// envelopeBytes returns the JSON to parse: the body, or for a JWT delivery
// with an empty body the token's claims. It must be a UTF-8 JSON object.
func envelopeBytes(body []byte, v Verified) ([]byte, error) {
	raw := body
	if len(bytes.TrimSpace(body)) == 0 {
		if v.Method != MethodJWT || v.Claims["type"] == nil || v.Claims["data"] == nil {
			return nil, badEnvelope("empty body")
		}
		b, err := json.Marshal(v.Claims)
		if err != nil {
			return nil, badEnvelope("token claims are not JSON-encodable")
		}
		raw = b
	}
	if !utf8.Valid(raw) {
		return nil, badEnvelope("body is not valid UTF-8")
	}
	// Checked before decoding so arrays (however deeply nested) and scalars
	// get a precise reason; encoding/json's depth limit covers nesting
	// inside the object.
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, badEnvelope("body is not a JSON object")
	}
	return raw, nil
}

// parseEnvelope is the map-based decoder: slower than parseFast, but it
// says precisely what is wrong with an envelope.
func parseEnvelope(raw []byte, v Verified) (event.Event, error) {
	var env map[string]json.RawMessage
	if err := json.Unmarshal(raw, &env); err != nil {
		return event.Event{}, badEnvelope("body is not valid JSON")
	}
	typ, err := envelopeType(env)
	if err != nil {
		return event.Event{}, err
	}
	data, id, err := envelopeData(env)
	if err != nil {
		return event.Event{}, err
	}
	ev := newEvent(typ, id, v)
	if s, _, ok := stringField(env, "timestamp"); ok {
		ev.UpdateTime = eventTime(s)
	}
	for _, k := range []string{"output_file_uri", "file_name", "video_uri"} {
		s, _, _ := stringField(data, k)
		addOutput(&ev, k, s)
	}
	msg, _, _ := stringField(data, "error_message")
	setFailure(&ev, failure(data["error_code"], msg, data["error"], data["errors"]))
	ev.UserMetadata = firstObject(env["user_metadata"], data["user_metadata"])
	return ev, nil
}

// envelopeType returns the envelope's type if lrosink handles it;
// ErrUnknownType (wrapped) for a well-formed type it does not.
func envelopeType(env map[string]json.RawMessage) (string, error) {
	typ, present, isStr := stringField(env, "type")
	switch {
	case !present:
		return "", badEnvelope("no type")
	case !isStr:
		return "", badEnvelope("type is not a string")
	case strings.TrimSpace(typ) == "":
		return "", badEnvelope("empty type")
	}
	if _, _, known := eventType(typ); !known {
		return "", fmt.Errorf("%w %s", ErrUnknownType, quoteShort(typ))
	}
	return typ, nil
}

// envelopeData returns the data object and its id (the operation name).
func envelopeData(env map[string]json.RawMessage) (map[string]json.RawMessage, string, error) {
	data, ok := objectField(env, "data")
	if !ok {
		if env["data"] == nil || isNull(env["data"]) {
			return nil, "", badEnvelope("no data")
		}
		return nil, "", badEnvelope("data is not an object")
	}
	id, present, isStr := stringField(data, "id")
	switch {
	case !present:
		return nil, "", badEnvelope("no data.id")
	case !isStr:
		return nil, "", badEnvelope("data.id is not a string")
	case strings.TrimSpace(id) == "":
		return nil, "", badEnvelope("empty data.id")
	case len(id) > maxNameBytes:
		return nil, "", badEnvelope(fmt.Sprintf("data.id longer than %d bytes", maxNameBytes))
	}
	return data, id, nil
}

// newEvent is the event a delivery of a known type typ about operation id
// announces, before its fields are read.
func newEvent(typ, id string, v Verified) event.Event {
	state, kind, _ := eventType(typ)
	return event.Event{
		// Exactly as given: opname normalises later, in one place.
		Name:  id,
		Kind:  kind,
		State: state,
		// The event type is what Gemini said (contract: gemini_status).
		GeminiStatus: typ,
		Source:       event.SourceWebhook,
		DeliveryID:   v.ID,
		DeliveredAt:  v.Timestamp,
	}
}

// eventTime reads the envelope's timestamp. A missing or unparsable time
// stays zero, which lifecycle treats as 1970-01-01 so the event loses
// every tie.
func eventTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// addOutput keeps a non-empty output field. Video events are documented
// with output_file_uri/file_name but a cookbook uses video_uri, so all
// three are kept.
func addOutput(ev *event.Event, k, s string) {
	if s == "" {
		return
	}
	if ev.Output == nil {
		ev.Output = make(map[string]any, 3)
	}
	ev.Output[k] = s
}

// setFailure records the event's failure; a video.generated event that
// carries one is FAILED.
func setFailure(ev *event.Event, e *event.ErrorInfo) {
	ev.Error = e
	if ev.Kind == opname.KindVideo && e != nil {
		ev.State = lifecycle.Failed
	}
}

// firstObject decodes the first of rs that is a JSON object (user_metadata
// is read from the top level, else from data); nil if none is. Numbers stay
// json.Number literals, so metadata is echoed exactly (CONTRACT.md §8).
func firstObject(rs ...json.RawMessage) map[string]any {
	for _, r := range rs {
		if !bytes.HasPrefix(bytes.TrimSpace(r), []byte("{")) {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(r))
		d.UseNumber()
		var out map[string]any
		if d.Decode(&out) == nil {
			return out
		}
	}
	return nil
}

// failure reads an operation's failure from data, in whichever form it
// came: the documented error_code/error_message; else an "error" object
// (a google.rpc.Status: code, message, status) or string; else the first
// entry of an "errors" list (the Interactions API's shape). The first form
// that is there wins. A video.generated event that carries any of them is
// FAILED: the event type alone does not say whether the video was made.
//
// An error object counts even when its fields are missing ({} or a code
// alone): a sender puts one there only for a failure, and reading it as
// success would publish a failed operation as SUCCEEDED. The flat fields
// keep their rule: error_code 0 alone is gRPC OK, not an error.
func failure(flatCode json.RawMessage, flatMsg string, object, list json.RawMessage) *event.ErrorInfo {
	if e := errorFrom(flatCode, flatMsg); e != nil {
		return e
	}
	if e := errorValue(object); e != nil {
		return e
	}
	var entries []json.RawMessage
	if bytes.HasPrefix(bytes.TrimSpace(list), []byte("[")) && json.Unmarshal(list, &entries) == nil && len(entries) > 0 {
		return errorValue(entries[0])
	}
	return nil
}

// errorValue reads an error object or a bare error string; nil for
// anything else (null, "", numbers).
func errorValue(raw json.RawMessage) *event.ErrorInfo {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return nil
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil || s == "" {
			return nil
		}
		return &event.ErrorInfo{Message: s}
	case raw[0] != '{':
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	msg, _, _ := stringField(obj, "message")
	code, name := errorCode(obj["code"])
	if code == 0 && name == "" {
		// google.rpc.Status in REST form names the code in "status".
		name, _, _ = stringField(obj, "status")
	}
	return &event.ErrorInfo{Code: code, Message: results.ErrorMessage(name, msg)}
}

func errorFrom(rawCode json.RawMessage, msg string) *event.ErrorInfo {
	code, name := errorCode(rawCode)
	if code == 0 && name == "" && msg == "" {
		return nil
	}
	return &event.ErrorInfo{Code: code, Message: results.ErrorMessage(name, msg)}
}

// errorCode returns a numeric code, or a non-numeric code's text.
// Non-integral numbers keep their text so nothing is silently lost.
func errorCode(raw json.RawMessage) (int, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return 0, ""
	}
	var text string
	switch raw[0] {
	case '"':
		if json.Unmarshal(raw, &text) != nil {
			return 0, ""
		}
		text = strings.TrimSpace(text)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		text = string(raw)
	default: // bool, object, array: not a code
		return 0, ""
	}
	if n, err := strconv.ParseInt(text, 10, 0); err == nil {
		return int(n), ""
	}
	return 0, text
}

// stringField reports whether m[key] is present and non-null, and returns
// it when it is a JSON string.
func stringField(m map[string]json.RawMessage, key string) (s string, present, isString bool) {
	r, ok := m[key]
	if !ok || isNull(r) {
		return "", false, false
	}
	if json.Unmarshal(r, &s) != nil {
		return "", true, false
	}
	return s, true, true
}

func objectField(m map[string]json.RawMessage, key string) (map[string]json.RawMessage, bool) {
	r, ok := m[key]
	if !ok || !bytes.HasPrefix(bytes.TrimSpace(r), []byte("{")) {
		return nil, false
	}
	var out map[string]json.RawMessage
	if json.Unmarshal(r, &out) != nil {
		return nil, false
	}
	return out, true
}

func isNull(r json.RawMessage) bool { return string(bytes.TrimSpace(r)) == "null" }

// fastEnvelope decodes a well-formed envelope in one pass with few
// allocations (the webhook's hot path). Anything it cannot take — a wrong
// type, a missing field — falls back to the map-based decoder above, which
// gives the precise reason. encoding/json matches keys case-insensitively
// here; the body is authenticated before it is parsed, so that admits
// nothing a sender could not send anyway.
type fastEnvelope struct {
	Type         string          `json:"type"`
	Timestamp    json.RawMessage `json:"timestamp"`
	Data         *fastData       `json:"data"`
	UserMetadata json.RawMessage `json:"user_metadata"`
}

type fastData struct {
	ID            string          `json:"id"`
	OutputFileURI string          `json:"output_file_uri"`
	FileName      string          `json:"file_name"`
	VideoURI      string          `json:"video_uri"`
	ErrorCode     json.RawMessage `json:"error_code"`
	ErrorMessage  string          `json:"error_message"`
	Error         json.RawMessage `json:"error"`
	Errors        json.RawMessage `json:"errors"`
	UserMetadata  json.RawMessage `json:"user_metadata"`
}

func parseFast(raw []byte, v Verified) (event.Event, bool) {
	var env fastEnvelope
	if json.Unmarshal(raw, &env) != nil || env.Data == nil || strings.TrimSpace(env.Data.ID) == "" || len(env.Data.ID) > maxNameBytes {
		return event.Event{}, false
	}
	if _, _, known := eventType(env.Type); !known {
		return event.Event{}, false
	}
	d := env.Data
	ev := newEvent(env.Type, d.ID, v)
	var ts string
	if json.Unmarshal(env.Timestamp, &ts) == nil {
		ev.UpdateTime = eventTime(ts)
	}
	for _, kv := range [...][2]string{{"output_file_uri", d.OutputFileURI}, {"file_name", d.FileName}, {"video_uri", d.VideoURI}} {
		addOutput(&ev, kv[0], kv[1])
	}
	setFailure(&ev, failure(d.ErrorCode, d.ErrorMessage, d.Error, d.Errors))
	ev.UserMetadata = firstObject(env.UserMetadata, d.UserMetadata)
	return ev, true
}
