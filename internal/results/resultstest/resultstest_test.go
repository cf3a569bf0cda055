package resultstest

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/results"
)

func valid() results.Message {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 123456000, time.UTC)
	return results.Message{Operation: "batches/b1", APIName: "batches/b1", Kind: "batch", State: "SUCCEEDED", UpdateTime: t0,
		SettledBy: "webhook", SettledAt: t0, IdempotencyKey: "gemini:batches/b1",
		GeminiStatus: "batch.succeeded", Output: map[string]any{"output_file_uri": "gs://b/r.jsonl"}}
}

// Any message of any kind, state and source that the door can build
// validates; Data() writes null error/metadata and an empty output object.
func TestEveryShapeTheDoorBuildsValidates(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := map[string]string{"batch": "batches/", "video": "operations/", "interaction": "interactions/"}
	for i := range 500 {
		m := valid()
		k := []string{"batch", "video", "interaction"}[rng.IntN(3)]
		m.Kind = k
		m.Operation = kinds[k] + "op" + string(rune('a'+i%26))
		m.IdempotencyKey = "gemini:" + m.Operation
		switch rng.IntN(4) {
		case 0:
			m.APIName = "" // fixed before lrosink put it in the message: null
		case 1:
			if k == "video" {
				m.APIName = results.APIName("models/veo-3.0-generate-001/" + m.Operation)
				break
			}
			fallthrough
		default:
			m.APIName = results.APIName(m.Operation)
		}
		m.State = []string{"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "INCOMPLETE"}[rng.IntN(5)]
		m.GeminiStatus = []results.RawStatus{"", "budget_exceeded", "JOB_STATE_SUCCEEDED", "video.generated", "done"}[rng.IntN(5)]
		m.SettledBy = []string{"webhook", "reconcile"}[rng.IntN(2)]
		if rng.IntN(2) == 0 {
			m.UpdateTime = time.Unix(0, 0)
		}
		switch rng.IntN(4) {
		case 0:
			m.Output = nil
		case 1:
			m.Output = map[string]any{"nested": []any{[]any{1.5, "x"}, map[string]any{"__name__": nil}}}
		case 2:
			m.Output = map[string]any{"responses_file": "files/r", "batch_stats": map[string]any{"request_count": int64(10),
				"successful_request_count": int64(7), "failed_request_count": int64(3), "pending_request_count": int64(0)}}
		}
		if rng.IntN(2) == 0 {
			m.Error = &results.ErrorInfo{Code: rng.IntN(20), Message: "boom"}
		}
		if rng.IntN(2) == 0 {
			m.UserMetadata = map[string]any{"job": "j" + string(rune('0'+i%10)), "n": float64(i)}
		}
		if rng.IntN(4) == 0 {
			m.ReplayID = "r1"
		}
		if err := ValidateMessage(m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		data, err := m.Data()
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(data); err != nil {
			t.Fatalf("message %d as Pub/Sub data: %v", i, err)
		}
	}
}

// The schema is strict enough to catch drift: each of these breaks it.
func TestSchemaRejectsWhatIsNotAResultsMessage(t *testing.T) {
	base, err := valid().Data()
	if err != nil {
		t.Fatal(err)
	}
	s := string(base)
	for name, bad := range map[string]string{
		"non-terminal state":     strings.Replace(s, `"SUCCEEDED"`, `"RUNNING"`, 1),
		"unknown kind":           strings.Replace(s, `"kind":"batch"`, `"kind":"job"`, 1),
		"settled by register":    strings.Replace(s, `"webhook"`, `"register"`, 1),
		"key without prefix":     strings.Replace(s, `"gemini:batches/b1"`, `"batches/b1"`, 1),
		"not a date-time":        strings.Replace(s, `"2026-11-23T10:00:00.123456Z"`, `"yesterday"`, 1),
		"output null":            strings.Replace(s, `"output":{"output_file_uri":"gs://b/r.jsonl"}`, `"output":null`, 1),
		"error without code":     strings.Replace(s, `"error":null`, `"error":{"message":"x"}`, 1),
		"undocumented field":     strings.Replace(s, `{`, `{"extra":1,`, 1),
		"missing user_metadata":  strings.Replace(s, `,"user_metadata":null`, ``, 1),
		"missing gemini_status":  strings.Replace(s, `"gemini_status":"batch.succeeded",`, ``, 1),
		"empty gemini_status":    strings.Replace(s, `"gemini_status":"batch.succeeded"`, `"gemini_status":""`, 1),
		"numeric gemini_status":  strings.Replace(s, `"gemini_status":"batch.succeeded"`, `"gemini_status":3`, 1),
		"missing api_name":       strings.Replace(s, `"api_name":"batches/b1",`, ``, 1),
		"empty api_name":         strings.Replace(s, `"api_name":"batches/b1"`, `"api_name":""`, 1),
		"api_name not a name":    strings.Replace(s, `"api_name":"batches/b1"`, `"api_name":"b1"`, 1),
		"unknown state":          strings.Replace(s, `"SUCCEEDED"`, `"PARTIALLY_SUCCEEDED"`, 1),
		"batch_stats as strings": strings.Replace(s, `"output":{`, `"output":{"batch_stats":{"request_count":"10","successful_request_count":"10","failed_request_count":"0","pending_request_count":"0"},`, 1),
		"batch_stats incomplete": strings.Replace(s, `"output":{`, `"output":{"batch_stats":{"request_count":10},`, 1),
		"batch_stats negative":   strings.Replace(s, `"output":{`, `"output":{"batch_stats":{"request_count":-1,"successful_request_count":0,"failed_request_count":0,"pending_request_count":0},`, 1),
		"batch_stats extra":      strings.Replace(s, `"output":{`, `"output":{"batch_stats":{"request_count":1,"successful_request_count":1,"failed_request_count":0,"pending_request_count":0,"x":1},`, 1),
	} {
		if bad == s {
			t.Fatalf("%s: the replacement did not apply to %s", name, s)
		}
		if err := Validate([]byte(bad)); err == nil {
			t.Errorf("%s: %s validated", name, bad)
		}
	}
}
