package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// resultsFile reads the results file's lines (file:results.jsonl in dir).
func resultsFile(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "results.jsonl"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for l := range bytes.Lines(b) {
		out = append(out, string(bytes.TrimSpace(l)))
	}
	return out
}

// replayIDOf is a results line's replay_id attribute ("" for none).
func replayIDOf(t *testing.T, line string) string {
	t.Helper()
	var m struct {
		Attributes map[string]string `json:"attributes"`
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("results line %q: %v", line, err)
	}
	return m.Attributes["replay_id"]
}

var (
	revisionRe = regexp.MustCompile(`revision (\d+)`)
	csrfRe     = regexp.MustCompile(`name="csrf" value="([^"]*)"`)
)

// TestConsoleActionsInBrowser drives the operation page's actions on a
// real `lrosink serve` with LROSINK_ADMIN_TOKEN set, in headless Chromium:
// signed in, Replay on a settled batch adds exactly one line with a new
// replay_id to the results file, and the timeline shows the action with
// its actor (the session); Check now on a pending batch the fake Gemini
// has finished settles it (and publishes its message). Then every refusal,
// each of which changes nothing (the results file, the operation's
// revision and its actions stay as they were): a form posted from another
// site by the browser itself, and, by hand, a wrong Origin, a cross-site
// Sec-Fetch-Site, no form token, a wrong one, another session's (403 each),
// and no session (401). The operation page with its actions is
// docs/console-actions.png's screenshot ($LROSINK_ARTIFACTS).
func TestConsoleActionsInBrowser(t *testing.T) {
	browser := chromium(t)
	bin := build(t, "")
	dir, secret := t.TempDir(), webhooktest.NewSecret()
	const token = "actions-admin-token-0123456789abcdef"
	fake := fakegemini.New()
	fakeURL := fake.Start(t).URL
	p := serve(t, bin, dir, []string{"LROSINK_ADMIN_TOKEN=" + token, "LROSINK_WEBHOOK_SECRETS=" + secret,
		"LROSINK_RESULTS=file:results.jsonl", "GEMINI_API_KEY=" + fakegemini.DefaultAPIKey, "GOOGLE_GEMINI_BASE_URL=" + fakeURL})
	shots := artifacts(t)
	bearer := func(req *http.Request) { req.Header.Set("Authorization", "Bearer "+token) }
	registerAs := func(body string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, p.base+"/Register", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		bearer(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
			t.Fatalf("register %s: %d", body, resp.StatusCode)
		}
	}

	// A settled batch (its one results line) and a pending one that the
	// fake Gemini has finished, which no pass checks yet (its grace).
	mustDeliver(t, p.base, secret, "ba_done", "msg_done", "completed")
	// The door publishes before it answers: the line is there.
	if lines := resultsFile(t, dir); len(lines) != 1 {
		t.Fatalf("results file %v, want the settled batch's line", lines)
	}
	registerAs(`{"name":"batches/ba_wait","kind":"batch"}`)
	fake.SetBatch("ba_wait", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: time.Now().Add(-time.Minute), ResponsesFile: "files/ba_wait-out"})

	b := openTab(t, browser, 1280, 800)
	run := b.run
	text := b.text
	const done = "/ui/operations/batches/ba_done"
	run("sign in", chromedp.Navigate(p.base+done), chromedp.WaitVisible("form.signin"), markPage(),
		chromedp.SetValue(`input[name="token"]`, token), chromedp.Click(`form.signin button`),
		chromedp.WaitVisible(`body:not([data-old]) #act-replay`))

	// Replay: one more line, with a new replay_id; the timeline says who.
	run("replay", markPage(), chromedp.Click("#act-replay"), chromedp.WaitVisible(`body:not([data-old]) #notice`))
	lines := resultsFile(t, dir)
	if len(lines) != 2 || replayIDOf(t, lines[0]) != "" {
		t.Fatalf("results file after Replay: %d lines, want the first and exactly one more:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	replayID := replayIDOf(t, lines[1])
	if !strings.HasPrefix(replayID, "replay-") {
		t.Fatalf("the replay's line has replay_id %q, want a new replay-… id", replayID)
	}
	if n := text("#notice"); !strings.Contains(n, "replayed") || !strings.Contains(n, replayID) {
		t.Errorf("notice %q, want replayed %s", n, replayID)
	}
	tl := text("#timeline")
	if !strings.Contains(tl, "replay by session ") || !strings.Contains(tl, replayID) {
		t.Errorf("the timeline does not show the replay with its actor:\n%s", tl)
	}
	b.shot(shots, "console-actions")

	// Check now settles the finished batch, through the door.
	run("check now", chromedp.Navigate(p.base+"/ui/operations/batches/ba_wait"), chromedp.WaitVisible("#act-check"),
		markPage(), chromedp.Click("#act-check"), chromedp.WaitVisible(`body:not([data-old]) #notice`))
	if n := text("#notice"); !strings.Contains(n, "settled") {
		t.Errorf("Check now: notice %q, want settled", n)
	}
	if s := text("main p"); !strings.Contains(s, "SUCCEEDED") {
		t.Errorf("Check now: the page says %q, want SUCCEEDED", s)
	}
	if tl := text("#timeline"); !strings.Contains(tl, "check-now by session ") || !strings.Contains(tl, "reconcile") {
		t.Errorf("the timeline does not show the check and its answer:\n%s", tl)
	}
	if lines := resultsFile(t, dir); len(lines) != 3 || !strings.Contains(lines[2], "ba_wait") {
		t.Fatalf("results file after Check now: want ba_wait's line third:\n%s", strings.Join(lines, "\n"))
	}

	// The refusals. state is what must not change: the results file and
	// the settled batch's revision and actions, read with the Bearer header.
	state := func() string {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.base+done, nil)
		if err != nil {
			t.Fatal(err)
		}
		bearer(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		rev := revisionRe.FindString(string(b))
		if resp.StatusCode != http.StatusOK || rev == "" {
			t.Fatalf("%s: %d, no revision", done, resp.StatusCode)
		}
		return rev + " · " + strings.Repeat("action ", strings.Count(string(b), `class="ev-action"`)) +
			" · " + strings.Join(resultsFile(t, dir), "\n")
	}
	before := state()

	// The browser itself posts a form from another site (localhost is
	// not the same site as 127.0.0.1), with the right fields.
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!doctype html><form method="post" action="`+p.base+`/ui/actions">`+
			`<input type="hidden" name="action" value="replay"><input type="hidden" name="operation" value="batches/ba_done">`+
			`<input type="hidden" name="csrf" value="x"><button id="go" type="submit">win a prize</button></form>`)
	}))
	defer elsewhere.Close()
	run("a form from another site", chromedp.Navigate(strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1)),
		chromedp.WaitVisible("#go"), markPage(), chromedp.Click("#go"), chromedp.WaitVisible(`body:not([data-old]) main`))
	if m := text("main"); !strings.Contains(m, "another site") {
		t.Errorf("a cross-site form reached %q, want the 403 refusal", m)
	}
	if after := state(); after != before {
		t.Fatalf("a cross-site form changed something:\nbefore %s\nafter  %s", before, after)
	}

	// By hand: a session of our own (a second sign-in), its form token.
	signIn := func() (*http.Cookie, string) {
		t.Helper()
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.PostForm(p.base+"/ui/signin", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var session *http.Cookie
		for _, ck := range resp.Cookies() {
			if ck.Name == "lrosink_console" {
				session = ck
			}
		}
		if session == nil {
			t.Fatalf("sign-in: %d, no session cookie", resp.StatusCode)
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.base+done, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(session)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		m := csrfRe.FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("no form token on %s", done)
		}
		return session, m[1]
	}
	session, formToken := signIn()
	// A session is its expiry (whole seconds) and its MAC: sign in again
	// until the clock has moved on, for a second session.
	otherToken := formToken
	for deadline := time.Now().Add(30 * time.Second); otherToken == formToken; {
		if time.Now().After(deadline) {
			t.Fatal("every sign-in gives the same session")
		}
		time.Sleep(100 * time.Millisecond)
		_, otherToken = signIn()
	}
	post := func(session *http.Cookie, csrf string, hdr map[string]string) int {
		t.Helper()
		form := url.Values{"action": {"replay"}, "operation": {"batches/ba_done"}}
		if csrf != "" {
			form.Set("csrf", csrf)
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, p.base+"/ui/actions", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if session != nil {
			req.AddCookie(session)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		what    string
		session *http.Cookie
		csrf    string
		hdr     map[string]string
		want    int
	}{
		{"wrong Origin", session, formToken, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"cross-site Sec-Fetch-Site", session, formToken, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": p.base}, http.StatusForbidden},
		{"no form token", session, "", map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusForbidden},
		{"wrong form token", session, strings.Repeat("0", len(formToken)), map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusForbidden},
		{"another session's form token", session, otherToken, map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusForbidden},
		{"no session", nil, formToken, map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusUnauthorized},
	} {
		if got := post(c.session, c.csrf, c.hdr); got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
		if after := state(); after != before {
			t.Fatalf("%s changed something:\nbefore %s\nafter  %s", c.what, before, after)
		}
	}
	// The same request with its session's token and a same-origin
	// browser's headers is carried out: the refusals were the defences.
	if got := post(session, formToken, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": p.base}); got != http.StatusSeeOther {
		t.Fatalf("the well-formed request: %d, want 303", got)
	}
	if n := len(resultsFile(t, dir)); n != 4 {
		t.Fatalf("results file has %d lines after the well-formed replay, want 4", n)
	}
}
