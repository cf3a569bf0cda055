package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestSucceededThenOutputOneMessage: a batch Gemini reports SUCCEEDED
// before its output is visible (GEMINI.md §10) is not settled by the door
// confirming a JWT hint nor by a reconcile pass; once the output shows,
// the next pass settles it, and exactly one results message is published,
// carrying the output. A later pass publishes nothing more.
func TestSucceededThenOutputOneMessage(t *testing.T) {
	fake := fakegemini.New()
	fake.SetBatch("s1", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: time.Now()})
	signer, err := webhooktest.NewJWTSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(signer)
	t.Cleanup(jwks.Close)
	env := storeEnv(t)
	results := filepath.Join(t.TempDir(), "results.jsonl")
	env["LROSINK_RESULTS"] = "file:" + results
	env["GEMINI_API_KEY"], env["GOOGLE_GEMINI_BASE_URL"], env["LROSINK_JWKS_URL"] = fakegemini.DefaultAPIKey, fake.Start(t).URL, jwks.URL

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
	// serve's start-up pass may already have adopted the job from the
	// listing (held RUNNING too): 201 or 200.
	if got := post("/Register", `{"name":"batches/s1"}`, nil); !strings.HasPrefix(got, "201") && !strings.HasPrefix(got, "200") {
		t.Fatalf("register: %s", got)
	}
	tok, err := signer.Token(jwt.Claims{Expiry: jwt.NewNumericDate(time.Now().Add(5 * time.Minute)), IssuedAt: jwt.NewNumericDate(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	// The hint is confirmed with Gemini, which says SUCCEEDED without
	// output: held RUNNING, nothing published.
	hint := post("/Webhook", `{"type":"batch.succeeded","data":{"id":"batches/s1","output_file_uri":"gs://forged/out.jsonl"}}`,
		webhooktest.JWTHeaders("msg_s1", tok))
	if !strings.HasPrefix(hint, "200") || strings.Contains(hint, `"outcome":"completed"`) {
		t.Fatalf("JWT hint: %s", hint)
	}
	time.Sleep(5 * time.Millisecond) // past the 1ms grace
	if got := post("/Reconcile", "", nil); !strings.Contains(got, `"checked":1`) || !strings.Contains(got, `"settled":0`) {
		t.Fatalf("first pass: %s", got)
	}
	if code := s.stop(); code != command.ExitOK {
		t.Fatalf("serve exit %d", code)
	}
	if b, _ := os.ReadFile(results); len(b) != 0 {
		t.Fatalf("published before the output was visible: %s", b)
	}
	if !strings.Contains(s.stderr.String(), "SUCCEEDED batch names no output yet") {
		t.Errorf("no log line says why the batch is held:\n%s", s.stderr.String())
	}

	// The output shows; Gemini's update time does not move.
	fake.SetBatch("s1", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: time.Now(), ResponsesFile: fakegemini.ResponsesFile("s1")})
	for i, after := range []time.Duration{time.Hour, 3 * time.Hour} {
		var out, errb bytes.Buffer
		later := func() time.Time { return time.Now().Add(after) }
		if code := Run(t.Context(), []string{"reconcile"}, strings.NewReader(""), &out, &errb, mapEnv(env), withNow(later)); code != command.ExitOK {
			t.Fatalf("reconcile %d: exit %d %s%s", i, code, out.String(), errb.String())
		}
		if want := []string{`"settled":1`, `"checked":0`}[i]; !strings.Contains(out.String(), want) {
			t.Errorf("pass %d: %s, want %s", i, out.String(), want)
		}
	}
	b, err := os.ReadFile(results)
	if err != nil {
		t.Fatal(err)
	}
	lines := resultLines(t, string(b)) // each validated against docs/results.schema.json
	if len(lines) != 1 || lines[0].Operation != "batches/s1" || lines[0].State != "SUCCEEDED" || lines[0].SettledBy != "reconcile" ||
		lines[0].Output["responses_file"] != "files/batch-s1" {
		t.Fatalf("results %+v, want one SUCCEEDED message carrying files/batch-s1", lines)
	}
}

// TestStepErrorReachesTheMessage: an interaction Gemini reports failed
// with its error only in a model_output step (errors[] empty, as the live
// API can answer) settles FAILED with that error in its results message.
func TestStepErrorReachesTheMessage(t *testing.T) {
	fake := fakegemini.New()
	fake.SetInteraction("i-step", fakegemini.InteractionState{Status: "failed", Updated: time.Now(),
		StepError: &fakegemini.StepError{Code: 13, Message: "model crashed"}})
	env := storeEnv(t)
	results := filepath.Join(t.TempDir(), "results.jsonl")
	env["LROSINK_RESULTS"] = "file:" + results
	env["GEMINI_API_KEY"], env["GOOGLE_GEMINI_BASE_URL"] = fakegemini.DefaultAPIKey, fake.Start(t).URL
	if r := run(t, env, "register", "interactions/i-step"); r.code != command.ExitOK {
		t.Fatalf("register: %d %s", r.code, r.stderr)
	}
	var out, errb bytes.Buffer
	later := func() time.Time { return time.Now().Add(time.Hour) }
	if code := Run(t.Context(), []string{"reconcile"}, strings.NewReader(""), &out, &errb, mapEnv(env), withNow(later)); code != command.ExitOK ||
		!strings.Contains(out.String(), `"settled":1`) {
		t.Fatalf("reconcile: exit %d %s%s", code, out.String(), errb.String())
	}
	b, err := os.ReadFile(results)
	if err != nil {
		t.Fatal(err)
	}
	lines := resultLines(t, string(b))
	if len(lines) != 1 || lines[0].State != "FAILED" || !strings.Contains(string(b), `"error":{"code":13,"message":"model crashed"}`) {
		t.Fatalf("results %s, want one FAILED message with the step's error", b)
	}
}
