package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/lrosink/lrosink/internal/admintoken"
)

// RequireBearer guards the administrative functions (/Register,
// /Reconcile, the console) with LROSINK_ADMIN_TOKEN: only a request with
// `Authorization: Bearer <token>` reaches h; any other is answered 401 with
// WWW-Authenticate: Bearer. An empty token leaves h open (loopback `serve`;
// on Cloud Run, IAM guards these services). Neither the token nor what a
// caller sent is ever logged.
func RequireBearer(token string, log *slog.Logger, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	// Comparing digests takes the same time whatever the length or the
	// first differing byte of what was sent.
	want := admintoken.New(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := admintoken.Bearer(r.Header.Get("Authorization"))
		k, challenge := kind(""), `Bearer realm="lrosink"`
		switch {
		case !ok:
			k = kindMissingToken
		default:
			if want.Matches(got) {
				h.ServeHTTP(w, r)
				return
			}
			k, challenge = kindInvalidToken, `Bearer realm="lrosink", error="invalid_token"`
		}
		status, a := answerOf(k, "", "")
		log.WarnContext(r.Context(), "admin request refused", "status", status, "reason", a.Reason,
			"path", truncate(r.URL.Path, 128))
		w.Header().Set("WWW-Authenticate", challenge)
		reply(w, status, a)
	})
}

// SameOrigin refuses (403 cross-origin) a request a browser sent from
// another site: one whose Sec-Fetch-Site is cross-site or same-site, or,
// from a browser that sends no Sec-Fetch-Site, whose Origin is not the
// request's host (net/http's CrossOriginProtection). Register and
// Reconcile change the ledger, and a loopback serve without an admin token
// asks nothing else of a caller: without this, any page the developer
// opens could post a text/plain body (no preflight) that records or
// replays. Callers that are not browsers (Cloud Scheduler, Pub/Sub push,
// the CLI, curl) send neither header and pass.
func SameOrigin(log *slog.Logger, h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, a := answerOf(kindCrossOrigin, "", "")
		log.WarnContext(r.Context(), "cross-origin request refused", "status", status, "reason", a.Reason,
			"path", truncate(r.URL.Path, 128))
		reply(w, status, a)
	}))
	return cop.Handler(h)
}
