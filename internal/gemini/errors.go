package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"
	"google.golang.org/genai/interactions/models/apierrors"
)

// httpError is a non-2xx answer to the Fetcher's own raw GET.
type httpError struct {
	Code    int
	Status  string
	Message string
	// Details are the body's google.rpc details; RetryAfter the header.
	Details    []map[string]any
	RetryAfter string
}

func (e *httpError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Code, e.Status, e.Message)
}

// maxErrorMessage bounds how much of an error body ends up in an error.
const maxErrorMessage = 512

// describeInteractionError makes a *ResponseValidationError readable: its
// message is only the JSON decoding failure, so the status and the body's
// message are added (the chain is kept for statusCode).
func describeInteractionError(err error) error {
	var rv *apierrors.ResponseValidationError
	if !errors.As(err, &rv) {
		return err
	}
	he := newHTTPError(rv.StatusCode, []byte(rv.Body))
	return fmt.Errorf("HTTP %d %s: %s: %w", he.Code, he.Status, he.Message, err)
}

func newHTTPError(code int, body []byte) *httpError {
	e := &httpError{Code: code}
	var parsed rpcBody
	if json.Unmarshal(body, &parsed) == nil && (parsed.Error.Message != "" || parsed.Error.Status != "") {
		e.Message, e.Status, e.Details = parsed.Error.Message, parsed.Error.Status, parsed.Error.Details
	} else {
		e.Message = string(body)
	}
	if len(e.Message) > maxErrorMessage {
		e.Message = e.Message[:maxErrorMessage] + "..."
	}
	return e
}

// statusCode extracts the HTTP status from any error the two SDK clients or
// the raw GET return; 0 when there is none (transport or local errors).
//
// genai returns the value type genai.APIError, with Code taken from the
// error body. The Interactions client (a separate generated SDK) returns
// pointer types from interactions/models/apierrors: a typed error when the
// body matches its schema, and *ResponseValidationError when it does not —
// which is what Google's usual {"error":{"code":404,...}} body gives, since
// that schema declares code a string.
func statusCode(err error) int {
	var ge genai.APIError
	if errors.As(err, &ge) {
		return apiErrorCode(ge.Code, ge.Status)
	}
	var gp *genai.APIError
	if errors.As(err, &gp) && gp != nil {
		return apiErrorCode(gp.Code, gp.Status)
	}
	var he *httpError
	if errors.As(err, &he) {
		return he.Code
	}
	var ie *apierrors.APIError
	if errors.As(err, &ie) {
		return ie.StatusCode
	}
	var rv *apierrors.ResponseValidationError
	if errors.As(err, &rv) {
		return rv.StatusCode
	}
	var ce *apierrors.GetInteractionByIDClientError
	if errors.As(err, &ce) {
		return responseCode(ce.HTTPMeta.Response)
	}
	var se *apierrors.GetInteractionByIDServerError
	if errors.As(err, &se) {
		return responseCode(se.HTTPMeta.Response)
	}
	return 0
}

func responseCode(r *http.Response) int {
	if r == nil {
		return 0
	}
	return r.StatusCode
}

// apiErrorCode falls back to the google.rpc status name when an error body
// carries no numeric code (genai then leaves Code 0).
func apiErrorCode(code int, status string) int {
	if code != 0 {
		return code
	}
	switch status {
	case "NOT_FOUND":
		return http.StatusNotFound
	case "RESOURCE_EXHAUSTED":
		return http.StatusTooManyRequests
	case "UNAVAILABLE":
		return http.StatusServiceUnavailable
	case "INTERNAL":
		return http.StatusInternalServerError
	case "DEADLINE_EXCEEDED":
		return http.StatusGatewayTimeout
	case "CANCELLED":
		return statusCancelled
	}
	return 0
}

// statusCancelled is the HTTP status Google pairs with google.rpc.Code
// CANCELLED.
const statusCancelled = 499

// rpcBody is Google's JSON error body (google.rpc.Status in "error").
type rpcBody struct {
	Error struct {
		Code    any              `json:"code"` // a number; the Interactions schema says string
		Message string           `json:"message"`
		Status  string           `json:"status"`
		Details []map[string]any `json:"details"`
	} `json:"error"`
}

// apiStatus is what lrosink reads from an API failure, whichever client
// returned it.
type apiStatus struct {
	Code       int
	Status     string // REST status name, e.g. INVALID_ARGUMENT
	Message    string
	Details    []map[string]any
	RetryAfter string // the Retry-After header, when the client kept it
}

