package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestSendToServe: `lrosink send batch.succeeded --id X` against a running
// serve is answered 200 completed and yields one results line; sent again it
// is a duplicate and adds none. The secret comes from the environment and
// is never printed.
func TestSendToServe(t *testing.T) {
	secret := webhooktest.NewSecret()
	env := storeEnv(t)
	env["LROSINK_WEBHOOK_SECRETS"] = secret + "," + webhooktest.NewSecret()
	s := startServe(t, env)
	url := s.base + "/Webhook"
	sendEnv := map[string]string{"LROSINK_WEBHOOK_SECRETS": env["LROSINK_WEBHOOK_SECRETS"]}

	r := run(t, sendEnv, "send", "batch.succeeded", "--id", "send1", "--url", url, "--data", "output_file_uri=gs://b/send1.jsonl")
	if r.code != command.ExitOK || !strings.HasPrefix(r.stdout, "HTTP 200") || !strings.Contains(r.stdout, `"outcome":"completed"`) {
		t.Fatalf("first send: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "the results line", func() bool { return strings.Count(s.stdout.String(), "\n") >= 1 })
	r2 := run(t, sendEnv, "send", "batch.succeeded", "--id", "send1", "--url", url)
	if r2.code != command.ExitOK || !strings.Contains(r2.stdout, `"outcome":"duplicate"`) {
		t.Fatalf("second send: exit %d\n%s%s", r2.code, r2.stdout, r2.stderr)
	}
	if code := s.stop(); code != command.ExitOK {
		t.Fatalf("serve exit %d", code)
	}
	lines := resultLines(t, s.stdout.String())
	if len(lines) != 1 || lines[0].Operation != "batches/send1" || lines[0].State != "SUCCEEDED" ||
		lines[0].Output["output_file_uri"] != "gs://b/send1.jsonl" {
		t.Fatalf("results %+v", lines)
	}
	for _, out := range []string{r.stdout, r.stderr, r2.stdout, r2.stderr} {
		if strings.Contains(out, strings.TrimPrefix(secret, "whsec_")) {
			t.Fatal("send printed the secret")
		}
	}
}

// TestSendEnvelopeAndExitStatus: the body is the documented envelope, signed
// with --secret over the exact bytes sent; a non-2xx answer exits 1 and is
// printed.
func TestSendEnvelopeAndExitStatus(t *testing.T) {
	secret := webhooktest.NewSecret()
	var got struct {
		Type, Version, Timestamp string
		Data                     map[string]any
	}
	status := http.StatusUnauthorized
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		want := webhooktest.Signature(secret, r.Header.Get("webhook-id"), s2t(t, r.Header.Get("webhook-timestamp")), b)
		if r.Header.Get("webhook-signature") != want || r.Method != http.MethodPost {
			t.Errorf("%s with signature %q, want %q", r.Method, r.Header.Get("webhook-signature"), want)
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("body %s: %v", b, err)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"outcome":"rejected","reason":"invalid-signature","operation":""}`+"\n")
	}))
	t.Cleanup(srv.Close)
	r := run(t, nil, "send", "video.generated", "--id", "models/veo/operations/v1", "--url", srv.URL, "--secret", secret, "--data", "k=v")
	if r.code != command.ExitError || !strings.HasPrefix(r.stdout, "HTTP 401") || !strings.Contains(r.stdout, "invalid-signature") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got.Type != "video.generated" || got.Version != "v1" || got.Timestamp == "" ||
		got.Data["id"] != "models/veo/operations/v1" || got.Data["k"] != "v" || len(got.Data) != 2 {
		t.Fatalf("envelope %+v", got)
	}
	status = http.StatusOK
	if r := run(t, nil, "send", "batch.failed", "--id", "b", "--url", srv.URL, "--secret", secret); r.code != command.ExitOK {
		t.Fatalf("2xx: exit %d %s", r.code, r.stderr)
	}
}

// TestSendUsage: what send refuses before sending anything.
func TestSendUsage(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"send", "--id", "x", "--secret", webhooktest.NewSecret()}, "EVENT_TYPE"},
		{nil, []string{"send", "batch.succeeded", "--secret", webhooktest.NewSecret()}, "--id"},
		{nil, []string{"send", "batch.succeeded", "--id", "x"}, "LROSINK_WEBHOOK_SECRETS"},
		{nil, []string{"send", "batch.succeeded", "--id", "x", "--secret", "whsec_not base64!"}, "not a valid whsec_"},
		{nil, []string{"send", "batch.succeeded", "--id", "x", "--secret", webhooktest.NewSecret(), "--data", "id=y"}, "--data id"},
		{nil, []string{"send", "batch.succeeded", "--id", "x", "--secret", webhooktest.NewSecret(), "--url", "localhost:8080"}, "--url"},
	} {
		r := run(t, c.env, c.args...)
		if r.code != command.ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
		if strings.Contains(r.stderr, "not base64!") {
			t.Errorf("%v: the secret was printed", c.args)
		}
	}
}

func s2t(t *testing.T, s string) time.Time {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Errorf("webhook-timestamp %q: %v", s, err)
	}
	return time.Unix(n, 0)
}

// TestSendNobodyListening: a refused connection exits 1 with a hint.
func TestSendNobodyListening(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	r := run(t, nil, "send", "batch.succeeded", "--id", "x", "--url", url, "--secret", webhooktest.NewSecret())
	if r.code != command.ExitError || !strings.Contains(r.stderr, "lrosink serve") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestSendKnowsTheEventTypes: a typo in EVENT_TYPE exits 2 before anything
// is sent, with the closest type and the list; one close to none gets the
// list alone; --any-type sends it on purpose; --list prints the one table
// (webhook.EventTypes), one a line.
func TestSendKnowsTheEventTypes(t *testing.T) {
	secret := webhooktest.NewSecret()
	var got atomic.Int64
	var lastType atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		var body struct{ Type string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		lastType.Store(body.Type)
		_, _ = io.WriteString(w, `{"outcome":"ignored","reason":"unknown-event-type","operation":""}`)
	}))
	t.Cleanup(srv.Close)
	r := run(t, nil, "send", "batch.succeded", "--id", "x", "--url", srv.URL, "--secret", secret)
	if r.code != command.ExitUsage || !strings.Contains(r.stderr, `"batch.succeded" is not an event type Gemini sends; did you mean batch.succeeded?`) ||
		!strings.Contains(r.stderr, strings.Join(webhook.EventTypes(), ", ")) || r.stdout != "" {
		t.Errorf("typo: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = run(t, nil, "send", "nothing.like.it", "--id", "x", "--url", srv.URL, "--secret", secret)
	if r.code != command.ExitUsage || strings.Contains(r.stderr, "did you mean") || !strings.Contains(r.stderr, "Gemini sends: batch.succeeded") {
		t.Errorf("unknown: exit %d, stderr %q", r.code, r.stderr)
	}
	if n := got.Load(); n != 0 {
		t.Fatalf("%d deliveries sent for refused types", n)
	}
	r = run(t, nil, "send", "batch.exploded", "--any-type", "--id", "x", "--url", srv.URL, "--secret", secret, "--json")
	var ans struct {
		HTTPStatus int `json:"http_status"`
		Answer     struct{ Outcome, Reason string }
	}
	if r.code != command.ExitOK || got.Load() != 1 || lastType.Load() != "batch.exploded" ||
		json.Unmarshal([]byte(r.stdout), &ans) != nil || strings.Count(r.stdout, "\n") != 1 ||
		ans.HTTPStatus != 200 || ans.Answer.Reason != "unknown-event-type" {
		t.Errorf("--any-type --json: exit %d, sent %d, stdout %q, stderr %q", r.code, got.Load(), r.stdout, r.stderr)
	}
	r = run(t, nil, "send", "--list")
	if want := strings.Join(webhook.EventTypes(), "\n") + "\n"; r.code != command.ExitOK || r.stdout != want {
		t.Errorf("--list: exit %d, stdout %q, want %q", r.code, r.stdout, want)
	}
	if r = run(t, nil, "send", "batch.failed", "--list"); r.code != command.ExitUsage {
		t.Errorf("--list with a type: exit %d", r.code)
	}
}
