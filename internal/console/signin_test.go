package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/console"
)

// A deep link survives the sign-in: the form that answers an
// unauthenticated page carries the page's path, and the sign-in redirects
// there. Only a local path under /ui/ is followed; anything else (another
// site, a scheme-relative or backslash URL a browser reads as another
// host, another prefix of this server) lands on /ui/.
func TestSignInReturnsToTheDeepLink(t *testing.T) {
	const token = "deep-link-admin-token-0123456789"
	s := store(t)
	commit(t, s, named(t, "batches/b1"), nil)
	srv := newConsole(t, s, func(c *console.Config) { c.AdminToken = token })

	body, _ := get(t, srv.URL+"/ui/operations/batches/b1?kind=batch", http.StatusUnauthorized)
	if !strings.Contains(body, `<input type="hidden" name="next" value="/ui/operations/batches/b1?kind=batch">`) {
		t.Fatalf("the sign-in form does not carry the requested page:\n%s", body)
	}
	// Sign-in's own URL may name where to go, checked the same way.
	body, _ = get(t, srv.URL+"/ui/signin?next="+url.QueryEscape("/ui/health"), http.StatusUnauthorized)
	if !strings.Contains(body, `name="next" value="/ui/health"`) {
		t.Errorf("/ui/signin?next=/ui/health: the form does not carry it")
	}
	body, _ = get(t, srv.URL+"/ui/signin?next="+url.QueryEscape("//evil.example/"), http.StatusUnauthorized)
	if strings.Contains(body, "evil.example") {
		t.Errorf("/ui/signin?next=//evil.example/: the form carries it")
	}

	signIn := func(next string) *http.Response {
		t.Helper()
		res, err := noRedirect().PostForm(srv.URL+"/ui/signin", url.Values{"token": {token}, "next": {next}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in with next %q: %d", next, res.StatusCode)
		}
		return res
	}
	for _, next := range []string{"/ui/operations/batches/b1?kind=batch", "/ui/health", "/ui/?state=FAILED&q=batches%2F", "/ui/"} {
		if loc := signIn(next).Header.Get("Location"); loc != next {
			t.Errorf("sign-in with next %q redirects to %q", next, loc)
		}
	}
	for _, next := range []string{
		"", "https://evil.example/ui/", "http://evil.example", "//evil.example/ui/", "///evil.example/ui/",
		`/\evil.example/ui/`, `\\evil.example/ui/`, `/ui/\..\..\evil`, "/ui\\", "/metrics", "/Register",
		"/ui/../metrics", "/ui/./../Reconcile", "/uix/", "ui/health", "health", "javascript:alert(1)",
		"/ui/\r\nSet-Cookie: x=1", "/ui/\tx", "/ui/signin", "/ui/signout",
		"/ui/" + strings.Repeat("a", 3000),
	} {
		if loc := signIn(next).Header.Get("Location"); loc != "/ui/" {
			t.Errorf("sign-in with next %q redirects to %q, want /ui/", next, loc)
		}
	}

	// A wrong token keeps the deep link for the next try.
	res, err := http.PostForm(srv.URL+"/ui/signin", url.Values{"token": {"wrong-token-wrong-token"}, "next": {"/ui/health"}})
	if err != nil {
		t.Fatal(err)
	}
	if b := readAll(t, res); res.StatusCode != http.StatusUnauthorized || !strings.Contains(b, `name="next" value="/ui/health"`) {
		t.Errorf("a wrong token: %d, or the form lost the deep link", res.StatusCode)
	}

	// Lax: a link from another site (an alert e-mail) to a console page
	// carries the session, which Strict withheld.
	if set := signIn("/ui/").Header.Get("Set-Cookie"); !strings.Contains(set, "SameSite=Lax") || !strings.Contains(set, "HttpOnly") {
		t.Errorf("session cookie %q: want HttpOnly, SameSite=Lax", set)
	}
}
