package fakegemini

import (
	"fmt"
	"net/http"
	"strconv"
)

// Drop is a FailNext status that closes the connection without answering,
// which the client sees as a transport error.
const Drop = -1

// RetryAfterSeconds is the Retry-After value sent with an injected 429.
const RetryAfterSeconds = 1

// Matcher selects the requests a fault applies to.
type Matcher func(r *http.Request) bool

type fault struct {
	match  Matcher
	status int
	left   int // < 0: until ClearFaults
}

// FailNext makes the next n requests whose URL path equals path (every
// request when path is "") fail with status: an error body in the Google
// format, plus Retry-After for 429. status Drop closes the connection
// instead. n < 0 fails every matching request until ClearFaults.
//
// Faults are consumed in the order they were added; the API key is checked
// first, so an unauthenticated request neither fails by fault nor uses one.
func (s *Server) FailNext(path string, status, n int) {
	s.FailNextMatching(func(r *http.Request) bool { return path == "" || r.URL.Path == path }, status, n)
}

// FailNextMatching is FailNext with an arbitrary request matcher.
func (s *Server) FailNextMatching(m Matcher, status, n int) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{match: m, status: status, left: n})
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
		if f.status == Drop {
			return response{drop: true}, true
		}
		resp := errorResponse(f.status, fmt.Sprintf("injected fault %d", f.status), rpcStatus(f.status))
		if f.status == http.StatusTooManyRequests {
			resp.header = http.Header{"Retry-After": {strconv.Itoa(RetryAfterSeconds)}}
		}
		return resp, true
	}
	return response{}, false
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
