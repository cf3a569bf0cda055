package console_test

import (
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/action"
	"github.com/lrosink/lrosink/internal/console"
	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/testutil"
)

// actingConsole is a console over a settled operation (act1) whose
// actions a real Runner carries out: the door over the same ledger, a
// recording sink, the delivery log written before each answer.
func actingConsole(t *testing.T, mod func(*console.Config)) (*httptest.Server, *testutil.Recorder, *sqliteledger.Store) {
	t.Helper()
	s := store(t)
	commitAct1(t, s)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	clock := func() time.Time { return now }
	sink := &testutil.Recorder{}
	door, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: sink, Log: log, Now: clock, Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rec := deliverylog.NewRecorder(s, deliverylog.Retention{}, log)
	t.Cleanup(func() { _ = rec.Close(t.Context()) })
	runner, err := action.NewRunner(action.Config{Door: door, Ledger: s, Log: log, Now: clock,
		Deliveries: &deliverylog.Log{Recorder: rec}, Flush: rec.Flush})
	if err != nil {
		t.Fatal(err)
	}
	srv := newConsole(t, s, func(cfg *console.Config) {
		cfg.Actions, cfg.Deliveries = runner, s
		if mod != nil {
			mod(cfg)
		}
	})
	return srv, sink, s
}

// act1ID is batches/act1's document id.
const act1ID = "gemini:batches%2Fact1"

// commitAct1 commits batches/act1, settled, under its real document id
// (the Runner finds an operation by its name).
func commitAct1(t *testing.T, s *sqliteledger.Store) {
	t.Helper()
	op, c := settled(act1ID, now.Add(-time.Hour))
	op.Name, op.APIName = "batches/act1", "batches/act1"
	c.Operation, c.Key = op.Name, "gemini:batches/act1"
	c.Message.Operation, c.Message.IdempotencyKey = op.Name, c.Key
	commit(t, s, op, c)
}

var formTokenRe = regexp.MustCompile(`name="csrf" value="([^"]*)"`)

// postAction posts a replay of act1 with the form token csrf ("": none),
// the cookies and the headers given; it returns the status, the redirect
// and the body.
func postAction(t *testing.T, base, csrf string, cookies []*http.Cookie, hdr map[string]string) (int, string, string) {
	t.Helper()
	form := url.Values{"action": {"replay"}, "operation": {"batches/act1"}}
	if csrf != "" {
		form.Set("csrf", csrf)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+console.ActionPath, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// TestActionsOpenConsole: with no admin token (loopback serve, or the
// Console service behind IAM) the form token is a double-submit cookie
// (random, HttpOnly, SameSite=Strict) the page sets. Without the cookie,
// with a token that is not its value, or from another origin, an action
// is refused 403 and nothing is published; with both it is done, once,
// recorded with the actor "local".
func TestActionsOpenConsole(t *testing.T) {
	srv, sink, s := actingConsole(t, nil)
	resp, err := http.Get(srv.URL + "/ui/operations/batches/act1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var form *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "lrosink_form" {
			form = c
		}
	}
	m := formTokenRe.FindStringSubmatch(string(b))
	if form == nil || m == nil || m[1] != form.Value || !form.HttpOnly || form.SameSite != http.SameSiteStrictMode {
		t.Fatalf("form cookie %+v and field %v: want an HttpOnly SameSite=Strict cookie whose value every form carries", form, m)
	}
	same := map[string]string{"Sec-Fetch-Site": "same-origin"}
	for _, c := range []struct {
		what    string
		csrf    string
		cookies []*http.Cookie
		hdr     map[string]string
	}{
		{"no cookie", form.Value, nil, same},
		{"no token", "", []*http.Cookie{form}, same},
		{"a token that is not the cookie's", strings.Repeat("ab", 32), []*http.Cookie{form}, same},
		{"another site", form.Value, []*http.Cookie{form}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"another origin", form.Value, []*http.Cookie{form}, map[string]string{"Origin": "http://evil.example"}},
	} {
		if status, _, _ := postAction(t, srv.URL, c.csrf, c.cookies, c.hdr); status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", c.what, status)
		}
	}
	if n := len(sink.All()); n != 0 {
		t.Fatalf("%d messages published by refused actions", n)
	}
	status, loc, _ := postAction(t, srv.URL, form.Value, []*http.Cookie{form}, same)
	if status != http.StatusSeeOther || !strings.Contains(loc, "outcome=replayed") {
		t.Fatalf("the action: %d to %q, want 303 replayed", status, loc)
	}
	if msgs := sink.All(); len(msgs) != 1 || !strings.HasPrefix(msgs[0].ReplayID, "replay-") {
		t.Fatalf("published %+v, want one replay", msgs)
	}
	log, err := s.ListDeliveries(t.Context(), act1ID)
	if err != nil || len(log) != 1 || log[0].Actor != "local (no LROSINK_ADMIN_TOKEN)" || log[0].Status != "replay" {
		t.Fatalf("delivery log %+v, %v: want the replay by local", log, err)
	}
}

