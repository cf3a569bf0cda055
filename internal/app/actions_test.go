package app_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/fakegemini"
)

// fakeMetadata is the metadata server's identity endpoint: an ID token
// (a JWT-shaped string whose payload names the audience asked for) for a
// request that carries Metadata-Flavor: Google.
func fakeMetadata(t *testing.T, email string, asked *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/computeMetadata/v1/instance/service-accounts/default/identity" || r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "not the identity endpoint", http.StatusNotFound)
			return
		}
		asked.Add(1)
		_, _ = io.WriteString(w, idToken(r.URL.Query().Get("audience"), email))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func idToken(aud, email string) string {
	enc := base64.RawURLEncoding.EncodeToString
	payload, _ := json.Marshal(map[string]any{"aud": aud, "email": email, "exp": time.Now().Add(time.Hour).Unix()})
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(payload) + ".SIGNATURE_REMOVED_BY_GOOGLE"
}

// audienceOf reads the aud claim of a Bearer ID token ("" if none).
func audienceOf(authz string) string {
	tok, ok := strings.CutPrefix(authz, "Bearer ")
	parts := strings.Split(tok, ".")
	if !ok || len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Aud string `json:"aud"`
	}
	_ = json.Unmarshal(b, &c)
	return c.Aud
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]*)"`)

