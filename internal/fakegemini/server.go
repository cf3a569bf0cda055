// Package fakegemini is an in-memory fake of the parts of the Gemini API that
// lrosink calls: batch jobs, Veo video operations, Interactions (their
// creates and GETs), the Files API's resumable upload and the webhook
// management API. It speaks the REST paths and JSON shapes the genai Go SDK
// v1.77.0 uses, so tests (and the fault-injection simulator) can point a
// real genai.Client at it over real HTTP. Where the live API refuses what
// the SDK sends (camelCase userMetadata, GEMINI.md §13), so does the fake.
//
// The fake is deterministic: no randomness, no timers. Created operations'
// ids, webhook ids and signing secrets come from counters, and the clock is
// injectable.
package fakegemini

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DefaultAPIKey is the key the fake accepts unless WithAPIKey says otherwise;
// it is the one the project's tests give genai.NewClient.
const DefaultAPIKey = "test-key"

// apiPrefix is the version segment the genai SDK uses by default.
const apiPrefix = "/v1beta/"

// maxBody bounds what the fake reads and records per request; an upload
// chunk may be larger (maxUploadChunk, files.go).
const maxBody = 4 << 20

// Request is one request the fake received, recorded before any fault or
// auth check so tests can assert exactly what the client sent.
type Request struct {
	Method string
	Path   string // URL path, e.g. "/v1beta/batches/b1"
	Query  url.Values
	Body   []byte
	// HasAPIKey reports whether an x-goog-api-key header was present. The key
	// itself is not recorded, so a dump of the requests never leaks it.
	HasAPIKey bool
}

// Server is the fake. Create it with New; all methods are safe for
// concurrent use.
type Server struct {
	apiKey string
	now    func() time.Time

	mu           sync.Mutex
	batches      map[string]BatchState
	batchOrder   []string // first-Set order; the list endpoint answers newest first
	videos       map[string]VideoState
	interactions map[string]InteractionState
	webhooks     map[string]*webhook
	webhookOrder []string
	faults       []*fault
	requests     []Request
	calls        map[string]int
	webhookSeq   int            // drives webhook ids
	secretSeq    int            // drives signing secrets
	creates      map[string]int // operations created, by kind (creates.go)
	createSeq    int            // drives created operations' ids
	files        map[string]*storedFile
	uploads      map[string]*upload // resumable uploads in progress (files.go)
	fileSeq      int
}

// Option configures a Server.
type Option func(*Server)

// WithAPIKey sets the x-goog-api-key value the fake accepts.
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithClock sets the clock used for webhook create/update and secret expiry
// times. The default is time.Now.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// New returns an empty fake.
func New(opts ...Option) *Server {
	s := &Server{
		apiKey:       DefaultAPIKey,
		now:          time.Now,
		batches:      map[string]BatchState{},
		videos:       map[string]VideoState{},
		interactions: map[string]InteractionState{},
		webhooks:     map[string]*webhook{},
		calls:        map[string]int{},
		creates:      map[string]int{},
		files:        map[string]*storedFile{},
		uploads:      map[string]*upload{},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Handler returns the fake's HTTP handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Cleaner is the part of testing.TB that Start needs. Taking it instead of
// testing.TB keeps the testing package out of the simulator binary.
type Cleaner interface {
	Helper()
	Cleanup(func())
}

// Start serves the fake on a local httptest server that is closed when the
// test ends. Give its URL to genai as HTTPOptions.BaseURL.
func (s *Server) Start(t Cleaner) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// Calls returns how many requests arrived for the exact URL path (query
// excluded), including rejected and fault-injected ones.
func (s *Server) Calls(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[path]
}

// TotalCalls returns how many requests arrived in all.
func (s *Server) TotalCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Requests returns a copy of every request received, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Query = cloneValues(r.Query)
		r.Body = bytes.Clone(r.Body)
		out[i] = r
	}
	return out
}

// response is a fully computed answer, built under the lock and written
// after it is released.
type response struct {
	status int
	header http.Header
	body   []byte
	drop   bool // close the connection without answering
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	limit := int64(maxBody)
	if strings.HasPrefix(r.URL.Path, uploadPath) {
		limit = maxUploadChunk
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		writeResponse(w, errorResponse(http.StatusBadRequest, "cannot read body: "+err.Error(), "INVALID_ARGUMENT"))
		return
	}
	if int64(len(body)) > limit {
		// Cut short, it would be misread; the live API's limits are larger.
		writeResponse(w, errorResponse(http.StatusRequestEntityTooLarge, "fakegemini: request body over its limit", "INVALID_ARGUMENT"))
		return
	}
	resp := s.handle(r, body)
	if resp.drop {
		dropConnection(w)
		return
	}
	writeResponse(w, resp)
}

func (s *Server) handle(r *http.Request, body []byte) response {
	s.mu.Lock()
	defer s.mu.Unlock()

	key := r.Header.Get("x-goog-api-key")
	s.requests = append(s.requests, Request{
		Method: r.Method, Path: r.URL.Path, Query: cloneValues(r.URL.Query()),
		Body: body, HasAPIKey: key != "",
	})
	s.calls[r.URL.Path]++

	if key == "" {
		return missingKey()
	}
	if key != s.apiKey {
		return invalidKey(key)
	}
	if resp, ok := s.takeFault(r); ok {
		return resp
	}
	return s.route(r, body)
}

