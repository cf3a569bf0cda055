package submit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lrosink/lrosink/internal/retry"
)

// HTTP returns the Intents of a Register function at registerURL (e.g.
// http://127.0.0.1:8080/Register, or the Cloud Run service's URL), spoken
// over client (nil: http.DefaultClient) with the intent protocol of
// CONTRACT.md §5. Authentication is the client's: wrap its transport with
// BearerTransport for LROSINK_ADMIN_TOKEN, or use an ID-token client
// (google.golang.org/api/idtoken) on Cloud Run.
//
// Record and Bind are idempotent, so a 503 (the ledger unavailable, the
// service stopping) or a failure to connect is retried, up to 4 tries
// within the caller's context.
func HTTP(registerURL string, client *http.Client) Intents {
	if client == nil {
		client = http.DefaultClient
	}
	return &httpIntents{url: registerURL, client: client, sleep: retry.Sleep}
}

// BearerTransport adds "Authorization: Bearer token" to every request
// (base nil: http.DefaultTransport).
func BearerTransport(token string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return bearer{token: token, base: base}
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

type httpIntents struct {
	url    string
	client *http.Client
	sleep  func(context.Context, time.Duration) error
}

// RegisterError is the Register function's refusal: its HTTP status, its
// outcome and reason labels (match on Reason, or with errors.Is against
// ErrIntentMismatch, ErrIntentUnknown, ErrIntentBoundElsewhere,
// ErrInvalidIntent) and its detail text.
type RegisterError struct {
	Status          int
	Outcome, Reason string
	Detail          string
}

func (e *RegisterError) Error() string {
	s := fmt.Sprintf("the Register function answered %d", e.Status)
	if e.Reason != "" {
		s += " " + e.Reason
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
		s += " (check LROSINK_ADMIN_TOKEN, or the caller's access to the service)"
	}
	return s
}

// Is matches the reason's sentinel.
func (e *RegisterError) Is(target error) bool {
	for _, s := range []error{ErrIntentMismatch, ErrIntentUnknown, ErrIntentBoundElsewhere, ErrInvalidIntent} {
		if target == s {
			return e.Reason == s.Error()
		}
	}
	return false
}

// answer is the Register function's JSON answer.
type answer struct {
	Outcome string      `json:"outcome"`
	Reason  string      `json:"reason"`
	Detail  string      `json:"detail"`
	Intent  *statusJSON `json:"intent"`
}

// statusJSON is the status object of CONTRACT.md §5.
type statusJSON struct {
	Key         string         `json:"key"`
	Kind        string         `json:"kind"`
	Model       string         `json:"model"`
	DisplayName string         `json:"display_name"`
	Metadata    map[string]any `json:"metadata"`
	State       string         `json:"state"`
	CreatedAt   *time.Time     `json:"created_at"`
	GraceUntil  *time.Time     `json:"grace_until"`
	Name        string         `json:"name"`
	APIName     string         `json:"api_name"`
	BoundAt     *time.Time     `json:"bound_at"`
	BoundBy     string         `json:"bound_by"`
}

func (s *statusJSON) status() IntentStatus {
	out := IntentStatus{
		Intent: Intent{Key: s.Key, Kind: s.Kind, Model: s.Model, DisplayName: s.DisplayName, Metadata: s.Metadata},
		State:  s.State, Name: s.Name, APIName: s.APIName, BoundBy: s.BoundBy,
	}
	for _, t := range []struct {
		dst *time.Time
		src *time.Time
	}{{&out.CreatedAt, s.CreatedAt}, {&out.GraceUntil, s.GraceUntil}, {&out.BoundAt, s.BoundAt}} {
		if t.src != nil {
			*t.dst = *t.src
		}
	}
	return out
}

func (h *httpIntents) Record(ctx context.Context, in Intent) (IntentStatus, error) {
	body := map[string]any{"intent": in.Key, "kind": in.Kind, "model": in.Model}
	if in.DisplayName != "" {
		body["display_name"] = in.DisplayName
	}
	if len(in.Metadata) > 0 {
		body["metadata"] = in.Metadata
	}
	st, code, err := h.post(ctx, body)
	if err != nil {
		return IntentStatus{}, fmt.Errorf("record intent %s: %w", in.Key, err)
	}
	st.Recorded = code == http.StatusCreated
	return st, nil
}

func (h *httpIntents) Bind(ctx context.Context, key, name string) (IntentStatus, error) {
	st, _, err := h.post(ctx, map[string]any{"name": name, "intent": key})
	if err != nil {
		return IntentStatus{}, fmt.Errorf("bind intent %s to %s: %w", key, name, err)
	}
	return st, nil
}

// maxAnswer bounds what is read of an answer.
const maxAnswer = 1 << 20

// post sends one protocol request, retrying what may pass, and returns
// the intent status of a 200 or 201.
func (h *httpIntents) post(ctx context.Context, body map[string]any) (IntentStatus, int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return IntentStatus{}, 0, fmt.Errorf("encode the request: %w", err)
	}
	var st IntentStatus
	var code int
	var asked time.Duration
	r := retry.Retrier{
		MaxAttempts: 4,
		Delay:       retry.Backoff{Initial: 500 * time.Millisecond, Multiplier: 2, Max: 4 * time.Second, Jitter: 0.5}.Delay,
		Sleep:       h.sleep,
		Retryable:   retryable,
		After:       func(error) time.Duration { return asked },
		Now:         time.Now,
	}
	_, err = r.Do(ctx, func(ctx context.Context) error {
		asked = 0
		var wait time.Duration
		st, code, wait, err = h.once(ctx, b)
		asked = wait
		return err
	})
	return st, code, err
}

// retryable: a 503 or a failure to reach the service (not the caller's
// context ending).
func retryable(err error) bool {
	var re *RegisterError
	if errors.As(err, &re) {
		return re.Status == http.StatusServiceUnavailable
	}
	var ne net.Error
	return errors.As(err, &ne) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// maxRetryAfter caps how long a Retry-After is waited out (Register says
// 30 s; a submit waiting that long per try would look hung).
const maxRetryAfter = 5 * time.Second

func (h *httpIntents) once(ctx context.Context, body []byte) (IntentStatus, int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return IntentStatus{}, 0, 0, fmt.Errorf("build the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return IntentStatus{}, 0, 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return IntentStatus{}, 0, 0, fmt.Errorf("read the answer: %w", err)
	}
	var a answer
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber() // metadata comes back exactly
	decodeErr := d.Decode(&a)
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated {
		if decodeErr != nil || a.Intent == nil {
			return IntentStatus{}, 0, 0, fmt.Errorf("the Register function answered %d without an intent status (is %s a Register function that knows intents?)", resp.StatusCode, h.url)
		}
		return a.Intent.status(), resp.StatusCode, 0, nil
	}
	re := &RegisterError{Status: resp.StatusCode, Outcome: a.Outcome, Reason: a.Reason, Detail: a.Detail}
	if decodeErr != nil {
		re.Detail = strings.TrimSpace(string(raw))
		if len(re.Detail) > 200 {
			re.Detail = re.Detail[:200] + "..."
		}
	}
	var wait time.Duration
	if secs, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && secs > 0 {
		wait = min(time.Duration(secs)*time.Second, maxRetryAfter)
	}
	return IntentStatus{}, resp.StatusCode, wait, re
}
