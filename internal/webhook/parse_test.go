package webhook

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
)

var hmacDelivery = Verified{ID: "msg_1", Method: MethodHMAC, Timestamp: time.Unix(1767000000, 0)}

func TestParseEventTypes(t *testing.T) {
	cases := []struct {
		typ   string
		data  string
		state lifecycle.State
		kind  opname.Kind
	}{
		{"batch.succeeded", `{"id":"b1"}`, lifecycle.Succeeded, opname.KindBatch},
		{"batch.completed", `{"id":"b1"}`, lifecycle.Succeeded, opname.KindBatch},
		{"batch.failed", `{"id":"b1"}`, lifecycle.Failed, opname.KindBatch},
		{"batch.cancelled", `{"id":"b1"}`, lifecycle.Cancelled, opname.KindBatch},
		{"batch.expired", `{"id":"b1"}`, lifecycle.Expired, opname.KindBatch},
		{"interaction.completed", `{"id":"i1"}`, lifecycle.Succeeded, opname.KindInteraction},
		{"interaction.failed", `{"id":"i1"}`, lifecycle.Failed, opname.KindInteraction},
		{"interaction.cancelled", `{"id":"i1"}`, lifecycle.Cancelled, opname.KindInteraction},
		{"interaction.requires_action", `{"id":"i1"}`, lifecycle.RequiresAction, opname.KindInteraction},
		{"video.generated", `{"id":"v1"}`, lifecycle.Succeeded, opname.KindVideo},
		{"video.generated", `{"id":"v1","error_message":"blocked"}`, lifecycle.Failed, opname.KindVideo},
		{"video.generated", `{"id":"v1","error_code":"RESOURCE_EXHAUSTED"}`, lifecycle.Failed, opname.KindVideo},
		{"video.generated", `{"id":"v1","error_code":8}`, lifecycle.Failed, opname.KindVideo},
		{"video.generated", `{"id":"v1","error_code":0}`, lifecycle.Succeeded, opname.KindVideo},
		{"video.generated", `{"id":"v1","error_code":null,"error_message":""}`, lifecycle.Succeeded, opname.KindVideo},
	}
	for _, c := range cases {
		t.Run(c.typ+c.data, func(t *testing.T) {
			body := `{"type":"` + c.typ + `","version":"v1","timestamp":"2026-01-22T12:00:00Z","data":` + c.data + `}`
			ev, err := Parse([]byte(body), hmacDelivery)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if ev.State != c.state || ev.Kind != c.kind || ev.Source != event.SourceWebhook || ev.DeliveryID != "msg_1" {
				t.Fatalf("Parse = %+v, want state %s kind %s", ev, c.state, c.kind)
			}
			if !ev.UpdateTime.Equal(time.Date(2026, 1, 22, 12, 0, 0, 0, time.UTC)) {
				t.Fatalf("UpdateTime = %v", ev.UpdateTime)
			}
		})
	}
}

// TestEventTypesAreParsed: every type a webhook subscribes to by default
// (EventTypes) is one Parse handles, and each is listed once; the stale
// alias batch.completed is parsed but not subscribed to.
func TestEventTypesAreParsed(t *testing.T) {
	types := EventTypes()
	if len(types) != 9 {
		t.Fatalf("EventTypes() = %v, want the nine types Gemini documents", types)
	}
	seen := map[string]bool{}
	for _, typ := range types {
		if _, _, known := eventType(typ); !known || seen[typ] {
			t.Errorf("EventTypes() lists %q: known %v, repeated %v", typ, known, seen[typ])
		}
		seen[typ] = true
	}
	if seen["batch.completed"] {
		t.Error("EventTypes() subscribes to the stale alias batch.completed")
	}
}