// TestConsoleActsThroughReconcile: the Console service as on Cloud Run
// (the Console alone, read-only, LROSINK_RECONCILE_URL set) acts by calling
// a real Reconcile function over HTTP with its own ID token from the
// metadata server, whose audience is the Reconcile URL; the Reconcile side
// (behind a stand-in for Cloud Run's IAM check) does the write. A replay
// pressed by alice@example.com (the ID token Cloud Run's IAM check
// verified and passed on) publishes the message again with a new replay_id and is
// recorded with her as the actor. Without the Console's identity the IAM
// check refuses, the console says so (502) and nothing is published.
func TestConsoleActsThroughReconcile(t *testing.T) {
	asked := consoleIdentity(t)

	h := newHintServer(t, nil)
	h.settledBatch("act1", "msg_act1")
	var iamOpen atomic.Bool
	iamOpen.Store(true)
	var reconcileURL string
	reconcile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Cloud Run's IAM check, as far as this test needs it: an ID token
		// for this service's URL.
		if !iamOpen.Load() || audienceOf(r.Header.Get("Authorization")) != reconcileURL {
			http.Error(w, "Forbidden", http.StatusForbidden)
			return
		}
		h.a.Reconcile().ServeHTTP(w, r)
	}))
	t.Cleanup(reconcile.Close)
	reconcileURL = reconcile.URL

	console, browser := consoleService(t, h, reconcileURL)
	do := func(method, path string, form url.Values) (*http.Response, string) {
		t.Helper()
		var rd io.Reader
		if form != nil {
			rd = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(t.Context(), method, console.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		// Cloud Run's IAM check let alice's ID token through (the
		// signature removed, as Cloud Run passes it on).
		req.Header.Set("Authorization", "Bearer "+idToken(console.URL, "alice@example.com"))
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	resp, page := do(http.MethodGet, "/ui/operations/batches/act1", nil)
	m := csrfField.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil || !strings.Contains(page, `id="act-replay"`) {
		t.Fatalf("operation page: %d, want 200 with a Replay form:\n%s", resp.StatusCode, page)
	}
	form := url.Values{"action": {"replay"}, "operation": {"batches/act1"}, "csrf": {m[1]}}
	resp, _ = do(http.MethodPost, "/ui/actions", form)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/operations/batches/act1?") || !strings.Contains(loc, "outcome=replayed") {
		t.Fatalf("replay: %d to %q, want 303 to the page with outcome=replayed", resp.StatusCode, loc)
	}
	msgs := h.messages()
	if len(msgs) != 2 {
		t.Fatalf("%d results messages, want the first and its replay", len(msgs))
	}
	attrs, _ := msgs[1]["attributes"].(map[string]any)
	replayID, _ := attrs["replay_id"].(string)
	if !strings.HasPrefix(replayID, "replay-") || !strings.Contains(loc, "replay_id="+replayID) {
		t.Fatalf("the replay's attributes %v (redirect %q): want a new replay_id, the one the page is told", attrs, loc)
	}
	if asked.Load() == 0 {
		t.Error("the Console never asked the metadata server for its ID token")
	}
	if err := h.a.Deliveries.Recorder.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	log, err := h.a.DeliveryStore.ListDeliveries(t.Context(), docID(t, "batches/act1"))
	if err != nil || len(log) == 0 {
		t.Fatalf("delivery log %v, %v", log, err)
	}
	if e := log[0]; e.Source != deliverylog.SourceConsole || e.Status != "replay" || e.Actor != "alice@example.com" ||
		e.Outcome != "replayed" || e.DeliveryID != replayID {
		t.Fatalf("newest delivery log entry %+v, want alice's replay %s", e, replayID)
	}
	_, page = do(http.MethodGet, loc, nil)
	if !strings.Contains(page, "alice@example.com") || !strings.Contains(page, replayID) || !strings.Contains(page, `id="notice"`) {
		t.Errorf("the page after the replay does not show it with its actor:\n%s", page)
	}

	// The IAM check refuses the Console: its action fails, nothing is
	// published, and the page says so.
	iamOpen.Store(false)
	resp, page = do(http.MethodPost, "/ui/actions", form)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(page, "Reconcile function") {
		t.Fatalf("with the IAM check refusing: %d, want 502 naming the Reconcile function:\n%s", resp.StatusCode, page)
	}
	if n := len(h.messages()); n != 2 {
		t.Fatalf("%d messages after a refused call, want 2", n)
	}
}

// TestReconcileActionRequests: the Reconcile function's action requests
// (CONTRACT.md §4, "Actions") and their statuses from the one table;
// Check now settles a pending batch the fake Gemini has finished (and
// publishes it); an empty body is still a pass.
func TestReconcileActionRequests(t *testing.T) {
	h := newHintServer(t, nil)
	h.settledBatch("ra_done", "msg_ra")
	reg, err := http.Post(h.url+"/Register", "application/json", strings.NewReader(`{"name":"batches/ra_wait","kind":"batch"}`))
	if err != nil {
		t.Fatal(err)
	}
	reg.Body.Close()
	h.fake.SetBatch("ra_wait", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: now.Add(-time.Minute), ResponsesFile: "files/ra_wait-out"})
	call := func(body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(h.url+"/Reconcile", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, m
	}
	req := func(action, name string) string {
		return `{"action":"` + action + `","operation":"` + name + `","actor":"ops@example.com"}`
	}
	for _, c := range []struct {
		body            string
		status          int
		outcome, reason string
	}{
		{`{"action":"replay","operation":"batches/ra_done","actor":"x","extra":1}`, 400, "refused", "invalid-action"},
		{`{"action":"replay","operation":"batches/ra_done"}`, 400, "refused", "invalid-action"},
		{req("explode", "batches/ra_done"), 400, "refused", "invalid-action"},
		{req("replay", "batches/nowhere"), 404, "refused", "unknown-operation"},
		{req("replay", "batches/ra_wait"), 409, "refused", "not-settled"},
		{req("publish-now", "batches/ra_wait"), 409, "refused", "not-settled"},
		{req("check-now", "batches/ra_done"), 409, "refused", "already-settled"},
		{req("publish-now", "batches/ra_done"), 409, "refused", "nothing-owed"},
	} {
		status, m := call(c.body)
		if status != c.status || m["outcome"] != c.outcome || m["reason"] != c.reason {
			t.Errorf("%s: %d %v, want %d %s/%s", c.body, status, m, c.status, c.outcome, c.reason)
		}
	}
	if n := len(h.messages()); n != 1 {
		t.Fatalf("%d messages after refusals, want the one completion", n)
	}
	status, m := call(req("check-now", "batches/ra_wait"))
	if status != http.StatusOK || m["outcome"] != "settled" || m["state"] != "SUCCEEDED" || m["operation"] != "batches/ra_wait" {
		t.Fatalf("check-now of the finished batch: %d %v, want 200 settled SUCCEEDED", status, m)
	}
	status, m = call(req("replay", "batches/ra_done"))
	if id, _ := m["replay_id"].(string); status != http.StatusOK || m["outcome"] != "replayed" || !strings.HasPrefix(id, "replay-") {
		t.Fatalf("replay: %d %v, want 200 replayed with a replay_id", status, m)
	}
	if msgs := h.messages(); len(msgs) != 3 || msgs[1]["operation"] != "batches/ra_wait" {
		t.Fatalf("messages %v: want the completion, the checked batch's, the replay", msgs)
	}
	if status, m := call(""); status != http.StatusOK || m["checked"] == nil {
		t.Fatalf("an empty body: %d %v, want a pass's summary", status, m)
	}
}

// TestRegisterAndReconcileRefuseOtherSites: on a serve with no admin token
// (loopback, nothing else asked of a caller) a page on another site could
// post a text/plain body, which needs no preflight, to /Reconcile or
// /Register. A browser says where a request came from (Sec-Fetch-Site,
// Origin): such a request is refused 403 cross-origin and changes nothing,
// while callers that are not browsers (Scheduler, Pub/Sub, the CLI) send
// neither header and still get through.
func TestRegisterAndReconcileRefuseOtherSites(t *testing.T) {
	h := newHintServer(t, nil)
	h.settledBatch("xs_done", "msg_xs")
	send := func(path, body string, headers map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "text/plain")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m struct {
			Reason string `json:"reason"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m.Reason
	}
	replay := `{"action":"replay","operation":"batches/xs_done","actor":"ceo@example.com"}`
	register := `{"name":"batches/xs_new","kind":"batch"}`
	for _, c := range []struct {
		path, body string
		headers    map[string]string
	}{
		{"/Reconcile", replay, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}},
		{"/Reconcile", replay, map[string]string{"Origin": "https://evil.example"}},
		{"/Register", register, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}},
		{"/Register", register, map[string]string{"Sec-Fetch-Site": "same-site"}},
	} {
		if status, reason := send(c.path, c.body, c.headers); status != http.StatusForbidden || reason != "cross-origin" {
			t.Errorf("%s from %v: %d %q, want 403 cross-origin", c.path, c.headers, status, reason)
		}
	}
	if n := len(h.messages()); n != 1 {
		t.Fatalf("%d results messages after the refusals, want the completion's alone", n)
	}
	if _, err := h.a.Ledger.GetOperation(t.Context(), docID(t, "batches/xs_new")); err == nil {
		t.Fatal("a refused registration was stored")
	}
	// No browser headers: the Scheduler, a push, the CLI.
	if status, _ := send("/Reconcile", replay, nil); status != http.StatusOK {
		t.Fatalf("a replay with no browser headers: %d, want 200", status)
	}
	if status, _ := send("/Register", register, nil); status != http.StatusCreated {
		t.Fatalf("a registration with no browser headers: %d, want 201", status)
	}
	if n := len(h.messages()); n != 2 {
		t.Fatalf("%d results messages, want the completion and its replay", n)
	}
}

// TestConsoleActionFollowsNoRedirect: the Console's ID token goes to the
// Reconcile URL alone. A Reconcile URL that answers with a redirect is no
// answer (the page says the outcome is unknown), and the host it points at
// never sees the token.
func TestConsoleActionFollowsNoRedirect(t *testing.T) {
	asked := consoleIdentity(t)
	h := newHintServer(t, nil)
	h.settledBatch("rd1", "msg_rd1")
	var leaked atomic.Bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Store(true)
		}
		h.a.Reconcile().ServeHTTP(w, r)
	}))
	t.Cleanup(elsewhere.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	console, browser := consoleService(t, h, redirector.URL)
	resp, err := browser.Get(console.URL + "/ui/operations/batches/rd1")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindStringSubmatch(string(page))
	if m == nil {
		t.Fatalf("operation page %d has no form token", resp.StatusCode)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, console.URL+"/ui/actions",
		strings.NewReader(url.Values{"action": {"replay"}, "operation": {"batches/rd1"}, "csrf": {m[1]}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err = browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(page), "outcome is unknown") {
		t.Fatalf("an action whose Reconcile URL redirects: %d, want 502 saying the outcome is unknown:\n%s", resp.StatusCode, page)
	}
	if asked.Load() == 0 {
		t.Fatal("the Console never asked for its ID token: nothing here could have leaked")
	}
	if leaked.Load() {
		t.Fatal("the Console's ID token followed the redirect to another host")
	}
	if n := len(h.messages()); n != 1 {
		t.Fatalf("%d results messages, want the completion's alone", n)
	}
}

// consoleService is the Console service as on Cloud Run over h's ledger:
// the Console alone, read-only, its actions sent to reconcileURL; and a
// browser for it (cookies kept, redirects not followed).
func consoleService(t *testing.T, h *hintServer, reconcileURL string) (*httptest.Server, *http.Client) {
	t.Helper()
	consoleApp := newApp(t, testConfig(t, "", func(c *config.Config) {
		c.Store, c.ReconcileURL = h.a.Config.Store, reconcileURL
	}), nil, io.Discard, h.clk.Now)
	ui, err := consoleApp.Console(false)
	if err != nil {
		t.Fatal(err)
	}
	console := httptest.NewServer(ui)
	t.Cleanup(console.Close)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return console, &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// settledBatch settles batches/ID through a confirmed v1a delivery
// (webhook-id msgID): the fake Gemini knows it SUCCEEDED.
func (h *hintServer) settledBatch(id, msgID string) {
	h.t.Helper()
	h.fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: now.Add(-time.Minute), ResponsesFile: "files/" + id + "-out"})
	body := batchEnvelope("batch.succeeded", "batches/"+id, "")
	if a := h.post(h.signed(msgID, body), body); a.Status != http.StatusOK || a.Outcome != "completed" {
		h.t.Fatalf("the delivery: %s, want 200 completed", a)
	}
}

// consoleIdentity points the metadata server at a fake that issues the
// Console account's ID tokens; it counts the tokens asked for.
func consoleIdentity(t *testing.T) *atomic.Int64 {
	t.Helper()
	asked := &atomic.Int64{}
	md := fakeMetadata(t, "lrosink-console@p.iam.gserviceaccount.com", asked)
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(md.URL, "http://"))
	return asked
}
