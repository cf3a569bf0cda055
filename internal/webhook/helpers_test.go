package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fixtures mirrors testdata/fixtures.json, written by scripts/fixtures/gen.mjs
// with the standardwebhooks and jose npm packages.
type fixtures struct {
	Now        int64 `json:"now"`
	SpecVector struct {
		Secret    string `json:"secret"`
		ID        string `json:"id"`
		Timestamp string `json:"timestamp"`
		Body      string `json:"body"`
		Signature string `json:"signature"`
	} `json:"spec_vector"`
	Secrets map[string]string `json:"secrets"`
	HMAC    []hmacFixture     `json:"hmac"`
	JWT     struct {
		Audience       string            `json:"audience"`
		JWKS           json.RawMessage   `json:"jwks"`
		JWKSRotated    json.RawMessage   `json:"jwks_rotated"`
		PublicPEM      string            `json:"public_pem"`
		EnvelopeClaims json.RawMessage   `json:"envelope_claims"`
		Tokens         map[string]string `json:"tokens"`
	} `json:"jwt"`
}

type hmacFixture struct {
	Name      string   `json:"name"`
	ID        string   `json:"id"`
	Timestamp string   `json:"timestamp"`
	Body      string   `json:"body"`
	Secrets   []string `json:"secrets"`
	Signature string   `json:"signature"`
}

func loadFixtures(t *testing.T) *fixtures {
	t.Helper()
	raw, err := os.ReadFile("testdata/fixtures.json")
	if err != nil {
		t.Fatalf("read fixtures (regenerate with scripts/fixtures): %v", err)
	}
	var f fixtures
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("decode fixtures: %v", err)
	}
	if f.Now == 0 || len(f.HMAC) == 0 || len(f.JWT.Tokens) == 0 || len(f.Secrets) == 0 {
		t.Fatal("fixtures are incomplete")
	}
	return &f
}

func (f *fixtures) now() time.Time { return time.Unix(f.Now, 0).UTC() }

func (f *fixtures) delivery(t *testing.T, name string) hmacFixture {
	t.Helper()
	for _, d := range f.HMAC {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no HMAC fixture %q", name)
	return hmacFixture{}
}

func (f *fixtures) token(t *testing.T, name string) string {
	t.Helper()
	tok, ok := f.JWT.Tokens[name]
	if !ok || tok == "" {
		t.Fatalf("no token fixture %q", name)
	}
	return tok
}

func (f *fixtures) secret(t *testing.T, name string) string {
	t.Helper()
	s, ok := f.Secrets[name]
	if !ok {
		t.Fatalf("no secret fixture %q", name)
	}
	return s
}

func (d hmacFixture) header() http.Header {
	return headers(d.ID, d.Timestamp, d.Signature)
}

// headers builds Standard Webhooks headers; empty values are left out.
func headers(id, ts, sig string) http.Header {
	h := http.Header{}
	if id != "" {
		h.Set("webhook-id", id)
	}
	if ts != "" {
		h.Set("webhook-timestamp", ts)
	}
	if sig != "" {
		h.Set("webhook-signature", sig)
	}
	return h
}

// signV1 is a test-only signer; TestSpecVector pins it to the spec's value.
func signV1(secret, id, ts string, body []byte) string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// jwksServer is a real HTTP server publishing a JWKS and counting requests.
type jwksServer struct {
	*httptest.Server
	hits atomic.Int64

	mu     sync.Mutex
	status int
	body   []byte
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{status: http.StatusOK, body: body}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		status, body := s.status, s.body
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(status int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

func (s *jwksServer) Hits() int64 { return s.hits.Load() }

func mustVerifier(t *testing.T, cfg Config) *Verifier {
	t.Helper()
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

// wantErr asserts err is an *Error with the given reason (its kind; the
// HTTP status it is answered with is httpapi's table).
func wantErr(t *testing.T, err error, reason string) *Error {
	t.Helper()
	var we *Error
	if !errors.As(err, &we) {
		t.Fatalf("error = %v (%T), want *Error %s", err, err, reason)
	}
	if we.Reason != reason {
		t.Fatalf("error = %s (%v), want %s", we.Reason, err, reason)
	}
	return we
}
