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
