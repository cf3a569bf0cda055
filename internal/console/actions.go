package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/lrosink/lrosink/internal/action"
	"github.com/lrosink/lrosink/internal/admintoken"
	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/opname"
)

// The operation page's actions (Replay, Check now, Publish now) are the
// console's only writes, each a POST form to ActionPath. Their defences, in
// order:
//
//  1. Cross-origin requests are refused (403) by net/http's
//     CrossOriginProtection around the whole console: a POST whose
//     Sec-Fetch-Site is not same-origin or none, or, from a browser that
//     sends no Sec-Fetch-Site, whose Origin is not the console's host.
//  2. With LROSINK_ADMIN_TOKEN set, the request needs the session (or the
//     Bearer header): 401 without (signIn).
//  3. Every form carries a form token (field csrf) that must match (403):
//     with a session, an HMAC of the session cookie keyed by the admin
//     token (a token rendered for one session is worth nothing in
//     another, and it is the same on every instance); with no admin token
//     (loopback serve, or the Console service behind IAM), the value of
//     the lrosink_form cookie (random, HttpOnly, SameSite=Strict, never
//     sent by another site): a double-submit. A request with the Bearer
//     header needs none: no other site can make a browser send it.
//
// A refusal changes nothing and is logged with its reason only.

// ActionPath is where the action forms POST (action=replay|check-now|
// publish-now, operation=<canonical name>, csrf=<form token>).
const ActionPath = Prefix + "actions"

// formCookie is the double-submit cookie when no admin token is set.
const formCookie = "lrosink_form"

// maxActionBody bounds an action's form.
const maxActionBody = 8 << 10

// authKind is how a request was let in (signIn), for the form token and
// the actor.
type authKind int

const (
	authOpen    authKind = iota // no admin token
	authBearer                  // Authorization: Bearer <admin token>
	authSession                 // the session cookie
)

type authKey struct{}

type authInfo struct {
	kind    authKind
	session string // the session cookie's value (authSession)
}

func withAuth(r *http.Request, a authInfo) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), authKey{}, a))
}

func authOf(r *http.Request) authInfo {
	a, _ := r.Context().Value(authKey{}).(authInfo)
	return a
}

// crossOrigin refuses cross-origin POSTs to the console (403), before
// anything else reads the request.
func (c *Console) crossOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.cfg.Log.WarnContext(r.Context(), "console request refused", "status", http.StatusForbidden,
			"reason", "cross-origin", "path", truncate(r.URL.Path, 128))
		c.fail(w, r, http.StatusForbidden, "Refused: a form posted from another site.", nil)
	}))
	return cop.Handler(next)
}

