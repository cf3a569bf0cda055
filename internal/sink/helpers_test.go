package sink_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/results/resultstest"
)

// message returns a settled results message for operation op.
func message(op string) results.Message {
	return results.Message{
		Operation:      op,
		APIName:        results.APIName(op),
		Kind:           "batch",
		State:          "SUCCEEDED",
		UpdateTime:     time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		SettledBy:      "webhook",
		SettledAt:      time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC),
		IdempotencyKey: "gemini:" + op,
		Output:         map[string]any{"uri": "gs://bucket/" + op},
		UserMetadata:   map[string]any{"tenant": "t1"},
	}
}

// wantAttrs spells out the CONTRACT.md §6 attributes rather than deriving them
// from results.Message, so a drift in either is caught here.
func wantAttrs(m results.Message) map[string]string {
	a := map[string]string{
		"idempotency_key": m.IdempotencyKey,
		"operation":       m.Operation,
		"state":           m.State,
		"kind":            m.Kind,
	}
	if m.APIName != "" {
		a["api_name"] = string(m.APIName)
	}
	if m.ReplayID != "" {
		a["replay_id"] = m.ReplayID
	}
	return a
}

// checkData asserts the fields of a decoded message data object.
func checkData(t *testing.T, got map[string]any, m results.Message) {
	t.Helper()
	want := map[string]any{
		"operation":       m.Operation,
		"kind":            m.Kind,
		"state":           m.State,
		"update_time":     m.UpdateTime.UTC().Format(time.RFC3339Nano),
		"settled_by":      m.SettledBy,
		"settled_at":      m.SettledAt.UTC().Format(time.RFC3339Nano),
		"idempotency_key": m.IdempotencyKey,
		"api_name":        nil, // null when unknown (a message fixed by an older version)
	}
	if m.APIName != "" {
		want["api_name"] = string(m.APIName)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: data[%q] = %v, want %v", m.Operation, k, got[k], v)
		}
	}
	if out, _ := got["output"].(map[string]any); out["uri"] != m.Output["uri"] {
		t.Errorf("%s: data.output = %v, want uri %v", m.Operation, got["output"], m.Output["uri"])
	}
	if um, _ := got["user_metadata"].(map[string]any); um["tenant"] != "t1" {
		t.Errorf("%s: data.user_metadata = %v, want tenant t1", m.Operation, got["user_metadata"])
	}
	if e, ok := got["error"]; !ok || e != nil {
		t.Errorf("%s: data.error = %v (present %v), want null", m.Operation, e, ok)
	}
	if _, ok := got["replay_id"]; ok {
		t.Errorf("%s: data has replay_id; it belongs in the attributes only", m.Operation)
	}
}

// checkSchema validates a line or Pub/Sub data against the published schema.
func checkSchema(t *testing.T, raw []byte) {
	t.Helper()
	resultstest.Check(t, raw)
}

func opName(i int) string { return fmt.Sprintf("batches/op-%03d", i) }

// discard is the logger of a test that reads no log line.
var discard = slog.New(slog.DiscardHandler)
