package consume

import (
	"encoding/json"
	"time"
)

// Terminal states a Result can carry (docs/results.schema.json). Consumers
// should treat a state they do not know as terminal too: later versions of
// lrosink may add some.
const (
	StateSucceeded  = "SUCCEEDED"
	StateFailed     = "FAILED"
	StateCancelled  = "CANCELLED"
	StateExpired    = "EXPIRED"
	StateIncomplete = "INCOMPLETE" // interactions that ended incomplete or over budget
)

// Result is the data of one lrosink results message (docs/CONTRACT.md §6,
// docs/results.schema.json). Unknown fields are ignored, as the schema asks.
// Numbers inside Output and UserMetadata are json.Number, the literal as
// published (a job id 1234567890123456789 stays exact; a float64 would not).
type Result struct {
	Operation string `json:"operation"` // canonical name: batches/ID, operations/ID, interactions/ID
	// APIName is the name to call the Gemini API with (operations.get):
	// models/M/operations/ID for a Veo video whose model lrosink learnt,
	// otherwise the same as Operation; empty on messages from versions
	// before it was added.
	APIName    string    `json:"api_name"`
	Kind       string    `json:"kind"`  // batch, video, interaction
	State      string    `json:"state"` // the first terminal state (State* constants)
	UpdateTime time.Time `json:"update_time"`
	SettledBy  string    `json:"settled_by"` // webhook or reconcile
	SettledAt  time.Time `json:"settled_at"`
	// GeminiStatus is the provider's raw status string as last observed
	// (e.g. JOB_STATE_SUCCEEDED, BATCH_STATE_FAILED, incomplete).
	GeminiStatus   string         `json:"gemini_status"`
	IdempotencyKey string         `json:"idempotency_key"`
	Output         map[string]any `json:"output"`
	Error          *ResultError   `json:"error"`
	UserMetadata   map[string]any `json:"user_metadata"`
}

// ResultError is why an operation failed, when Gemini said.
type ResultError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// BatchStats is output.batch_stats: a batch's request counts, when Gemini
// reports them.
type BatchStats struct {
	RequestCount           int64 `json:"request_count"`
	SuccessfulRequestCount int64 `json:"successful_request_count"`
	FailedRequestCount     int64 `json:"failed_request_count"`
	PendingRequestCount    int64 `json:"pending_request_count"`
}

// BatchStats returns output.batch_stats, and false when the result has none
// (or it is not an object of counts).
func (r Result) BatchStats() (BatchStats, bool) {
	v, ok := r.Output["batch_stats"]
	if !ok || v == nil {
		return BatchStats{}, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return BatchStats{}, false
	}
	var s BatchStats
	if err := json.Unmarshal(b, &s); err != nil {
		return BatchStats{}, false
	}
	return s, true
}
