// Package results defines the results message of CONTRACT.md §6: the one
// message downstream workers receive per operation's first terminal state.
package results

import (
	"encoding/json"
	"fmt"
	"time"
)

// ErrorInfo is an operation's failure detail.
type ErrorInfo struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Message is the results message. Its JSON form is the message data; the
// attributes and ordering key are derived from it.
type Message struct {
	Operation string `json:"operation"`
	// APIName is the name to call the Gemini API with (operations.get):
	// the most specific form the ledger keeps, e.g. a Veo operation's
	// models/M/operations/ID while Operation is operations/ID. Empty (null
	// in JSON) only on a message fixed before lrosink recorded it.
	APIName APIName `json:"api_name"`
	Kind    string  `json:"kind"`
	State   string  `json:"state"`
	// GeminiStatus is Gemini's raw status string behind State (see
	// RawStatus).
	GeminiStatus   RawStatus      `json:"gemini_status"`
	UpdateTime     time.Time      `json:"update_time"`
	SettledBy      string         `json:"settled_by"`
	SettledAt      time.Time      `json:"settled_at"`
	IdempotencyKey string         `json:"idempotency_key"`
	Output         map[string]any `json:"output"`
	Error          *ErrorInfo     `json:"error"`
	UserMetadata   map[string]any `json:"user_metadata"`
	// ReplayID is set only on deliberate replays; it travels as an attribute.
	ReplayID string `json:"-"`
}

// RawStatus is the provider's raw status string as last observed, e.g.
// "budget_exceeded", "JOB_STATE_SUCCEEDED" or a webhook event type such as
// "video.generated". Empty encodes as null: a message fixed before lrosink
// recorded the status (a claim written by an older version) has none.
type RawStatus string

// MarshalJSON encodes an empty status as null.
func (s RawStatus) MarshalJSON() ([]byte, error) { return nullIfEmpty(string(s)) }

// APIName is the operation's name for the Gemini API (operations.get).
// Empty encodes as null: a message fixed before lrosink put the API name in
// it (a claim written by an older version) has none.
type APIName string

// MarshalJSON encodes an empty API name as null.
func (n APIName) MarshalJSON() ([]byte, error) { return nullIfEmpty(string(n)) }

// nullIfEmpty is json.Marshal(s), or null for "" (appendJSONString: the
// same bytes, without an encoder run for the plain names these are).
func nullIfEmpty(s string) ([]byte, error) {
	if s == "" {
		return []byte("null"), nil
	}
	return appendJSONString(make([]byte, 0, len(s)+2), s), nil
}

// Data returns the message data: the JSON object of CONTRACT.md §6. Output is
// always an object (never null) so consumers can index it without a check.
func (m Message) Data() ([]byte, error) {
	if m.Output == nil {
		m.Output = map[string]any{}
	}
	m.UpdateTime = m.UpdateTime.UTC()
	m.SettledAt = m.SettledAt.UTC()
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode results message for %s: %w", m.Operation, err)
	}
	return b, nil
}

// Attributes returns the message attributes of CONTRACT.md §6.
func (m Message) Attributes() map[string]string {
	a := make(map[string]string, 6)
	m.eachAttribute(func(k, v string) { a[k] = v })
	return a
}

// eachAttribute calls fn with each of m's attributes, in the order of their
// keys (json.Marshal's order for the map Attributes returns).
func (m Message) eachAttribute(fn func(k, v string)) {
	if m.APIName != "" {
		fn("api_name", string(m.APIName))
	}
	fn("idempotency_key", m.IdempotencyKey)
	fn("kind", m.Kind)
	fn("operation", m.Operation)
	if m.ReplayID != "" {
		fn("replay_id", m.ReplayID)
	}
	fn("state", m.State)
}

// AppendAttributesJSON appends json.Marshal(m.Attributes()) to b without
// building the map: a results file writes it on every line.
func (m Message) AppendAttributesJSON(b []byte) []byte {
	b = append(b, '{')
	first := true
	m.eachAttribute(func(k, v string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, v)
	})
	return append(b, '}')
}

// appendJSONString appends s as json.Marshal writes it: as it is when
// every byte is printable ASCII that needs no escape (names, keys, states),
// else through json.Marshal itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// OrderingKey is the operation's canonical name.
func (m Message) OrderingKey() string { return m.Operation }
