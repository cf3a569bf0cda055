package app_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/config"
)

// With LROSINK_ADMIN_TOKEN set, /metrics and the console need the token
// (Bearer; the console also takes its sign-in cookie), /healthz stays open,
// GET / redirects to the console, and a browser's /favicon.ico is 204 No
// Content (no 404 in its console on a first visit). Without a token all
// are open.
func TestAdminTokenGuardsMetricsAndConsole(t *testing.T) {
	const token = "admin-token-0123456789abcdef"
	for _, tc := range []struct {
		token string
		want  map[string]int // path → status without credentials
	}{
		{token, map[string]int{"/metrics": 401, "/ui/": 401, "/ui/health": 401, "/healthz": 200, "/": 302, "/favicon.ico": 204}},
		{"", map[string]int{"/metrics": 200, "/ui/": 200, "/ui/health": 200, "/healthz": 200, "/": 302, "/favicon.ico": 204}},
	} {
		a := newApp(t, testConfig(t, "http://127.0.0.1:1", func(c *config.Config) { c.AdminToken = tc.token }), nil, io.Discard, time.Now)
		srv := httptest.NewServer(a.Mux())
		t.Cleanup(srv.Close)
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for path, want := range tc.want {
			res, err := noFollow.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != want {
				t.Errorf("token %t: GET %s = %d, want %d", tc.token != "", path, res.StatusCode, want)
			}
			if path == "/" && res.Header.Get("Location") != "/ui/" {
				t.Errorf("GET / redirects to %q, want /ui/", res.Header.Get("Location"))
			}
		}
		// The probes are GET only: a POST (lrosink send aimed at the wrong
		// path) must not read as a delivered webhook.
		for _, path := range []string{"/healthz", "/readyz"} {
			res, err := http.Post(srv.URL+path, "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("POST %s = %d, want 405", path, res.StatusCode)
			}
		}
		if tc.token == "" {
			continue
		}
		for _, path := range []string{"/metrics", "/ui/"} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("GET %s with the token = %d", path, res.StatusCode)
			}
		}
		// The console's 401 is its sign-in form, not a bare JSON refusal.
		res, err := http.Get(srv.URL + "/ui/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !strings.Contains(string(b), `action="/ui/signin"`) {
			t.Errorf("/ui/ without the token does not offer the sign-in form")
		}
	}
}
