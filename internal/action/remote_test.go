package action_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/action"
)

// TestIDTokenTransport: every request carries the token for its audience,
// fetched once and kept until a minute before its exp; a token source
// that fails fails the request, and nothing is sent.
func TestIDTokenTransport(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	asked := 0
	exp := time.Now().Add(time.Hour).Unix()
	src := func(_ context.Context, aud string) (string, error) {
		asked++
		if aud != srv.URL {
			return "", fmt.Errorf("audience %q", aud)
		}
		payload := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"aud":%q,"exp":%d}`, aud, exp))
		return fmt.Sprintf("h.%s.%d", payload, asked), nil
	}
	c := &http.Client{Transport: action.IDTokenTransport(srv.URL, src, nil)}
	for range 3 {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if asked != 1 || len(got) != 3 || got[0] != got[2] || got[0] == "" {
		t.Fatalf("asked %d times, sent %q: want one token on all three", asked, got)
	}
	failing := &http.Client{Transport: action.IDTokenTransport(srv.URL, func(context.Context, string) (string, error) {
		return "", fmt.Errorf("metadata server down")
	}, nil)}
	if _, err := failing.Get(srv.URL); err == nil || len(got) != 3 {
		t.Fatalf("a failing token source: %v, %d requests sent; want an error and none", err, len(got)-3)
	}
}