// statusOf reads the API status behind err; ok is false for errors that
// are no API answer (transport, decoding, local).
func statusOf(err error) (apiStatus, bool) {
	var ge genai.APIError
	if errors.As(err, &ge) {
		return apiStatus{Code: apiErrorCode(ge.Code, ge.Status), Status: ge.Status, Message: ge.Message, Details: ge.Details}, true
	}
	var gp *genai.APIError
	if errors.As(err, &gp) && gp != nil {
		return apiStatus{Code: apiErrorCode(gp.Code, gp.Status), Status: gp.Status, Message: gp.Message, Details: gp.Details}, true
	}
	var he *httpError
	if errors.As(err, &he) {
		return apiStatus{Code: he.Code, Status: he.Status, Message: he.Message, Details: he.Details, RetryAfter: he.RetryAfter}, true
	}
	// The Interactions client keeps the raw body and response instead.
	var body string
	var resp *http.Response
	code := 0
	var ie *apierrors.APIError
	var rv *apierrors.ResponseValidationError
	switch {
	case errors.As(err, &rv):
		body, resp, code = rv.Body, rv.RawResponse, rv.StatusCode
	case errors.As(err, &ie):
		body, resp, code = ie.Body, ie.RawResponse, ie.StatusCode
	default:
		if code = statusCode(err); code == 0 {
			return apiStatus{}, false
		}
	}
	st := apiStatus{Code: code}
	he = newHTTPError(code, []byte(body))
	st.Status, st.Message, st.Details = he.Status, he.Message, he.Details
	if resp != nil {
		st.RetryAfter = resp.Header.Get("Retry-After")
	}
	return st, true
}

// reason is the ErrorInfo reason among the details, e.g. API_KEY_INVALID.
func (s apiStatus) reason() string {
	for _, d := range s.Details {
		if t, _ := d["@type"].(string); strings.HasSuffix(t, "google.rpc.ErrorInfo") {
			r, _ := d["reason"].(string)
			return r
		}
	}
	return ""
}

// keyRefused reports whether the API refused the API key: 400 with reason
// API_KEY_INVALID (a wrong key), 403 (no key, or one without access) or
// 401. GEMINI.md §10.
func (s apiStatus) keyRefused() bool {
	switch s.Code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return true
	case http.StatusBadRequest:
		return s.reason() == "API_KEY_INVALID"
	}
	return false
}

// serverDelay is the wait a failure asks for: the longer of its
// RetryInfo.retryDelay (every live 429 seen carries one) and its
// Retry-After header (none seen live; the genai client drops headers, so
// only the raw GET and the Interactions client can see one). 0: none.
func serverDelay(err error, now time.Time) time.Duration {
	st, ok := statusOf(err)
	if !ok {
		return 0
	}
	var d time.Duration
	for _, det := range st.Details {
		t, _ := det["@type"].(string)
		v, _ := det["retryDelay"].(string)
		if !strings.HasSuffix(t, "google.rpc.RetryInfo") || v == "" {
			continue
		}
		// google.protobuf.Duration's JSON ("37s", "1.500s") is a valid
		// Go duration.
		if p, err := time.ParseDuration(v); err == nil && p > d {
			d = p
		}
	}
	if ra := strings.TrimSpace(st.RetryAfter); ra != "" {
		if secs, err := strconv.Atoi(ra); err == nil && secs > 0 {
			d = max(d, time.Duration(secs)*time.Second)
		} else if at, err := http.ParseTime(ra); err == nil && at.After(now) {
			d = max(d, at.Sub(now))
		}
	}
	return d
}

// ErrAPIKeyRefused is wrapped by every error for a call the Gemini API
// refused because of the API key (see keyRefused). Its kind is
// fetcherr.Permanent: another try with the same key fails the same way.
var ErrAPIKeyRefused = errors.New("the Gemini API refused the API key (check GEMINI_API_KEY)")

// keyError is a refused key, described from the status alone: the body's
// details can echo the key (DebugInfo "Invalid API key: <key>"), so the
// SDK's own error text never becomes part of this one. The chain keeps it
// for errors.As.
type keyError struct {
	name string
	st   apiStatus
	err  error
}

func (e *keyError) Error() string {
	msg := e.st.Message
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage] + "..."
	}
	s := fmt.Sprintf("gemini: %s: %v: HTTP %d", e.name, ErrAPIKeyRefused, e.st.Code)
	if e.st.Status != "" {
		s += " " + e.st.Status
	}
	if r := e.st.reason(); r != "" {
		s += " (" + r + ")"
	}
	if msg != "" {
		s += ": " + msg
	}
	return s
}

func (e *keyError) Unwrap() []error { return []error{ErrAPIKeyRefused, e.err} }

// asKeyError turns err into a *keyError when the API refused the key.
func asKeyError(name string, err error) (error, bool) {
	st, ok := statusOf(err)
	if !ok || !st.keyRefused() {
		return err, false
	}
	return &keyError{name: name, st: st, err: err}, true
}

// retryable reports whether a failure may go away by itself: 408, 429,
// 499 (CANCELLED: Google's answer when it cancelled the request itself),
// 5xx, or (without a status) a network error. Everything else is final.
func retryable(code int, err error) bool {
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code == statusCancelled:
		return true
	case code >= 500 && code <= 599:
		return true
	case code != 0:
		return false
	}
	// *url.Error (what http.Client.Do returns) is a net.Error.
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF)
}