// formToken is the token the forms of r's page carry ("" when none is
// needed: a Bearer request). With no admin token it sets the form cookie
// when the browser has none.
func (c *Console) formToken(w http.ResponseWriter, r *http.Request) string {
	switch a := authOf(r); {
	case c.cfg.AdminToken != "" && a.kind == authSession:
		return c.sessionFormToken(a.session)
	case c.cfg.AdminToken != "":
		return ""
	}
	if ck, err := r.Cookie(formCookie); err == nil && validFormCookie(ck.Value) {
		return ck.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	v := hex.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: formCookie, Value: v, Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")})
	return v
}

func validFormCookie(v string) bool {
	b, err := hex.DecodeString(v)
	return err == nil && len(b) == 32
}

func (c *Console) sessionFormToken(session string) string {
	m := hmac.New(sha256.New, []byte(c.cfg.AdminToken))
	m.Write([]byte("lrosink console form " + session))
	return hex.EncodeToString(m.Sum(nil))
}

// formTokenOK checks the posted form token of r (constant time).
func (c *Console) formTokenOK(r *http.Request) bool {
	got := r.PostForm.Get("csrf")
	a := authOf(r)
	switch {
	case c.cfg.AdminToken != "" && a.kind == authBearer:
		return true
	case c.cfg.AdminToken != "" && a.kind == authSession:
		return got != "" && hmac.Equal([]byte(got), []byte(c.sessionFormToken(a.session)))
	case c.cfg.AdminToken != "":
		return false
	}
	ck, err := r.Cookie(formCookie)
	return err == nil && validFormCookie(ck.Value) && got != "" && hmac.Equal([]byte(got), []byte(ck.Value))
}

// actor names who asks for an action, as the delivery log records it: the
// IAM principal on Cloud Run (the Console service alone, whose IAM check
// verified the identity token), else the signed-in session (a short digest
// of its cookie, never the cookie), the admin token's Bearer header, or
// "local" on a console with no admin token.
func (c *Console) actor(r *http.Request) string {
	if c.cfg.TrustIAM {
		if p := iamPrincipal(r); p != "" {
			return p
		}
	}
	switch a := authOf(r); a.kind {
	case authSession:
		sum := sha256.Sum256([]byte(a.session))
		return "session " + hex.EncodeToString(sum[:4])
	case authBearer:
		return "admin token (Bearer)"
	}
	if c.cfg.TrustIAM {
		return "IAM (no identity in the request)"
	}
	return "local (no LROSINK_ADMIN_TOKEN)"
}

// iamPrincipal is the caller's identity as Cloud Run's IAM check saw it:
// the email of the ID token it verified before the request reached the
// container (which is why it is read here unverified, and only with
// TrustIAM). Cloud Run checks X-Serverless-Authorization when a request
// carries it and then passes Authorization through untouched, so that
// header is read first: a forged token beside a real one names nobody.
// IAP's X-Goog-Authenticated-User-Email is never read: no IAP stands in
// front of the Console, so a client could set it. "" when no token names
// one.
func iamPrincipal(r *http.Request) string {
	h := r.Header.Get("X-Serverless-Authorization")
	if h == "" {
		h = r.Header.Get("Authorization")
	}
	tok, ok := admintoken.Bearer(h)
	if !ok {
		return ""
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Email string `json:"email"`
	}
	if json.Unmarshal(b, &claims) != nil {
		return ""
	}
	return truncate(claims.Email, 128)
}

// act serves POST ActionPath: checks the form token, asks Actions, and
// answers 303 to the operation's page, which shows the outcome.
func (c *Console) act(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Actions == nil {
		c.fail(w, r, http.StatusNotFound, "This console offers no actions (on Cloud Run, set LROSINK_RECONCILE_URL).", nil)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxActionBody)
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, http.StatusBadRequest, "Bad form.", nil)
		return
	}
	if !c.formTokenOK(r) {
		c.cfg.Log.WarnContext(r.Context(), "console request refused", "status", http.StatusForbidden, "reason", "bad-form-token",
			"path", truncate(r.URL.Path, 128))
		c.fail(w, r, http.StatusForbidden, "Refused: the form's token is missing or wrong (reload the page and try again).", nil)
		return
	}
	req := action.Request{Action: action.Kind(r.PostForm.Get("action")), Operation: r.PostForm.Get("operation"), Actor: c.actor(r)}
	if _, err := action.Check(req); err != nil {
		c.fail(w, r, http.StatusBadRequest, "Bad action: "+err.Error(), nil)
		return
	}
	// Not cut by the browser going away: a replay must not stop between
	// its publish and its record.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), action.CallTimeout)
	defer cancel()
	res, err := c.cfg.Actions.Do(ctx, req)
	if err != nil {
		// The request may have reached the Reconcile function and done its
		// work: pressing again could replay twice.
		c.fail(w, r, http.StatusBadGateway, "The action's outcome is unknown: the Reconcile function did not answer. "+
			"Look at the operation's timeline before you try again (and at the logs).", err)
		return
	}
	if res.Reason == action.ReasonUnknownOperation {
		c.fail(w, r, http.StatusNotFound, "No operation with this name.", nil)
		return
	}
	target := Prefix
	if id, err := opname.DocID(opname.KeyPrefix + res.Operation); err == nil {
		target = opURL(res.Operation, id)
	}
	q := url.Values{"did": {string(res.Action)}, "outcome": {res.Outcome}}
	for k, v := range map[string]string{"reason": res.Reason, "replay_id": res.ReplayID} {
		if v != "" {
			q.Set(k, v)
		}
	}
	http.Redirect(w, r, target+"?"+q.Encode(), http.StatusSeeOther)
}

// notice is the outcome of the action just done, from the redirect's query
// (labels only: anything else in it is not shown).
type notice struct {
	Action, Outcome, Reason, ReplayID string
	Failed                            bool
}

func noticeOf(q url.Values) *notice {
	n := notice{Action: q.Get("did"), Outcome: q.Get("outcome"), Reason: q.Get("reason"), ReplayID: q.Get("replay_id")}
	if !label(n.Action) || !label(n.Outcome) || (n.Reason != "" && !label(n.Reason)) || (n.ReplayID != "" && !label(n.ReplayID)) {
		return nil
	}
	n.Failed = n.Outcome == action.OutcomeRefused || n.Outcome == action.OutcomeError
	return &n
}

// label reports whether s is a short label: lower-case letters, digits
// and dashes.
func label(s string) bool {
	if s == "" || len(s) > 80 {
		return false
	}
	for _, ch := range s {
		if (ch < 'a' || ch > 'z') && (ch < '0' || ch > '9') && ch != '-' {
			return false
		}
	}
	return true
}

// actionsData is the operation page's actions section.
type actionsData struct {
	Token string
	Name  string
	// Replay: settled (the claim's message, or one rebuilt from the
	// operation); Check: pending; Publish: the message is owed.
	Replay, Check, Publish bool
	Notice                 *notice
}

func (c *Console) actionsFor(w http.ResponseWriter, r *http.Request, op ledger.Operation, cl *ledger.Claim) *actionsData {
	if c.cfg.Actions == nil {
		return nil
	}
	return &actionsData{Token: c.formToken(w, r), Name: op.Name, Replay: op.State.Terminal(), Check: !op.State.Terminal(),
		Publish: op.State.Terminal() && cl != nil && cl.Status != ledger.ClaimDone, Notice: noticeOf(r.URL.Query())}
}

// actionEvents are the console actions of an operation's delivery log as
// timeline lines, and the replay ids they name (whose replay line they
// stand for).
func actionEvents(log []deliverylog.Entry) ([]event, map[string]bool) {
	var out []event
	replays := map[string]bool{}
	for _, e := range log {
		if e.Source != deliverylog.SourceConsole {
			continue
		}
		what := e.Outcome
		if e.Reason != "" {
			what += " (" + e.Reason + ")"
		}
		if e.DeliveryID != "" {
			what += " " + e.DeliveryID
			replays[e.DeliveryID] = true
		}
		out = append(out, event{At: e.At, Kind: "action", Source: e.Status, Reason: what, Actor: e.Actor})
	}
	return out, replays
}