func TestParseFields(t *testing.T) {
	type want struct {
		name string
		out  map[string]any
		err  *event.ErrorInfo
		meta map[string]any
		time time.Time
	}
	ts := time.Date(2026, 1, 22, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		body string
		want want
	}{
		{"user_metadata top-level",
			`{"type":"batch.succeeded","timestamp":"2026-01-22T12:00:00Z","data":{"id":"b"},"user_metadata":{"job":"top"}}`,
			want{name: "b", meta: map[string]any{"job": "top"}, time: ts}},
		{"user_metadata in data",
			`{"type":"batch.succeeded","timestamp":"2026-01-22T12:00:00Z","data":{"id":"b","user_metadata":{"job":"data","n":2,"id":1234567890123456789}}}`,
			want{name: "b", meta: map[string]any{"job": "data", "n": json.Number("2"), "id": json.Number("1234567890123456789")}, time: ts}},
		{"user_metadata both: top-level wins",
			`{"type":"batch.succeeded","timestamp":"2026-01-22T12:00:00Z","data":{"id":"b","user_metadata":{"job":"data"}},"user_metadata":{"job":"top"}}`,
			want{name: "b", meta: map[string]any{"job": "top"}, time: ts}},
		{"user_metadata top-level null falls back to data",
			`{"type":"batch.succeeded","timestamp":"2026-01-22T12:00:00Z","data":{"id":"b","user_metadata":{"job":"data"}},"user_metadata":null}`,
			want{name: "b", meta: map[string]any{"job": "data"}, time: ts}},
		{"user_metadata not an object is ignored",
			`{"type":"batch.succeeded","timestamp":"2026-01-22T12:00:00Z","data":{"id":"b","user_metadata":["x"]},"user_metadata":"job=1"}`,
			want{name: "b", time: ts}},
		{"video with output_file_uri and file_name",
			`{"type":"video.generated","timestamp":"2026-01-22T12:00:00Z","data":{"id":"models/veo/operations/o1","output_file_uri":"gs://b/v.mp4","file_name":"files/v"}}`,
			want{name: "models/veo/operations/o1", out: map[string]any{"output_file_uri": "gs://b/v.mp4", "file_name": "files/v"}, time: ts}},
		{"video with video_uri",
			`{"type":"video.generated","timestamp":"2026-01-22T12:00:00Z","data":{"id":"o2","video_uri":"https://x/v.mp4"}}`,
			want{name: "o2", out: map[string]any{"video_uri": "https://x/v.mp4"}, time: ts}},
		{"empty and non-string outputs are dropped",
			`{"type":"video.generated","timestamp":"2026-01-22T12:00:00Z","data":{"id":"o3","video_uri":"","output_file_uri":42,"file_name":null}}`,
			want{name: "o3", time: ts}},
		{"timestamp missing", `{"type":"batch.succeeded","data":{"id":"b"}}`, want{name: "b"}},
		{"timestamp garbage", `{"type":"batch.succeeded","timestamp":"yesterday","data":{"id":"b"}}`, want{name: "b"}},
		{"timestamp numeric", `{"type":"batch.succeeded","timestamp":1767000000,"data":{"id":"b"}}`, want{name: "b"}},
		{"timestamp without zone", `{"type":"batch.succeeded","timestamp":"2026-01-22T12:00:00","data":{"id":"b"}}`, want{name: "b"}},
		{"timestamp with offset and nanos",
			`{"type":"batch.succeeded","timestamp":"2026-01-22T13:00:00.123456789+01:00","data":{"id":"b"}}`,
			want{name: "b", time: ts.Add(123456789 * time.Nanosecond)}},
		{"id kept exactly as given",
			`{"type":"batch.succeeded","data":{"id":" batches/ABC/ "}}`, want{name: " batches/ABC/ "}},
		{"id of 1024 bytes",
			`{"type":"batch.succeeded","data":{"id":"` + strings.Repeat("a", 1024) + `"}}`, want{name: strings.Repeat("a", 1024)}},
		{"unknown fields tolerated",
			`{"type":"batch.succeeded","version":"v9","extra":{"x":[1,2]},"data":{"id":"b","new_field":true}}`, want{name: "b"}},
		{"numeric error code",
			`{"type":"batch.failed","data":{"id":"b","error_code":3,"error_message":"bad input"}}`,
			want{name: "b", err: &event.ErrorInfo{Code: 3, Message: "bad input"}}},
		{"numeric string error code",
			`{"type":"batch.failed","data":{"id":"b","error_code":" 13 ","error_message":"internal"}}`,
			want{name: "b", err: &event.ErrorInfo{Code: 13, Message: "internal"}}},
		{"status-name error code",
			`{"type":"batch.failed","data":{"id":"b","error_code":"INVALID_ARGUMENT","error_message":"bad input"}}`,
			want{name: "b", err: &event.ErrorInfo{Code: 0, Message: "INVALID_ARGUMENT: bad input"}}},
		{"status-name error code without message",
			`{"type":"batch.failed","data":{"id":"b","error_code":"INTERNAL"}}`,
			want{name: "b", err: &event.ErrorInfo{Code: 0, Message: "INTERNAL"}}},
		{"non-integral error code keeps its text",
			`{"type":"batch.failed","data":{"id":"b","error_code":3.5}}`,
			want{name: "b", err: &event.ErrorInfo{Code: 0, Message: "3.5"}}},
		{"message only",
			`{"type":"interaction.failed","data":{"id":"i","error_message":"tool crashed"}}`,
			want{name: "i", err: &event.ErrorInfo{Message: "tool crashed"}}},
		{"error code of odd type ignored",
			`{"type":"batch.failed","data":{"id":"b","error_code":{"code":3}}}`, want{name: "b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, err := Parse([]byte(c.body), hmacDelivery)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if ev.Name != c.want.name {
				t.Errorf("Name = %q, want %q", ev.Name, c.want.name)
			}
			if !reflect.DeepEqual(ev.Output, c.want.out) {
				t.Errorf("Output = %#v, want %#v", ev.Output, c.want.out)
			}
			if !reflect.DeepEqual(ev.Error, c.want.err) {
				t.Errorf("Error = %+v, want %+v", ev.Error, c.want.err)
			}
			if !reflect.DeepEqual(ev.UserMetadata, c.want.meta) {
				t.Errorf("UserMetadata = %#v, want %#v", ev.UserMetadata, c.want.meta)
			}
			if !ev.UpdateTime.Equal(c.want.time) || ev.UpdateTime.IsZero() != c.want.time.IsZero() {
				t.Errorf("UpdateTime = %v, want %v", ev.UpdateTime, c.want.time)
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	cases := []struct {
		name   string
		body   string
		reason string
	}{
		{"empty body", ``, "empty body"},
		{"whitespace body", " \n\t", "empty body"},
		{"bad JSON", `{"type":"batch.succeeded","data":{"id":"b"}`, "body is not valid JSON"},
		{"trailing garbage", `{"type":"batch.succeeded","data":{"id":"b"}} x`, "body is not valid JSON"},
		{"JSON array", `[{"type":"batch.succeeded","data":{"id":"b"}}]`, "body is not a JSON object"},
		{"JSON string", `"batch.succeeded"`, "body is not a JSON object"},
		{"JSON null", `null`, "body is not a JSON object"},
		{"deep nesting 100000 levels", deep, "body is not a JSON object"},
		{"deep nesting inside the envelope", `{"type":"batch.succeeded","data":{"id":"b","x":` + deep + `}}`, "body is not valid JSON"},
		{"deep object nesting", strings.Repeat(`{"a":`, 100000) + `1` + strings.Repeat(`}`, 100000), "body is not valid JSON"},
		{"no type", `{"data":{"id":"b"}}`, "no type"},
		{"null type", `{"type":null,"data":{"id":"b"}}`, "no type"},
		{"empty type", `{"type":"","data":{"id":"b"}}`, "empty type"},
		{"blank type", `{"type":"  ","data":{"id":"b"}}`, "empty type"},
		{"numeric type", `{"type":3,"data":{"id":"b"}}`, "type is not a string"},
		{"no data", `{"type":"batch.succeeded"}`, "no data"},
		{"null data", `{"type":"batch.succeeded","data":null}`, "no data"},
		{"data array", `{"type":"batch.succeeded","data":[{"id":"b"}]}`, "data is not an object"},
		{"data string", `{"type":"batch.succeeded","data":"b"}`, "data is not an object"},
		{"no data.id", `{"type":"batch.succeeded","data":{"name":"batches/b"}}`, "no data.id"},
		{"null data.id", `{"type":"batch.succeeded","data":{"id":null}}`, "no data.id"},
		{"numeric data.id", `{"type":"batch.succeeded","data":{"id":123456}}`, "data.id is not a string"},
		{"object data.id", `{"type":"batch.succeeded","data":{"id":{"name":"b"}}}`, "data.id is not a string"},
		{"empty data.id", `{"type":"batch.succeeded","data":{"id":""}}`, "empty data.id"},
		{"blank data.id", `{"type":"batch.succeeded","data":{"id":"   "}}`, "empty data.id"},
		{"data.id of 1025 bytes", `{"type":"batch.succeeded","data":{"id":"` + strings.Repeat("a", 1025) + `"}}`, "data.id longer than 1024 bytes"},
		{"data.id of 2000 chars", `{"type":"batch.succeeded","data":{"id":"` + strings.Repeat("é", 1000) + `"}}`, "data.id longer than 1024 bytes"},
		{"invalid UTF-8", "{\"type\":\"batch.succeeded\",\"data\":{\"id\":\"b\xff\xfe\"}}", "body is not valid UTF-8"},
		{"invalid UTF-8 in an ignored field", "{\"type\":\"batch.succeeded\",\"x\":\"\xc3\",\"data\":{\"id\":\"b\"}}", "body is not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, err := Parse([]byte(c.body), hmacDelivery)
			var be *BadEnvelopeError
			if !errors.As(err, &be) {
				t.Fatalf("Parse = %+v, %v; want BadEnvelopeError", ev, err)
			}
			if be.Reason != c.reason {
				t.Fatalf("reason = %q, want %q", be.Reason, c.reason)
			}
			if errors.Is(err, ErrUnknownType) {
				t.Fatal("bad envelope is also ErrUnknownType")
			}
		})
	}
}

func TestParseUnknownType(t *testing.T) {
	for _, body := range []string{
		`{"type":"batch.paused","version":"v1","data":{"id":"b"}}`,
		`{"type":"webhook.ping","version":"v1","data":{}}`,
		`{"type":"webhook.ping"}`, // ping payloads are undocumented: only the type is required
		`{"type":"BATCH.SUCCEEDED","data":{"id":"b"}}`,
		`{"type":"batch.succeeded ","data":{"id":"b"}}`,
	} {
		_, err := Parse([]byte(body), hmacDelivery)
		if !errors.Is(err, ErrUnknownType) {
			t.Errorf("Parse(%s) = %v, want ErrUnknownType", body, err)
		}
		var be *BadEnvelopeError
		if errors.As(err, &be) {
			t.Errorf("Parse(%s) is also a BadEnvelopeError", body)
		}
	}
	// The type in the message is quoted and truncated.
	_, err := Parse([]byte(`{"type":"x\n`+strings.Repeat("y", 500)+`"}`), hmacDelivery)
	if !errors.Is(err, ErrUnknownType) || strings.Contains(err.Error(), "\n") || len(err.Error()) > 120 {
		t.Fatalf("Parse = %q", err)
	}
}

func TestParseJWTClaimsEnvelope(t *testing.T) {
	claims := map[string]any{
		"iss": "https://generativelanguage.googleapis.com", "exp": float64(1767003600),
		"type": "interaction.requires_action", "timestamp": "2026-01-22T12:00:00Z",
		"data": map[string]any{"id": "int_1", "user_metadata": map[string]any{"k": "v"}},
	}
	jwtDelivery := Verified{ID: "msg_j", Method: MethodJWT, Claims: claims}

	ev, err := Parse(nil, jwtDelivery)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := event.Event{Name: "int_1", Kind: opname.KindInteraction, State: lifecycle.RequiresAction, GeminiStatus: "interaction.requires_action",
		UpdateTime: time.Date(2026, 1, 22, 12, 0, 0, 0, time.UTC), Source: event.SourceWebhook,
		DeliveryID: "msg_j", UserMetadata: map[string]any{"k": "v"}}
	if !eventsEqual(ev, want) {
		t.Fatalf("Parse =\n %+v\nwant\n %+v", ev, want)
	}

	// The claims go through the same validation as a body.
	bad := Verified{Method: MethodJWT, Claims: map[string]any{"type": "batch.succeeded", "data": "b"}}
	var be *BadEnvelopeError
	if _, err := Parse(nil, bad); !errors.As(err, &be) || be.Reason != "data is not an object" {
		t.Fatalf("Parse(bad claims) = %v", err)
	}
	// HMAC deliveries never fall back to claims.
	hm := Verified{Method: MethodHMAC, Claims: claims}
	if _, err := Parse(nil, hm); !errors.As(err, &be) || be.Reason != "empty body" {
		t.Fatalf("Parse(hmac, empty) = %v", err)
	}
	// Claims without data are not an envelope.
	noData := Verified{Method: MethodJWT, Claims: map[string]any{"type": "batch.succeeded"}}
	if _, err := Parse(nil, noData); !errors.As(err, &be) || be.Reason != "empty body" {
		t.Fatalf("Parse(no data claim) = %v", err)
	}
	// Claims that cannot be encoded back to JSON (a verified token's never
	// are, but Verified is a plain struct) are a bad envelope, not a panic.
	unencodable := Verified{Method: MethodJWT, Claims: map[string]any{"type": "batch.succeeded",
		"data": map[string]any{"id": "b"}, "x": math.NaN()}}
	if _, err := Parse(nil, unencodable); !errors.As(err, &be) || be.Reason != "token claims are not JSON-encodable" {
		t.Fatalf("Parse(unencodable claims) = %v", err)
	}
}

// TestParseKeysAreCaseInsensitive pins a deliberate choice: well-formed
// envelopes are decoded by encoding/json, which matches keys regardless of
// case. The body is authenticated first, so this admits nothing a sender
// could not send anyway, and it keeps the hot path cheap (see parseFast).
func TestParseKeysAreCaseInsensitive(t *testing.T) {
	ev, err := Parse([]byte(`{"Type":"batch.succeeded","DATA":{"Id":"b"}}`), Verified{ID: "m"})
	if err != nil || ev.Name != "b" || ev.State != lifecycle.Succeeded {
		t.Fatalf("Parse = %+v, %v", ev, err)
	}
}

// TestParseErrorShapes: every shape a failure may come in (the documented
// error_code/error_message, an error object {code, message} as a
// google.rpc.Status, a status name, an errors list, a bare string, missing
// fields) gives the error's code and message, and a video.generated that
// carries any of them is FAILED, never SUCCEEDED. Each body is parsed twice:
// as sent (the fast decoder) and with a field of the wrong type added, which
// sends it through the map decoder; both must agree.
func TestParseErrorShapes(t *testing.T) {
	type want struct {
		failed bool
		err    *event.ErrorInfo
	}
	shapes := []struct {
		name string
		data string // data fields after the id
		want want
	}{
		{"error object", `"error":{"code":3,"message":"prompt rejected"}`, want{true, &event.ErrorInfo{Code: 3, Message: "prompt rejected"}}},
		{"error object with status", `"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}`, want{true, &event.ErrorInfo{Code: 429, Message: "quota"}}},
		{"error object, status name only", `"error":{"status":"RESOURCE_EXHAUSTED","message":"quota"}`, want{true, &event.ErrorInfo{Message: "RESOURCE_EXHAUSTED: quota"}}},
		{"error object, code as name", `"error":{"code":"INVALID_ARGUMENT","message":"bad"}`, want{true, &event.ErrorInfo{Message: "INVALID_ARGUMENT: bad"}}},
		{"error object, code as numeric string", `"error":{"code":"13","message":"internal"}`, want{true, &event.ErrorInfo{Code: 13, Message: "internal"}}},
		{"error object, message only", `"error":{"message":"safety filter"}`, want{true, &event.ErrorInfo{Message: "safety filter"}}},
		{"error object, code only", `"error":{"code":13}`, want{true, &event.ErrorInfo{Code: 13}}},
		{"error object, empty", `"error":{}`, want{true, &event.ErrorInfo{}}},
		{"error object with details", `"error":{"code":3,"message":"m","details":[{"@type":"x"}]}`, want{true, &event.ErrorInfo{Code: 3, Message: "m"}}},
		{"error as a string", `"error":"generation failed"`, want{true, &event.ErrorInfo{Message: "generation failed"}}},
		{"errors list", `"errors":[{"code":"429","message":"quota"},{"code":"500","message":"later"}]`, want{true, &event.ErrorInfo{Code: 429, Message: "quota"}}},
		{"flat fields", `"error_code":3,"error_message":"prompt rejected"`, want{true, &event.ErrorInfo{Code: 3, Message: "prompt rejected"}}},
		{"flat message only", `"error_message":"blocked"`, want{true, &event.ErrorInfo{Message: "blocked"}}},
		{"flat code only", `"error_code":"RESOURCE_EXHAUSTED"`, want{true, &event.ErrorInfo{Message: "RESOURCE_EXHAUSTED"}}},
		{"flat fields win over the object", `"error_code":3,"error_message":"flat","error":{"code":9,"message":"object"}`, want{true, &event.ErrorInfo{Code: 3, Message: "flat"}}},
		{"object when the flat fields are empty", `"error_code":null,"error_message":"","error":{"code":9,"message":"object"}`, want{true, &event.ErrorInfo{Code: 9, Message: "object"}}},
		{"no error", `"video_uri":"gs://v/1"`, want{false, nil}},
		{"error null", `"error":null,"errors":null`, want{false, nil}},
		{"errors empty", `"errors":[]`, want{false, nil}},
		{"flat code 0 alone is gRPC OK", `"error_code":0`, want{false, nil}},
		{"empty error string", `"error":""`, want{false, nil}},
	}
	forceSlow := func(body string) string { return strings.Replace(body, `"data":{`, `"data":{"file_name":42,`, 1) }
	for _, typ := range []string{"video.generated", "interaction.failed", "batch.failed"} {
		for _, c := range shapes {
			body := `{"type":"` + typ + `","timestamp":"2026-01-22T12:00:00Z","data":{"id":"x1",` + c.data + `}}`
			for path, b := range map[string]string{"fast": body, "map": forceSlow(body)} {
				t.Run(typ+"/"+c.name+"/"+path, func(t *testing.T) {
					ev, err := Parse([]byte(b), hmacDelivery)
					if err != nil {
						t.Fatalf("Parse(%s): %v", b, err)
					}
					wantState := lifecycle.Failed
					if typ == "video.generated" && !c.want.failed {
						wantState = lifecycle.Succeeded
					}
					if ev.State != wantState {
						t.Errorf("state %s, want %s", ev.State, wantState)
					}
					if !reflect.DeepEqual(ev.Error, c.want.err) {
						t.Errorf("error %+v, want %+v", ev.Error, c.want.err)
					}
					if ev.GeminiStatus != typ {
						t.Errorf("gemini status %q, want the event type %q", ev.GeminiStatus, typ)
					}
				})
			}
		}
	}
}
