package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// RetryAfterSeconds is what a 503 asks the sender to wait.
const RetryAfterSeconds = 30

// reply writes every JSON answer the functions give (CONTRACT.md §3–§5):
// the status, body as JSON and, on a 503, Retry-After, so that Gemini and
// Cloud Scheduler retry after it. Headers particular to one answer (Allow,
// WWW-Authenticate) are set by the caller before.
func reply(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// health is GET /healthz's body.
type health struct {
	Status string `json:"status"`
}

// Healthz answers {"status":"ok"}: the process serves HTTP. It checks
// nothing else, so a slow ledger never takes the instance out of service.
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, health{Status: "ok"})
	})
}
