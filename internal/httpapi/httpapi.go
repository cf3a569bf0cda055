// Package httpapi holds the HTTP handlers of the functions (contract §3–§5).
// They are thin: verify and parse at the edge, then hand the event to the
// one ingest door and translate its answer into the contract's status codes.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/webhook"
)

// Ingester is the ingest door as the handlers use it.
type Ingester interface {
	Ingest(ctx context.Context, ev ingest.Event) (ingest.Result, error)
}

// Verifier checks a delivery's signature on the raw body.
type Verifier interface {
	Verify(ctx context.Context, h http.Header, body []byte) (webhook.Verified, error)
}

// RetryAfterSeconds is what a 503 asks the sender to wait.
const RetryAfterSeconds = 30

// Answer is the JSON body of every answer.
type Answer struct {
	Outcome   string `json:"outcome"`
	Reason    string `json:"reason"`
	Operation string `json:"operation"`
}

func reply(w http.ResponseWriter, status int, a Answer) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}

// readBody reads at most max bytes; over that it answers 413 itself.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, bool) {
	if r.ContentLength > max {
		reply(w, http.StatusRequestEntityTooLarge, Answer{Outcome: "rejected", Reason: "body-too-large"})
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		reply(w, http.StatusRequestEntityTooLarge, Answer{Outcome: "rejected", Reason: "body-too-large"})
		return nil, false
	case err != nil:
		reply(w, http.StatusBadRequest, Answer{Outcome: "rejected", Reason: "unreadable-body"})
		return nil, false
	}
	return body, true
}

func methodPOST(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodPost {
		return true
	}
	w.Header().Set("Allow", http.MethodPost)
	reply(w, http.StatusMethodNotAllowed, Answer{Outcome: "rejected", Reason: "method-not-allowed"})
	return false
}

// ingestAnswer maps the door's result to a status and answer.
func ingestAnswer(res ingest.Result, err error) (int, Answer) {
	var invalid *ingest.InvalidError
	switch {
	case err == nil:
		return http.StatusOK, Answer{Outcome: string(res.Outcome), Reason: res.Reason, Operation: res.Operation}
	case errors.As(err, &invalid):
		return http.StatusBadRequest, Answer{Outcome: "rejected", Reason: "invalid-name"}
	case errors.Is(err, ingest.ErrSideEffect):
		return http.StatusServiceUnavailable, Answer{Outcome: "error", Reason: "side-effect-failed", Operation: res.Operation}
	default:
		return http.StatusServiceUnavailable, Answer{Outcome: "error", Reason: "ledger-unavailable", Operation: res.Operation}
	}
}

// Webhook returns the Webhook function (contract §3).
func Webhook(door Ingester, v Verifier, log *slog.Logger, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		status, a := webhookAnswer(ctx, w, r, door, v, maxBody)
		if status == 0 {
			return // answered by readBody or methodPOST
		}
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		} else if status >= 400 {
			level = slog.LevelWarn
		}
		// webhook-id is an opaque delivery id, safe to log; the signature
		// and body are not logged.
		log.Log(ctx, level, "webhook answer", "status", status, "outcome", a.Outcome, "reason", a.Reason,
			"operation", a.Operation, "delivery_id", truncate(r.Header.Get("webhook-id"), 128))
		reply(w, status, a)
	})
}

func webhookAnswer(ctx context.Context, w http.ResponseWriter, r *http.Request, door Ingester, v Verifier, maxBody int64) (int, Answer) {
	if !methodPOST(w, r) {
		return 0, Answer{}
	}
	body, ok := readBody(w, r, maxBody)
	if !ok {
		return 0, Answer{}
	}
	verified, err := v.Verify(ctx, r.Header, body)
	if err != nil {
		var verr *webhook.Error
		if errors.As(err, &verr) {
			return verr.Status, Answer{Outcome: "rejected", Reason: verr.Reason}
		}
		return http.StatusUnauthorized, Answer{Outcome: "rejected", Reason: "invalid-signature"}
	}
	ev, err := webhook.Parse(body, verified)
	var bad *webhook.BadEnvelopeError
	switch {
	case errors.Is(err, webhook.ErrUnknownType):
		return http.StatusOK, Answer{Outcome: "ignored", Reason: "unknown-event-type"}
	case errors.As(err, &bad):
		return http.StatusBadRequest, Answer{Outcome: "rejected", Reason: bad.Reason}
	case err != nil:
		return http.StatusBadRequest, Answer{Outcome: "rejected", Reason: "bad-envelope"}
	}
	return ingestAnswer(door.Ingest(ctx, ev))
}

// RegisterRequest is the body of POST /Register (contract §5).
type RegisterRequest struct {
	Name     string         `json:"name"`
	Kind     string         `json:"kind"`
	Metadata map[string]any `json:"metadata"`
}

// registerMaxBody bounds a registration: a name, a kind and some metadata.
const registerMaxBody = 64 << 10

// Register returns the Register function: 201 created, 200 already known
// (state untouched; the metadata keys it lacked are merged), 400 invalid. Of
// concurrent registrations of one name exactly one answers 201.
func Register(door Ingester, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !methodPOST(w, r) {
			return
		}
		body, ok := readBody(w, r, registerMaxBody)
		if !ok {
			return
		}
		var req RegisterRequest
		if err := json.Unmarshal(body, &req); err != nil {
			reply(w, http.StatusBadRequest, Answer{Outcome: "rejected", Reason: "invalid-json"})
			return
		}
		kind := opname.KindUnknown
		if req.Kind != "" {
			k, ok := opname.ParseKind(req.Kind)
			if !ok {
				reply(w, http.StatusBadRequest, Answer{Outcome: "rejected", Reason: "invalid-kind"})
				return
			}
			kind = k
		}
		res, err := door.Ingest(r.Context(), ingest.Event{Name: req.Name, Kind: kind, State: lifecycle.Pending,
			Source: ingest.SourceRegister, UserMetadata: req.Metadata})
		status, a := ingestAnswer(res, err)
		if status == http.StatusOK {
			if res.Outcome == ingest.OutcomeApplied && res.Reason == string(lifecycle.ReasonFirstSighting) {
				status, a.Outcome = http.StatusCreated, "created"
			} else {
				a.Outcome, a.Reason = "known", "state-untouched"
			}
		}
		log.InfoContext(r.Context(), "register answer", "status", status, "outcome", a.Outcome, "operation", a.Operation)
		reply(w, status, a)
	})
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
