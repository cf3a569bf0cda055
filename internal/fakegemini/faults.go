package fakegemini

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Drop is a FailNext status that closes the connection without answering,
// which the client sees as a transport error.
const Drop = -1

// StatusClientClosedRequest is the HTTP status Google APIs answer with
// google.rpc.Code CANCELLED (499): the request was cancelled, usually by
// the server side; retrying it is expected to work.
const StatusClientClosedRequest = 499

// DefaultRetryDelay is the RetryInfo.retryDelay an injected 429 carries
// when its Fault names none.
const DefaultRetryDelay = time.Second

// Matcher selects the requests a fault applies to.
type Matcher func(r *http.Request) bool

// Fault is an injected failure, answered with the error body the live API
// sends for its status (GEMINI.md §10).
type Fault struct {
	// Status is the HTTP status, or Drop.
	Status int
	// RetryDelay is a 429's google.rpc.RetryInfo.retryDelay, sent in
	// details[] as live 429s do; 0 is DefaultRetryDelay, negative omits
	// the RetryInfo detail.
	RetryDelay time.Duration
	// RetryAfter, when set, is sent as a Retry-After header. No live 429
	// seen carries one, so by default none is sent.
	RetryAfter string
}

type fault struct {
	match Matcher
	Fault
	left int // < 0: until ClearFaults
}

// FailNext makes the next n requests whose URL path equals path (every
// request when path is "") fail with status and the live error body for
// it (see Fault). status Drop closes the connection instead. n < 0 fails
// every matching request until ClearFaults.
//
// Faults are consumed in the order they were added; the API key is checked
// first, so an unauthenticated request neither fails by fault nor uses one.
func (s *Server) FailNext(path string, status, n int) {
	s.FailNextMatching(func(r *http.Request) bool { return path == "" || r.URL.Path == path }, status, n)
}

// FailNextMatching is FailNext with an arbitrary request matcher.
func (s *Server) FailNextMatching(m Matcher, status, n int) {
	s.FailNextWith(m, Fault{Status: status}, n)
}

// FailNextWith is FailNextMatching with a fully described Fault.
func (s *Server) FailNextWith(m Matcher, f Fault, n int) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{match: m, Fault: f, left: n})
}

// ClearFaults removes every pending fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// takeFault consumes the first fault matching r. Called with s.mu held.
func (s *Server) takeFault(r *http.Request) (response, bool) {
	for i, f := range s.faults {
		if !f.match(r) {
			continue
		}
		if f.left > 0 {
			f.left--
			if f.left == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		if f.Status == Drop {
			return response{drop: true}, true
		}
		resp := faultResponse(f.Fault)
		if f.RetryAfter != "" {
			resp.header = http.Header{"Retry-After": {f.RetryAfter}}
		}
		return resp, true
	}
	return response{}, false
}

// faultResponse is the body the live API sends for f.Status.
func faultResponse(f Fault) response {
	switch f.Status {
	case http.StatusTooManyRequests:
		// Shaped like the captures in GEMINI.md §10: a QuotaFailure, a Help
		// link and a RetryInfo, in that order.
		details := []map[string]any{
			{"@type": typeQuotaFailure, "violations": []any{map[string]any{
				"quotaMetric": "generativelanguage.googleapis.com/generate_requests_per_model",
				"quotaId":     "GenerateRequestsPerMinutePerProjectPerModel",
			}}},
			{"@type": typeHelp, "links": []any{map[string]any{
				"description": "Learn more about Gemini API quotas",
				"url":         "https://ai.google.dev/gemini-api/docs/rate-limits",
			}}},
		}
		delay := f.RetryDelay
		if delay == 0 {
			delay = DefaultRetryDelay
		}
		msg := "You exceeded your current quota, please check your plan and billing details."
		if delay > 0 {
			details = append(details, map[string]any{"@type": typeRetryInfo, "retryDelay": ProtoDuration(delay)})
			msg += " Please retry in " + delay.String() + "."
		}
		return errorResponse(f.Status, msg, "RESOURCE_EXHAUSTED", details...)
	case StatusClientClosedRequest:
		return errorResponse(f.Status, "The operation was cancelled.", "CANCELLED")
	case http.StatusBadRequest:
		return errorResponse(f.Status, "Request contains an invalid argument.", "INVALID_ARGUMENT")
	case http.StatusServiceUnavailable:
		return errorResponse(f.Status, "The model is overloaded. Please try again later.", "UNAVAILABLE")
	case http.StatusInternalServerError:
		return errorResponse(f.Status, "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting", "INTERNAL")
	}
	return errorResponse(f.Status, fmt.Sprintf("injected fault %d", f.Status), rpcStatus(f.Status))
}

// ProtoDuration formats d as google.protobuf.Duration's JSON: seconds with
// up to nine fractional digits and an "s" ("37s", "1.500s").
func ProtoDuration(d time.Duration) string {
	sec := d / time.Second
	frac := d % time.Second
	if frac == 0 {
		return strconv.FormatInt(int64(sec), 10) + "s"
	}
	f := strings.TrimRight(fmt.Sprintf("%09d", int64(frac)), "0")
	return strconv.FormatInt(int64(sec), 10) + "." + f + "s"
}

// rpcStatus is the google.rpc.Code name Google APIs pair with an HTTP status.
func rpcStatus(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case StatusClientClosedRequest:
		return "CANCELLED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	default:
		if code >= 500 {
			return "INTERNAL"
		}
		return "UNKNOWN"
	}
}
