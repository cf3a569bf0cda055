package cli

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestWrongAPIKeyNeverShown: configured with a key Gemini refuses, lrosink
// meets the live answer (400 INVALID_ARGUMENT, API_KEY_INVALID, with a
// DebugInfo detail that echoes the key) on every path that calls Gemini:
// the reconcile pass (fetch, adoption listing, webhook health), the
// confirmation of a JWT hint, `lrosink reconcile`, `lrosink webhooks`. The
// key appears in no log line, no error, no HTTP answer of lrosink, no
// console page and no CLI output, and the refusal says to check
// GEMINI_API_KEY.
func TestWrongAPIKeyNeverShown(t *testing.T) {
	const key = "AIzaSyLROSINK-wrong-key-7f3a9c0d1e2b"
	fake := fakegemini.New() // accepts only fakegemini.DefaultAPIKey
	fake.SetBatch("k1", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: time.Now(),
		ResponsesFile: fakegemini.ResponsesFile("k1")})
	fakeURL := fake.Start(t).URL

	// The fake does echo the key, so every check below can fail.
	req, err := http.NewRequest(http.MethodGet, fakeURL+"/v1beta/batches/k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-goog-api-key", key)
	echoed := httpBody(t, req)
	if !strings.Contains(echoed, key) || !strings.Contains(echoed, "API_KEY_INVALID") {
		t.Fatalf("the fake does not echo the key: %s", echoed)
	}

	signer, err := webhooktest.NewJWTSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(signer)
	t.Cleanup(jwks.Close)

	env := storeEnv(t)
	env["LROSINK_RESULTS"] = "file:" + filepath.Join(t.TempDir(), "results.jsonl")
	env["GEMINI_API_KEY"], env["GOOGLE_GEMINI_BASE_URL"], env["LROSINK_JWKS_URL"] = key, fakeURL, jwks.URL
	var seen []string // everything lrosink showed
	show := func(what, s string) {
		t.Helper()
		seen = append(seen, what+":\n"+s)
	}

	s := startServe(t, env, "--grace", "1ms", "--reconcile-every", "1h")
	post := func(path, body string, h http.Header) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if h != nil {
			req.Header = h
		}
		return httpBody(t, req)
	}
	show("register", post("/Register", `{"name":"batches/k1"}`, nil))
	time.Sleep(5 * time.Millisecond) // past the 1ms grace: the pass polls k1
	reconciled := post("/Reconcile", "", nil)
	show("reconcile", reconciled)
	if !strings.Contains(reconciled, `"errors":`) || strings.Contains(reconciled, `"errors":0`) {
		t.Errorf("the pass met no error: %s", reconciled)
	}

	tok, err := signer.Token(jwt.Claims{Expiry: jwt.NewNumericDate(time.Now().Add(5 * time.Minute)), IssuedAt: jwt.NewNumericDate(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"type":"batch.succeeded","data":{"id":"batches/k1"}}`
	show("JWT hint", post("/Webhook", body, webhooktest.JWTHeaders("msg_jwt1", tok)))

	for _, p := range []string{"/ui/", "/ui/operations/gemini:batches%252Fk1", "/ui/stuck", "/ui/health", "/metrics", "/healthz"} {
		req, err := http.NewRequest(http.MethodGet, s.base+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		show(p, httpBody(t, req))
	}

	var out, errb bytes.Buffer
	later := func() time.Time { return time.Now().Add(time.Hour) }
	Run(t.Context(), []string{"reconcile"}, strings.NewReader(""), &out, &errb, mapEnv(env), withNow(later))
	show("lrosink reconcile", out.String()+errb.String())
	for _, args := range [][]string{{"webhooks", "list"}, {"webhooks", "create", "--uri", "https://example.com/h"}, {"ops", "show", "batches/k1"}, {"ops", "list"}} {
		r := run(t, env, args...)
		show("lrosink "+strings.Join(args, " "), r.stdout+r.stderr)
		if args[0] == "webhooks" && (r.code != command.ExitError || !strings.Contains(r.stderr, "check GEMINI_API_KEY")) {
			t.Errorf("%v: exit %d, want the key hint: %s", args, r.code, r.stderr)
		}
	}
	s.stop()
	show("serve stderr (logs)", s.stderr.String())
	show("serve stdout (results)", s.stdout.String())

	all := strings.Join(seen, "\n")
	for _, part := range []string{key, key[6:18], key[len(key)-12:]} {
		if strings.Contains(all, part) {
			for _, s := range seen {
				if strings.Contains(s, part) {
					t.Errorf("the key (%q) was shown in %s", part, s)
				}
			}
		}
	}
	// The refusal was met and named, where an operator looks.
	logs := s.stderr.String()
	if !strings.Contains(logs, "check GEMINI_API_KEY") || !strings.Contains(logs, "API_KEY_INVALID") {
		t.Errorf("no log line says the key was refused:\n%s", logs)
	}
	if !strings.Contains(errb.String()+out.String(), "check GEMINI_API_KEY") {
		t.Errorf("lrosink reconcile does not say the key was refused:\n%s%s", out.String(), errb.String())
	}
	n := 0
	for _, r := range fake.Requests() {
		if r.HasAPIKey {
			n++
		}
	}
	if n < 5 {
		t.Errorf("only %d requests reached the fake with the key", n)
	}
}

func httpBody(t *testing.T, req *http.Request) string {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Status + "\n" + resp.Header.Get("Www-Authenticate") + "\n" + string(b)
}
