package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"google.golang.org/genai"
	"google.golang.org/genai/interactions/models/apierrors"
)

// httpError is a non-2xx answer to the Fetcher's own raw GET.
type httpError struct {
	Code    int
	Status  string
	Message string
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
	var parsed struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &parsed) == nil && (parsed.Error.Message != "" || parsed.Error.Status != "") {
		e.Message, e.Status = parsed.Error.Message, parsed.Error.Status
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
	}
	return 0
}

// retryable reports whether a failure may go away by itself: 408, 429, 5xx,
// or (without a status) a network error. Everything else is final.
func retryable(code int, err error) bool {
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
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