// TestActionsActor: with the admin token, a Bearer request needs no form
// token (no other site can make a browser send the header) and is
// recorded as the admin token's; on the Console service (TrustIAM) the
// actor is the ID token's email that Cloud Run verified, or IAP's header.
func TestActionsActor(t *testing.T) {
	const token = "console-admin-token-0123456789"
	srv, _, s := actingConsole(t, func(c *console.Config) { c.AdminToken = token })
	if status, _, _ := postAction(t, srv.URL, "", nil, map[string]string{"Authorization": "Bearer " + token}); status != http.StatusSeeOther {
		t.Fatalf("Bearer: %d, want 303", status)
	}
	if status, _, _ := postAction(t, srv.URL, "", nil, map[string]string{"Authorization": "Bearer wrong-token"}); status != http.StatusUnauthorized {
		t.Fatalf("a wrong Bearer token: %d, want 401", status)
	}
	log, err := s.ListDeliveries(t.Context(), act1ID)
	if err != nil || len(log) != 1 || log[0].Actor != "admin token (Bearer)" {
		t.Fatalf("delivery log %+v, %v", log, err)
	}

	iam, _, s2 := actingConsole(t, func(c *console.Config) { c.TrustIAM = true })
	get := func() *http.Cookie {
		resp, err := http.Get(iam.URL + "/ui/operations/batches/act1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.Name == "lrosink_form" {
				return c
			}
		}
		t.Fatal("no form cookie")
		return nil
	}
	idTok := func(email string) string {
		payload := base64.RawURLEncoding.EncodeToString([]byte(`{"email":"` + email + `","aud":"x"}`))
		return "Bearer e30." + payload + ".SIGNATURE_REMOVED_BY_GOOGLE"
	}
	for _, c := range []struct {
		what    string
		headers map[string]string
		want    string
	}{
		{"the token IAM checked", map[string]string{"Authorization": idTok("bob@example.com")}, "bob@example.com"},
		// Cloud Run checks X-Serverless-Authorization when it is there and
		// passes Authorization on as sent: that one names nobody.
		{"a forged Authorization beside X-Serverless-Authorization", map[string]string{
			"X-Serverless-Authorization": idTok("dave@example.com"), "Authorization": idTok("mallory@example.com")}, "dave@example.com"},
		// No IAP stands in front of the Console: its header is the client's.
		{"IAP's header, set by the client", map[string]string{
			"X-Goog-Authenticated-User-Email": "accounts.google.com:carol@example.com"}, "IAM (no identity in the request)"},
	} {
		form := get()
		if status, _, _ := postAction(t, iam.URL, form.Value, []*http.Cookie{form}, c.headers); status != http.StatusSeeOther {
			t.Fatalf("%s: %d, want 303", c.what, status)
		}
		log, err := s2.ListDeliveries(t.Context(), act1ID)
		if err != nil || len(log) == 0 || log[0].Actor != c.want {
			t.Fatalf("%s: delivery log %+v, %v; want the actor %s", c.what, log, err, c.want)
		}
	}
}

// TestNoActions: a console given no Actions offers none and refuses the
// path (404).
func TestNoActions(t *testing.T) {
	s := store(t)
	commitAct1(t, s)
	srv := newConsole(t, s, nil)
	page, _ := get(t, srv.URL+"/ui/operations/batches/act1", http.StatusOK)
	if strings.Contains(page, `id="actions"`) {
		t.Error("a console without Actions shows the actions")
	}
	if status, _, _ := postAction(t, srv.URL, "x", nil, map[string]string{"Sec-Fetch-Site": "same-origin"}); status != http.StatusNotFound {
		t.Errorf("POST %s without Actions: %d, want 404", console.ActionPath, status)
	}
}
