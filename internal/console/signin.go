package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/lrosink/lrosink/internal/admintoken"
)

// sessionCookie carries a signed-in browser's session.
const sessionCookie = "lrosink_console"

// sessionTTL is how long a sign-in lasts.
const sessionTTL = 12 * time.Hour

// maxSignInBody bounds the sign-in form.
const maxSignInBody = 4 << 10

// signIn guards every console page with LROSINK_ADMIN_TOKEN. A request
// passes with `Authorization: Bearer <token>` (scripts, curl) or with the
// session cookie the sign-in form sets (a browser cannot send the header).
// The cookie holds an expiry and an HMAC of it keyed by the token, never
// the token: it is worthless once the token is rotated, and nothing about
// the token can be read from it. Only the stylesheet, the favicon's 204 and
// the form itself are open. The token is compared in constant time and never logged or
// echoed; a refusal is logged with its reason only.
func (c *Console) signIn(next http.Handler) http.Handler {
	want := admintoken.New(c.cfg.AdminToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == Prefix+"style.css", r.URL.Path == Favicon:
			next.ServeHTTP(w, r)
			return
		case r.URL.Path == Prefix+"signin" && r.Method == http.MethodPost:
			c.postSignIn(w, r, want)
			return
		case r.URL.Path == Prefix+"signout" && r.Method == http.MethodPost:
			http.SetCookie(w, c.cookie(r, "", -1))
			http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
			return
		}
		if tok, ok := admintoken.Bearer(r.Header.Get("Authorization")); ok && want.Matches(tok) {
			next.ServeHTTP(w, withAuth(r, authInfo{kind: authBearer}))
			return
		}
		if ck, err := r.Cookie(sessionCookie); err == nil && c.validSession(ck.Value) {
			if r.URL.Path == Prefix+"signin" {
				http.Redirect(w, r, Prefix, http.StatusSeeOther)
				return
			}
			next.ServeHTTP(w, withAuth(r, authInfo{kind: authSession, session: ck.Value}))
			return
		}
		if r.Method == http.MethodPost && r.URL.Path == ActionPath {
			// An action without the session: a plain 401, never the form
			// (nothing was done, and the sign-in would lose the POST).
			c.cfg.Log.WarnContext(r.Context(), "console request refused", "status", http.StatusUnauthorized,
				"reason", "no-session", "path", truncate(r.URL.Path, 128))
			w.Header().Set("WWW-Authenticate", `Bearer realm="lrosink"`)
			c.fail(w, r, http.StatusUnauthorized, "Refused: sign in first (an action needs the admin token's session).", nil)
			return
		}
		if r.URL.Path != Prefix+"signin" {
			c.cfg.Log.WarnContext(r.Context(), "console request refused", "status", http.StatusUnauthorized,
				"reason", "no-session", "path", truncate(r.URL.Path, 128))
		}
		// A browser gets the form, which carries the page it asked for (a
		// deep link survives the sign-in); a script gets the 401 and the
		// challenge.
		next := r.URL.RequestURI()
		if r.URL.Path == Prefix+"signin" {
			next = r.URL.Query().Get("next")
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="lrosink"`)
		c.render(w, r, http.StatusUnauthorized, "signin", "Sign in", signInData{Next: localNext(next)})
	})
}

type signInData struct {
	Wrong bool
	// Next is where a sign-in goes: a local console path (localNext).
	Next string
}

// maxNext bounds the return-to path a sign-in carries.
const maxNext = 2048

// localNext returns next if it is a path of this console, safe to redirect
// to after a sign-in, else "" (go to Prefix). It comes from the client, so
// it must never send the browser elsewhere (an open redirect): only a path
// that starts with Prefix and stays there once cleaned, with no scheme or
// host, no backslash (browsers read "/\host" as "//host") and no control
// character (a header split, or a tab browsers drop).
func localNext(next string) string {
	if next == "" || len(next) > maxNext || strings.ContainsAny(next, `\`) {
		return ""
	}
	for _, ch := range next {
		if ch < 0x20 || ch == 0x7f {
			return ""
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, Prefix) || strings.HasPrefix(next, "//") {
		return ""
	}
	// http.Redirect cleans the path: what it sends must still be ours. The
	// sign-in and sign-out forms themselves are no place to return to.
	if clean := path.Clean(u.Path) + "/"; !strings.HasPrefix(clean, Prefix) ||
		u.Path == Prefix+"signin" || u.Path == Prefix+"signout" {
		return ""
	}
	return next
}

func (c *Console) postSignIn(w http.ResponseWriter, r *http.Request, want admintoken.Token) {
	r.Body = http.MaxBytesReader(w, r.Body, maxSignInBody)
	err := r.ParseForm()
	next := localNext(r.PostForm.Get("next"))
	if err != nil || !want.Matches(r.PostForm.Get("token")) {
		c.cfg.Log.WarnContext(r.Context(), "console sign-in refused", "status", http.StatusUnauthorized, "reason", "invalid-token")
		w.Header().Set("WWW-Authenticate", `Bearer realm="lrosink"`)
		c.render(w, r, http.StatusUnauthorized, "signin", "Sign in", signInData{Wrong: true, Next: next})
		return
	}
	exp := c.cfg.Now().Add(sessionTTL).Unix()
	http.SetCookie(w, c.cookie(r, strconv.FormatInt(exp, 10)+"."+c.mac(exp), int(sessionTTL/time.Second)))
	c.cfg.Log.InfoContext(r.Context(), "console sign-in")
	if next == "" {
		next = Prefix
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// cookie is the session cookie: HttpOnly (no script could read it, and
// none runs), Secure when the request came over TLS (directly or through a
// proxy that says so), scoped to the console. maxAge < 0 deletes it.
//
// SameSite=Lax, so that a link from elsewhere (an alert e-mail, another
// console) opens the page signed in. Lax sends the cookie cross-site only
// on top-level GET navigations, and every GET here only reads, on pages
// no other site can frame (frame-ancestors 'none') or script (no CORS, a
// CSP with no script). The POSTs are the sign-in, which needs the token
// itself, not the cookie, the sign-out, which only deletes it, and the
// operation page's actions, which another site cannot send: the
// cross-origin check refuses its POST before anything reads it, and each
// action needs the form token bound to this session (actions.go). Lax
// withholds the cookie from another site's POST anyway. /Register and
// /Reconcile take the Bearer header only, and the cookie's Path is the
// console's.
func (c *Console) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: sessionCookie, Value: value, Path: Prefix, MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")}
}

// mac signs an expiry with the token.
func (c *Console) mac(exp int64) string {
	m := hmac.New(sha256.New, []byte(c.cfg.AdminToken))
	m.Write([]byte("lrosink console session " + strconv.FormatInt(exp, 10)))
	return hex.EncodeToString(m.Sum(nil))
}

func (c *Console) validSession(v string) bool {
	ts, sig, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	exp, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || !c.cfg.Now().Before(time.Unix(exp, 0)) {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(c.mac(exp)))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
