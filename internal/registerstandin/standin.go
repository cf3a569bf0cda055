// Package registerstandin serves the Register function's intent protocol
// (CONTRACT.md §5) in memory, exactly as specified: record answers 201
// intent-recorded, 200 intent-known, 409 intent-mismatch, 400
// invalid-intent or invalid-kind; bind answers 201 created, 200 known, 404
// intent-unknown, 409 intent-bound-elsewhere, 400 invalid-name. It stands
// in for lrosink's own Register function (which keeps intents in the
// ledger and registers the operation on bind) in the tests of the
// protocol's clients: package submit and `lrosink submit`. It registers no
// operation.
package registerstandin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lrosink/lrosink/internal/opname"
)

// States of an intent.
const (
	StateUnbound = "unbound"
	StateBound   = "bound"
)

// Status is the status object of CONTRACT.md §5.
type Status struct {
	Key         string         `json:"key"`
	Kind        string         `json:"kind"`
	Model       string         `json:"model"`
	DisplayName string         `json:"display_name"`
	Metadata    map[string]any `json:"metadata"`
	State       string         `json:"state"`
	CreatedAt   *time.Time     `json:"created_at"`
	GraceUntil  *time.Time     `json:"grace_until"`
	Name        string         `json:"name,omitempty"`
	APIName     string         `json:"api_name,omitempty"`
	BoundAt     *time.Time     `json:"bound_at,omitempty"`
	BoundBy     string         `json:"bound_by,omitempty"`
}

// Server is the stand-in; its zero value is ready. Safe for concurrent use.
type Server struct {
	Grace time.Duration    // 0: an hour
	Now   func() time.Time // nil: time.Now
	Token string           // when set, Authorization: Bearer Token is required

	mu       sync.Mutex
	intents  map[string]*intent
	fail503  int // answer the next n requests 503 with Retry-After: 1
	requests int
}

type intent struct {
	st   Status
	meta string // the metadata as canonical JSON, for the mismatch check
}

// Fail503 makes the next n requests answer 503 ledger-unavailable.
func (s *Server) Fail503(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail503 = n
}

// Intent returns the intent recorded under key.
func (s *Server) Intent(key string) (Status, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.intents[key]
	if !ok {
		return Status{}, false
	}
	return in.st, true
}

// Requests is how many requests were answered, whatever their status.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Count is how many intents are recorded.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.intents)
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	reply := func(code int, a map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(a)
	}
	if s.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.Token {
		reply(http.StatusUnauthorized, map[string]any{"outcome": "rejected", "reason": "invalid-token"})
		return
	}
	if s.fail503 > 0 {
		s.fail503--
		w.Header().Set("Retry-After", "1")
		reply(http.StatusServiceUnavailable, map[string]any{"outcome": "error", "reason": "ledger-unavailable"})
		return
	}
	var req struct {
		Name        string          `json:"name"`
		Intent      string          `json:"intent"`
		Kind        string          `json:"kind"`
		Model       string          `json:"model"`
		DisplayName string          `json:"display_name"`
		Metadata    json.RawMessage `json:"metadata"`
	}
	d := json.NewDecoder(r.Body)
	d.UseNumber()
	if err := d.Decode(&req); err != nil {
		reply(http.StatusBadRequest, map[string]any{"outcome": "rejected", "reason": "invalid-json", "detail": err.Error()})
		return
	}
	rejected := func(code int, reason, detail string) {
		reply(code, map[string]any{"outcome": "rejected", "reason": reason, "detail": detail})
	}
	if !validKey(req.Intent) {
		rejected(http.StatusBadRequest, "invalid-intent", "intent key "+strconv.Quote(req.Intent))
		return
	}
	if s.intents == nil {
		s.intents = map[string]*intent{}
	}
	if req.Name != "" {
		s.bind(req.Intent, req.Name, req.Metadata != nil, reply, rejected)
		return
	}
	switch req.Kind {
	case string(opname.KindBatch), string(opname.KindVideo), string(opname.KindInteraction):
	default:
		rejected(http.StatusBadRequest, "invalid-kind", "kind "+strconv.Quote(req.Kind))
		return
	}
	var meta map[string]any
	if len(req.Metadata) > 0 && string(req.Metadata) != "null" {
		d := json.NewDecoder(bytes.NewReader(req.Metadata))
		d.UseNumber()
		if err := d.Decode(&meta); err != nil {
			rejected(http.StatusBadRequest, "invalid-metadata", "metadata is not an object")
			return
		}
	}
	canon, _ := json.Marshal(meta)
	if in, ok := s.intents[req.Intent]; ok {
		if in.st.Kind != req.Kind || in.st.Model != req.Model || in.st.DisplayName != req.DisplayName || in.meta != string(canon) {
			rejected(http.StatusConflict, "intent-mismatch", "intent "+req.Intent+" was recorded with other fields")
			return
		}
		reply(http.StatusOK, map[string]any{"outcome": "intent-known", "intent": in.st})
		return
	}
	now := s.now()
	grace := s.Grace
	if grace == 0 {
		grace = time.Hour
	}
	until := now.Add(grace)
	in := &intent{st: Status{Key: req.Intent, Kind: req.Kind, Model: req.Model, DisplayName: req.DisplayName,
		Metadata: meta, State: StateUnbound, CreatedAt: &now, GraceUntil: &until}, meta: string(canon)}
	s.intents[req.Intent] = in
	reply(http.StatusCreated, map[string]any{"outcome": "intent-recorded", "intent": in.st})
}

func (s *Server) bind(key, name string, hasMeta bool, reply func(int, map[string]any), rejected func(int, string, string)) {
	in, ok := s.intents[key]
	switch {
	case hasMeta:
		rejected(http.StatusBadRequest, "invalid-metadata", "a bind carries no metadata: the intent's is used")
		return
	case !ok:
		rejected(http.StatusNotFound, "intent-unknown", "no intent "+key)
		return
	}
	n, err := opname.Normalize(name, opname.KindUnknown)
	if err != nil || string(n.Kind) != in.st.Kind || (n.Kind == opname.KindBatch && !strings.HasPrefix(name, "batches/")) {
		rejected(http.StatusBadRequest, "invalid-name", "name "+strconv.Quote(name)+" is not a "+in.st.Kind)
		return
	}
	if in.st.State == StateBound {
		if in.st.Name != n.Canonical {
			rejected(http.StatusConflict, "intent-bound-elsewhere", "intent "+key+" is bound to "+in.st.Name)
			return
		}
		reply(http.StatusOK, map[string]any{"outcome": "known", "operation": n.Canonical, "intent": in.st})
		return
	}
	now := s.now()
	in.st.State, in.st.Name, in.st.APIName, in.st.BoundAt, in.st.BoundBy = StateBound, n.Canonical, name, &now, "submit"
	reply(http.StatusCreated, map[string]any{"outcome": "created", "operation": n.Canonical, "intent": in.st})
}

// validKey: 1 to 128 bytes of letters, digits and . _ : -.
func validKey(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("._:-", rune(c))) {
			return false
		}
	}
	return true
}