// route dispatches on the path below /v1beta/. The webhook custom methods
// (":ping", ":rotateSigningSecret") share a segment with the id, which
// http.ServeMux patterns cannot express, so routing is by hand.
func (s *Server) route(r *http.Request, body []byte) response {
	if r.URL.Path == uploadPath {
		return s.upload(r, body)
	}
	rest, ok := strings.CutPrefix(r.URL.Path, apiPrefix)
	if !ok {
		return notFound()
	}
	segs := strings.Split(rest, "/")
	switch {
	case len(segs) == 2 && segs[0] == "models" && strings.Contains(segs[1], ":"):
		if r.Method != http.MethodPost {
			return methodNotAllowed()
		}
		model, verb, _ := strings.Cut(segs[1], ":")
		switch verb {
		case "batchGenerateContent":
			return s.createBatch(model, body)
		case "predictLongRunning":
			return s.createVideo(model, body)
		}
		return notFound()
	case len(segs) == 1 && segs[0] == "interactions":
		if r.Method != http.MethodPost {
			return methodNotAllowed()
		}
		return s.createInteraction(body)
	case len(segs) == 2 && segs[0] == "files":
		if r.Method != http.MethodGet {
			return methodNotAllowed()
		}
		return s.getFile(segs[1])
	case len(segs) == 1 && segs[0] == "batches":
		if r.Method != http.MethodGet {
			return methodNotAllowed()
		}
		return s.listBatches(r.URL.Query())
	case len(segs) == 2 && segs[0] == "batches":
		if r.Method != http.MethodGet {
			return methodNotAllowed()
		}
		return s.getBatch(segs[1])
	case len(segs) == 4 && segs[0] == "models" && segs[2] == "operations":
		if r.Method != http.MethodGet {
			return methodNotAllowed()
		}
		return s.getVideo(segs[1], segs[3])
	case len(segs) == 2 && segs[0] == "interactions":
		if r.Method != http.MethodGet {
			return methodNotAllowed()
		}
		return s.getInteraction(segs[1])
	case len(segs) == 1 && segs[0] == "webhooks":
		switch r.Method {
		case http.MethodGet:
			return s.listWebhooks(r.URL.Query())
		case http.MethodPost:
			return s.createWebhook(body)
		}
		return methodNotAllowed()
	case len(segs) == 2 && segs[0] == "webhooks":
		id, verb, _ := strings.Cut(segs[1], ":")
		return s.webhookMethod(r.Method, id, verb, body)
	}
	return notFound()
}

func writeResponse(w http.ResponseWriter, resp response) {
	for k, v := range resp.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body)
}

func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		// HTTP/2 cannot hijack; aborting the handler resets the stream.
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

func jsonResponse(status int, v any) response {
	b, err := json.Marshal(v)
	if err != nil {
		return errorResponse(http.StatusInternalServerError, "fakegemini: encode response: "+err.Error(), "INTERNAL")
	}
	return response{status: status, body: b}
}

// apiError is the google.rpc.Status error body every Google API returns:
// code, message, the REST status name and, on most live answers, typed
// details (GEMINI.md §10).
type apiError struct {
	Error struct {
		Code    int              `json:"code"`
		Message string           `json:"message"`
		Status  string           `json:"status"`
		Details []map[string]any `json:"details,omitempty"`
	} `json:"error"`
}

func errorResponse(code int, msg, status string, details ...map[string]any) response {
	var e apiError
	e.Error.Code, e.Error.Message, e.Error.Status, e.Error.Details = code, msg, status, details
	b, err := json.Marshal(e)
	if err != nil {
		// Only a detail a caller built from something unencodable can fail.
		b = []byte(`{"error":{"code":500,"message":"fakegemini: encode error body","status":"INTERNAL"}}`)
	}
	return response{status: code, body: b}
}

// Type URLs of the google.rpc error details the live API sends.
const (
	typeErrorInfo        = "type.googleapis.com/google.rpc.ErrorInfo"
	typeLocalizedMessage = "type.googleapis.com/google.rpc.LocalizedMessage"
	typeDebugInfo        = "type.googleapis.com/google.rpc.DebugInfo"
	typeRetryInfo        = "type.googleapis.com/google.rpc.RetryInfo"
	typeQuotaFailure     = "type.googleapis.com/google.rpc.QuotaFailure"
	typeHelp             = "type.googleapis.com/google.rpc.Help"
)

// Messages of the live API's authentication failures (GEMINI.md §10).
const (
	MsgInvalidKey = "API key not valid. Please pass a valid API key."
	MsgMissingKey = "Method doesn't allow unregistered callers (callers without established identity). " +
		"Please use API Key or other form of API consumer identity to call this API."
)

// invalidKey is the live answer to a wrong key: 400 INVALID_ARGUMENT with
// reason API_KEY_INVALID, and a DebugInfo detail that echoes the key it
// was given, which is what a client must never pass on to a log.
func invalidKey(key string) response {
	return errorResponse(http.StatusBadRequest, MsgInvalidKey, "INVALID_ARGUMENT",
		map[string]any{"@type": typeErrorInfo, "reason": "API_KEY_INVALID", "domain": "googleapis.com",
			"metadata": map[string]any{"service": "generativelanguage.googleapis.com"}},
		map[string]any{"@type": typeLocalizedMessage, "locale": "en-US", "message": MsgInvalidKey},
		map[string]any{"@type": typeDebugInfo, "detail": "Invalid API key: " + key})
}

// missingKey is the live answer to a request without a key.
func missingKey() response {
	return errorResponse(http.StatusForbidden, MsgMissingKey, "PERMISSION_DENIED")
}

func notFound() response {
	return errorResponse(http.StatusNotFound, "not found", "NOT_FOUND")
}

func methodNotAllowed() response {
	return errorResponse(http.StatusMethodNotAllowed, "method not allowed", "UNIMPLEMENTED")
}

func badRequest(msg string) response {
	return errorResponse(http.StatusBadRequest, msg, "INVALID_ARGUMENT")
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// rfc3339 formats t for the API, or returns "" for the zero time so the
// field can be omitted.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
