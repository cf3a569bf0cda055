package webhooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lrosink/lrosink/internal/cli/webhooks"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/webhook"
)

// memWriter is an in-memory SecretWriter; fail makes AddVersion fail.
type memWriter struct {
	mu       sync.Mutex
	fail     error
	versions map[string][]string // secret name -> payloads, oldest first
}

func (m *memWriter) AddVersion(ctx context.Context, secret string, payload []byte) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return "", m.fail
	}
	if m.versions == nil {
		m.versions = map[string][]string{}
	}
	m.versions[secret] = append(m.versions[secret], string(payload))
	return fmt.Sprintf("%s/versions/%d", secret, len(m.versions[secret])), nil
}

func (m *memWriter) payloads(secret string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.versions[secret])
}

// env is a fake Gemini plus the environment that points the command at it.
type env struct {
	fake   *fakegemini.Server
	url    string
	apiKey string
}

func newEnv(t *testing.T, opts ...fakegemini.Option) *env {
	t.Helper()
	fake := fakegemini.New(opts...)
	srv := fake.Start(t)
	return &env{fake: fake, url: srv.URL, apiKey: fakegemini.DefaultAPIKey}
}

func (e *env) getenv(name string) string {
	switch name {
	case "GEMINI_API_KEY":
		return e.apiKey
	case "GOOGLE_GEMINI_BASE_URL":
		return e.url
	}
	return ""
}

type result struct {
	code           int
	stdout, stderr string
}

func (e *env) run(t *testing.T, deps webhooks.Deps, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := webhooks.CommandWith(t.Context(), args, &stdout, &stderr, e.getenv, deps)
	return result{code, stdout.String(), stderr.String()}
}

// onlyWebhook returns the single webhook in the fake.
func (e *env) onlyWebhook(t *testing.T) fakegemini.Webhook {
	t.Helper()
	hooks := e.fake.Webhooks()
	if len(hooks) != 1 {
		t.Fatalf("fake holds %d webhooks, want 1", len(hooks))
	}
	return hooks[0]
}

// create registers a webhook through the command, its secret going to an
// in-memory writer, and returns its id.
func (e *env) create(t *testing.T, uri string) string {
	t.Helper()
	before := len(e.fake.Webhooks())
	res := e.run(t, webhooks.Deps{SecretWriter: &memWriter{}}, "create", "--uri", uri, "--secret", "projects/p/secrets/setup")
	hooks := e.fake.Webhooks()
	if res.code != 0 || len(hooks) != before+1 {
		t.Fatalf("setup create: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	return hooks[len(hooks)-1].ID
}

// requestsTo returns the recorded requests for method and path.
func (e *env) requestsTo(method, path string) []fakegemini.Request {
	var out []fakegemini.Request
	for _, r := range e.fake.Requests() {
		if r.Method == method && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

func decodeBody(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("request body %q is not a JSON object: %v", body, err)
	}
	return m
}

func secretLine(secret string) string { return "LROSINK_WEBHOOK_SECRETS=" + secret }

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

// acceptedEvents are the seven events the live API accepts (GEMINI.md §10).
var acceptedEvents = []any{
	"batch.succeeded", "batch.failed", "batch.expired",
	"interaction.requires_action", "interaction.completed", "interaction.failed",
	"video.generated",
}

func TestCreatePrintsTheSecretOnceOnStdout(t *testing.T) {
	e := newEnv(t)
	res := e.run(t, webhooks.Deps{}, "create", "--uri", "https://example.com/hook",
		"--events", "batch.succeeded,batch.failed", "--name", "prod")
	if res.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}

	reqs := e.fake.Requests()
	if len(reqs) != 1 || reqs[0].Method != http.MethodPost || reqs[0].Path != "/v1beta/webhooks" {
		t.Fatalf("requests = %+v, want one POST /v1beta/webhooks", reqs)
	}
	got := decodeBody(t, reqs[0].Body)
	want := map[string]any{"uri": "https://example.com/hook", "name": "prod", "subscribed_events": []any{"batch.succeeded", "batch.failed"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("body = %v, want %v", got, want)
	}

	w := e.onlyWebhook(t)
	if len(w.Secrets) != 1 {
		t.Fatalf("fake secrets = %d, want 1", len(w.Secrets))
	}
	secret := w.Secrets[0]
	if n := strings.Count(res.stdout, secret); n != 1 {
		t.Errorf("stdout holds the secret %d times, want 1:\n%s", n, res.stdout)
	}
	if !slices.Contains(lines(res.stdout), secretLine(secret)) {
		t.Errorf("stdout lacks the line %q:\n%s", "LROSINK_WEBHOOK_SECRETS=<secret>", res.stdout)
	}
	for _, want := range []string{w.ID, "https://example.com/hook"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, res.stdout)
		}
	}
	if strings.Contains(res.stderr, secret) {
		t.Error("stderr holds the secret")
	}
	if !strings.Contains(res.stderr, "shown only this once") {
		t.Errorf("stderr lacks the shown-once warning:\n%s", res.stderr)
	}
}

// TestCreateDefaultsToTheAcceptedEvents: with no --events, create
// subscribes to the seven events the live API accepts (the fake refuses
// *.cancelled as the API does), each one lrosink's parser handles; the
// parser still handles the two it leaves out.
func TestCreateDefaultsToTheAcceptedEvents(t *testing.T) {
	e := newEnv(t)
	res := e.run(t, webhooks.Deps{}, "create", "--uri", "https://example.com/hook")
	if res.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	reqs := e.requestsTo(http.MethodPost, "/v1beta/webhooks")
	if len(reqs) != 1 {
		t.Fatalf("%d create requests, want 1", len(reqs))
	}
	got := decodeBody(t, reqs[0].Body)
	if !reflect.DeepEqual(got["subscribed_events"], acceptedEvents) {
		t.Errorf("subscribed_events = %v, want %v", got["subscribed_events"], acceptedEvents)
	}
	if _, ok := got["name"]; ok {
		t.Errorf("name sent without --name: %v", got)
	}
	if def := webhooks.DefaultEvents(); !slices.Equal(def, fakegemini.SubscribableEvents()) {
		t.Errorf("DefaultEvents() = %v, the fake (live) accepts %v", def, fakegemini.SubscribableEvents())
	}
	parsed := webhook.EventTypes()
	for _, ev := range webhooks.DefaultEvents() {
		if !slices.Contains(parsed, ev) {
			t.Errorf("default event %q is not one the parser handles", ev)
		}
	}
	for _, ev := range []string{"batch.cancelled", "interaction.cancelled"} {
		if !slices.Contains(parsed, ev) {
			t.Errorf("the parser no longer lists %q", ev)
		}
	}
}

func TestCreateStoresTheSecretInSecretManager(t *testing.T) {
	e := newEnv(t)
	mem := &memWriter{}
	const name = "projects/p1/secrets/lrosink-webhook"
	res := e.run(t, webhooks.Deps{SecretWriter: mem}, "create", "--uri", "https://example.com/hook", "--secret", name)
	if res.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	secret := e.onlyWebhook(t).Secrets[0]
	if got := mem.payloads(name); !slices.Equal(got, []string{secret}) {
		t.Errorf("Secret Manager versions = %d, want exactly the issued secret", len(got))
	}
	if strings.Contains(res.stdout, secret) || strings.Contains(res.stderr, secret) {
		t.Fatal("the secret was printed although it went to Secret Manager")
	}
	if strings.Contains(res.stdout, "LROSINK_WEBHOOK_SECRETS=") {
		t.Errorf("stdout has a secrets line:\n%s", res.stdout)
	}
	for _, want := range []string{name + "/versions/1", "whsec_..." + secret[len(secret)-4:]} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, res.stdout)
		}
	}
}

func TestCreateSecretManagerFailureKeepsTheSecret(t *testing.T) {
	e := newEnv(t)
	// The failure echoes the payload, as a careless layer might: it must
	// still not reach stderr.
	mem := &memWriter{}
	mem.fail = errors.New("permission denied on the payload")
	failing := &echoingWriter{}
	for _, w := range []webhooks.SecretWriter{mem, failing} {
		e.fake = fakegemini.New()
		e.url = e.fake.Start(t).URL
		res := e.run(t, webhooks.Deps{SecretWriter: w}, "create", "--uri", "https://example.com/hook", "--secret", "projects/p/secrets/s")
		if res.code != 1 {
			t.Fatalf("%T: exit %d, want 1; stderr:\n%s", w, res.code, res.stderr)
		}
		secret := e.onlyWebhook(t).Secrets[0]
		if n := strings.Count(res.stdout, secret); n != 1 || !slices.Contains(lines(res.stdout), secretLine(secret)) {
			t.Errorf("%T: stdout must carry the secret once, in its line; got:\n%s", w, res.stdout)
		}
		if strings.Contains(res.stderr, secret) {
			t.Errorf("%T: stderr holds the secret:\n%s", w, res.stderr)
		}
		for _, want := range []string{"Secret Manager", "failed", "by hand"} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("%T: stderr lacks %q:\n%s", w, want, res.stderr)
			}
		}
	}
	if !strings.Contains(failing.lastErr, "whsec_") {
		t.Fatal("echoingWriter did not echo the secret: the redaction check above proved nothing")
	}
}

// echoingWriter fails with an error that contains the payload.
type echoingWriter struct{ lastErr string }

func (w *echoingWriter) AddVersion(_ context.Context, secret string, payload []byte) (string, error) {
	w.lastErr = fmt.Sprintf("rpc error: invalid payload %q for %s", payload, secret)
	return "", errors.New(w.lastErr)
}

// TestCreateRejectedCancelledEventsSuggestsDroppingThem: asked for all nine
// documented events, the API (here the fake, which refuses *.cancelled as
// the live API does) answers 400; the error names the two and the command
// that works.
func TestCreateRejectedCancelledEventsSuggestsDroppingThem(t *testing.T) {
	e := newEnv(t)
	res := e.run(t, webhooks.Deps{}, "create", "--uri", "https://example.com/hook", "--events", strings.Join(webhook.EventTypes(), ","))
	if !strings.Contains(res.stderr, `the live API has rejected "batch.cancelled"`) {
		t.Errorf("no note before sending:\n%s", res.stderr)
	}
	if res.code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", res.code, res.stderr)
	}
	for _, want := range []string{
		"HTTP 400", "batch.cancelled,interaction.cancelled",
		"--events batch.succeeded,batch.failed,batch.expired,interaction.requires_action,interaction.completed,interaction.failed,video.generated",
		"reconcile",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	if res.stdout != "" {
		t.Errorf("stdout = %q, want empty", res.stdout)
	}

	// The suggested command works.
	res = e.run(t, webhooks.Deps{}, "create", "--uri", "https://example.com/hook",
		"--events", "batch.succeeded,batch.failed,batch.expired,interaction.requires_action,interaction.completed,interaction.failed,video.generated")
	if res.code != 0 {
		t.Fatalf("create without cancelled events: exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

func TestCreateDoesNotRetryAndWarnsTheWebhookMayExist(t *testing.T) {
	e := newEnv(t)
	e.fake.FailNext("/v1beta/webhooks", http.StatusInternalServerError, 1)
	res := e.run(t, webhooks.Deps{}, "create", "--uri", "https://example.com/hook")
	if res.code != 1 {
		t.Fatalf("exit %d, want 1", res.code)
	}
	if n := e.fake.Calls("/v1beta/webhooks"); n != 1 {
		t.Errorf("%d create calls, want 1: a retried create could issue a secret nobody sees", n)
	}
	if !strings.Contains(res.stderr, "may have been created") {
		t.Errorf("stderr lacks the may-have-been-created warning:\n%s", res.stderr)
	}
}

func TestRotate(t *testing.T) {
	for _, tc := range []struct {
		flag        []string
		behavior    string
		liveSecrets int // after the rotation
		reminder    string
	}{
		{nil, "revoke_previous_secrets_after_h24", 2, "24 h overlap"},
		{[]string{"--revoke-now"}, "revoke_previous_secrets_immediately", 1, "only with the new secret"},
	} {
		t.Run(tc.behavior, func(t *testing.T) {
			e := newEnv(t)
			id := e.create(t, "https://example.com/hook")
			// Flags after the ID, as an operator types them.
			res := e.run(t, webhooks.Deps{}, append([]string{"rotate", id}, tc.flag...)...)
			if res.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
			}
			reqs := e.requestsTo(http.MethodPost, "/v1beta/webhooks/"+id+":rotateSigningSecret")
			if len(reqs) != 1 {
				t.Fatalf("%d rotate requests, want 1; all: %+v", len(reqs), e.fake.Requests())
			}
			want := map[string]any{"revocation_behavior": tc.behavior}
			if got := decodeBody(t, reqs[0].Body); !reflect.DeepEqual(got, want) {
				t.Errorf("body = %s, want %v", reqs[0].Body, want)
			}
			w, _ := e.fake.Webhook(id)
			if len(w.Secrets) != tc.liveSecrets {
				t.Errorf("live secrets = %d, want %d", len(w.Secrets), tc.liveSecrets)
			}
			newSecret := w.Secrets[0]
			if !slices.Contains(lines(res.stdout), secretLine(newSecret)) || strings.Count(res.stdout, newSecret) != 1 {
				t.Errorf("stdout must carry the new secret once, in its line:\n%s", res.stdout)
			}
			if strings.Contains(res.stderr, newSecret) {
				t.Error("stderr holds the secret")
			}
			if !strings.Contains(res.stderr, tc.reminder) || !strings.Contains(res.stderr, "LROSINK_WEBHOOK_SECRETS") {
				t.Errorf("stderr lacks the reminder %q:\n%s", tc.reminder, res.stderr)
			}
		})
	}
}

func TestRotateStoresTheSecretInSecretManager(t *testing.T) {
	e := newEnv(t)
	id := e.create(t, "https://example.com/hook")
	mem := &memWriter{}
	const name = "projects/p1/secrets/lrosink-webhook"
	res := e.run(t, webhooks.Deps{SecretWriter: mem}, "rotate", "--secret", name, "webhooks/"+id)
	if res.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	w, _ := e.fake.Webhook(id)
	if got := mem.payloads(name); !slices.Equal(got, []string{w.Secrets[0]}) {
		t.Errorf("Secret Manager got %d versions, want exactly the new secret", len(got))
	}
	for _, s := range w.Secrets {
		if strings.Contains(res.stdout+res.stderr, s) {
			t.Error("a secret was printed although it went to Secret Manager")
		}
	}
	if !strings.Contains(res.stdout, name+"/versions/1") {
		t.Errorf("stdout lacks the version name:\n%s", res.stdout)
	}
}

func TestRotateUnknownWebhook(t *testing.T) {
	e := newEnv(t)
	res := e.run(t, webhooks.Deps{}, "rotate", "nope")
	if res.code != 1 || !strings.Contains(res.stderr, "no such webhook") {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

func TestPing(t *testing.T) {
	e := newEnv(t)
	id := e.create(t, "https://example.com/hook")
	res := e.run(t, webhooks.Deps{}, "ping", id)
	if res.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	reqs := e.requestsTo(http.MethodPost, "/v1beta/webhooks/"+id+":ping")
	if len(reqs) != 1 {
		t.Fatalf("%d ping requests, want 1", len(reqs))
	}
	if got := decodeBody(t, reqs[0].Body); len(got) != 0 {
		t.Errorf("ping body = %s, want {}", reqs[0].Body)
	}
	if w, _ := e.fake.Webhook(id); w.Pings != 1 {
		t.Errorf("pings = %d, want 1", w.Pings)
	}
	if !strings.Contains(res.stdout, id) {
		t.Errorf("stdout lacks the id:\n%s", res.stdout)
	}
}

func TestListTable(t *testing.T) {
	e := newEnv(t)
	// No webhook yet: the empty state, not a header alone.
	if res := e.run(t, webhooks.Deps{}, "list"); res.code != 0 || res.stdout != "no webhooks in this project (lrosink webhooks create adds one)\n" {
		t.Fatalf("empty list: exit %d, stdout %q", res.code, res.stdout)
	}
	a := e.create(t, "https://a.example.com/hook")
	res := e.run(t, webhooks.Deps{}, "create", "--uri", "https://b.example.com/hook", "--name", "bee", "--events", "batch.failed")
	if res.code != 0 {
		t.Fatal(res.stderr)
	}
	if res := e.run(t, webhooks.Deps{}, "rotate", a); res.code != 0 {
		t.Fatal(res.stderr)
	}

	res = e.run(t, webhooks.Deps{}, "list")
	if res.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	out := lines(res.stdout)
	if len(out) != 3 {
		t.Fatalf("want a header and 2 rows:\n%s", res.stdout)
	}
	header := strings.Fields(out[0])
	if !slices.Equal(header, []string{"ID", "NAME", "URI", "STATE", "EVENTS", "SECRETS"}) {
		t.Errorf("header = %q", out[0])
	}
	// Aligned: every column starts at the same offset in every line.
	if i := strings.Index(out[0], "URI"); out[1][i-1] != ' ' || out[1][i] == ' ' || out[2][i] == ' ' {
		t.Errorf("URI column not aligned:\n%s", res.stdout)
	}
	hooks := e.fake.Webhooks()
	for i, w := range hooks {
		row := out[i+1]
		for _, want := range []string{w.ID, w.URI, "enabled"} {
			if !strings.Contains(row, want) {
				t.Errorf("row %q lacks %q", row, want)
			}
		}
		for _, s := range w.Secrets {
			if strings.Contains(res.stdout, s) {
				t.Fatal("list printed a full secret")
			}
			if !strings.Contains(row, "whsec_..."+s[len(s)-4:]) {
				t.Errorf("row %q lacks the truncated secret", row)
			}
		}
	}
	if !strings.Contains(out[1], "(until ") {
		t.Errorf("the rotated-out secret shows no expiry: %q", out[1])
	}
	if !strings.Contains(out[2], "bee") || !strings.Contains(out[2], "batch.failed") {
		t.Errorf("row 2 = %q", out[2])
	}
}

func TestListJSONPagesThroughEverything(t *testing.T) {
	e := newEnv(t)
	const n = 105 // more than one page of 100
	for i := range n {
		body := fmt.Sprintf(`{"uri":"https://example.com/%d","subscribed_events":["batch.failed"]}`, i)
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1beta/webhooks", strings.NewReader(body))
		req.Header.Set("x-goog-api-key", fakegemini.DefaultAPIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	res := e.run(t, webhooks.Deps{}, "list", "--json")
	if res.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	var got []struct {
		ID               string   `json:"id"`
		URI              string   `json:"uri"`
		SubscribedEvents []string `json:"subscribed_events"`
		SigningSecrets   []struct {
			TruncatedSecret string `json:"truncated_secret"`
		} `json:"signing_secrets"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatalf("stdout is not a JSON array: %v\n%s", err, res.stdout)
	}
	if len(got) != n || got[n-1].URI != fmt.Sprintf("https://example.com/%d", n-1) {
		t.Fatalf("got %d webhooks, want %d", len(got), n)
	}
	if len(got[0].SigningSecrets) != 1 || !strings.HasPrefix(got[0].SigningSecrets[0].TruncatedSecret, "whsec_...") {
		t.Errorf("secrets = %+v", got[0].SigningSecrets)
	}
	lists := e.requestsTo(http.MethodGet, "/v1beta/webhooks")
	if len(lists) != 2 || lists[1].Query.Get("page_token") == "" {
		t.Errorf("list requests = %+v, want 2, the second with a page_token", lists)
	}
	if strings.Contains(res.stdout, "new_signing_secret") {
		t.Error("list --json has a new_signing_secret field")
	}
}

func TestMissingAPIKey(t *testing.T) {
	for _, args := range [][]string{
		{"create", "--uri", "https://example.com/hook"},
		{"list"},
		{"rotate", "wh1"},
		{"ping", "wh1"},
		{"delete", "wh1"},
	} {
		e := newEnv(t)
		e.apiKey = ""
		res := e.run(t, webhooks.Deps{SecretWriter: &memWriter{}}, args...)
		// A configuration error: exit 2 (CONTRACT.md §1).
		if res.code != 2 || !strings.Contains(res.stderr, "GEMINI_API_KEY") {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming GEMINI_API_KEY", args, res.code, res.stderr)
		}
		if n := e.fake.TotalCalls(); n != 0 {
			t.Errorf("%v: %d calls to Gemini without a key", args, n)
		}
	}
}

func TestUsage(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		code int
		want string // in stdout for 0, stderr otherwise
	}{
		{nil, 2, "Subcommands:"},
		{[]string{"--help"}, 0, "Subcommands:"},
		{[]string{"frobnicate"}, 2, "unknown subcommand"},
		{[]string{"create", "--help"}, 0, "Examples:"},
		{[]string{"help", "rotate"}, 0, "--revoke-now"},
		{[]string{"list", "-h"}, 0, "--json"},
		{[]string{"ping", "--help"}, 0, "lrosink webhooks ping wh_123"},
		{[]string{"create"}, 2, "--uri is required"},
		{[]string{"create", "--uri", "http://example.com/hook"}, 2, "https"},
		{[]string{"create", "--uri", "https://example.com/hook", "--secret", "projects/p/secrets/s/versions/3"}, 2, "--secret"},
		{[]string{"create", "--uri", "https://example.com/hook", "extra"}, 2, "unexpected"},
		{[]string{"rotate"}, 2, "exactly one webhook ID"},
		{[]string{"rotate", "a/b"}, 2, "invalid webhook ID"},
		{[]string{"ping", "a", "b"}, 2, "exactly one webhook ID"},
		{[]string{"list", "--bogus"}, 2, "bogus"},
		{[]string{"delete"}, 2, "exactly one webhook ID"},
		{[]string{"delete", "a/b"}, 2, "invalid webhook ID"},
		{[]string{"delete", "--help"}, 0, "lrosink webhooks delete wh_123"},
	} {
		res := e.run(t, webhooks.Deps{}, tc.args...)
		out := res.stderr
		if tc.code == 0 {
			out = res.stdout
		}
		if res.code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%q: exit %d, want %d with %q in:\n%s", tc.args, res.code, tc.code, tc.want, out)
		}
	}
	if n := e.fake.TotalCalls(); n != 0 {
		t.Errorf("usage errors made %d calls to Gemini", n)
	}
}

// TestNoSecretOrKeyLeaks runs every command, failures included, and checks
// that stderr never carries a signing secret or the API key, and that stdout
// carries a secret only in its one deliberate line, at most once.
func TestNoSecretOrKeyLeaks(t *testing.T) {
	const apiKey = "AIzaSyD-distinctive-test-key-0123456789"
	e := newEnv(t, fakegemini.WithAPIKey(apiKey))
	e.apiKey = apiKey

	secrets := map[string]bool{} // every secret the fake ever issued
	collect := func() {
		for _, w := range e.fake.Webhooks() {
			for _, s := range w.Secrets {
				secrets[s] = true
			}
		}
	}
	var results []result
	run := func(deps webhooks.Deps, args ...string) result {
		res := e.run(t, deps, args...)
		collect()
		results = append(results, res)
		return res
	}

	mem := &memWriter{}
	sm := webhooks.Deps{SecretWriter: mem}
	failing := webhooks.Deps{SecretWriter: &echoingWriter{}}
	run(webhooks.Deps{}, "create", "--uri", "https://example.com/a", "--name", "a")
	run(sm, "create", "--uri", "https://example.com/b", "--secret", "projects/p/secrets/s")
	run(failing, "create", "--uri", "https://example.com/c", "--secret", "projects/p/secrets/s")
	hooks := e.fake.Webhooks()
	if len(hooks) != 3 {
		t.Fatalf("%d webhooks, want 3", len(hooks))
	}
	id := hooks[0].ID
	run(webhooks.Deps{}, "list")
	run(webhooks.Deps{}, "list", "--json")
	run(webhooks.Deps{}, "rotate", id)
	run(sm, "rotate", id, "--secret", "projects/p/secrets/s")
	run(failing, "rotate", id, "--revoke-now", "--secret", "projects/p/secrets/s")
	run(webhooks.Deps{}, "rotate", id, "--revoke-now")
	run(webhooks.Deps{}, "ping", id)
	run(webhooks.Deps{}, "ping", "missing")
	run(webhooks.Deps{}, "rotate", "missing")
	run(webhooks.Deps{}, "create", "--help")
	e.fake.FailNext("", http.StatusInternalServerError, 1)
	run(webhooks.Deps{}, "rotate", id)
	e.fake.FailNext("", http.StatusBadRequest, 1)
	run(webhooks.Deps{}, "list")

	// 3 creates + 4 successful rotations, each a distinct secret.
	if len(secrets) != 7 {
		t.Fatalf("collected %d secrets, want 7", len(secrets))
	}
	stored := len(mem.payloads("projects/p/secrets/s"))
	printedWant := len(secrets) - stored
	printed := map[string]int{}
	for i, res := range results {
		if strings.Contains(res.stderr, apiKey) || strings.Contains(res.stdout, apiKey) {
			t.Errorf("run %d printed the API key", i)
		}
		for s := range secrets {
			if strings.Contains(res.stderr, s) {
				t.Errorf("run %d: stderr holds a signing secret:\n%s", i, res.stderr)
			}
			if strings.Contains(res.stderr, s[len("whsec_"):len("whsec_")+12]) {
				t.Errorf("run %d: stderr holds part of a signing secret", i)
			}
		}
		for _, line := range lines(res.stdout) {
			for s := range secrets {
				if !strings.Contains(line, s) {
					continue
				}
				printed[s]++
				if line != secretLine(s) {
					t.Errorf("run %d: a secret on stdout outside its line: %q", i, line)
				}
			}
		}
	}
	for s, n := range printed {
		if n != 1 {
			t.Errorf("secret ...%s printed %d times, want 1", s[len(s)-4:], n)
		}
	}
	if len(printed) != printedWant {
		t.Errorf("%d secrets printed, want %d (every secret not stored in Secret Manager)", len(printed), printedWant)
	}
}

// readingWriter is a memWriter that can also read the latest version, as
// the production Secret Manager writer can.
type readingWriter struct{ memWriter }

func (m *readingWriter) Latest(_ context.Context, secret string) ([]byte, bool, error) {
	v := m.payloads(secret)
	if len(v) == 0 {
		return nil, false, nil
	}
	return []byte(v[len(v)-1]), true, nil
}

// TestRotateKeepsCurrentSecretsForTheOverlap: the new Secret Manager version
// holds the new secret first and the current ones after it, so lrosink keeps
// accepting deliveries signed with the old secret for Gemini's 24 h overlap;
// with --revoke-now only the new one. No secret reaches stderr.
func TestRotateKeepsCurrentSecretsForTheOverlap(t *testing.T) {
	for _, revoke := range []bool{false, true} {
		e := newEnv(t)
		id := e.create(t, "https://example.com/hook")
		old, _ := e.fake.Webhook(id)
		mem := &readingWriter{}
		const name = "projects/p/secrets/hook"
		if _, err := mem.AddVersion(t.Context(), name, []byte(old.Secrets[0]+",whsec_olderolderolderolderolder")); err != nil {
			t.Fatal(err)
		}
		args := []string{"rotate", id, "--secret", name}
		if revoke {
			args = append(args, "--revoke-now")
		}
		res := e.run(t, webhooks.Deps{SecretWriter: mem}, args...)
		if res.code != 0 {
			t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
		}
		w, _ := e.fake.Webhook(id)
		versions := mem.payloads(name)
		want := w.Secrets[0] + "," + old.Secrets[0] + ",whsec_olderolderolderolderolder"
		if revoke {
			want = w.Secrets[0]
		}
		if got := versions[len(versions)-1]; got != want {
			t.Errorf("revoke=%v: new version %q, want %q", revoke, got, want)
		}
		for _, s := range []string{w.Secrets[0], old.Secrets[0], "whsec_olderolderolderolderolder"} {
			if strings.Contains(res.stderr, s) || strings.Contains(res.stdout, s) {
				t.Errorf("revoke=%v: a secret was printed:\nstdout %s\nstderr %s", revoke, res.stdout, res.stderr)
			}
		}
	}
}

// The help examples name the Secret Manager secret Terraform creates by
// default (terraform/main.tf: webhook_secret_id, else NAME_PREFIX-webhook-secrets,
// with name_prefix's default from variables.tf), so copying an example
// stores the secret where the Webhook service reads it.
func TestHelpNamesTheDeployedSecret(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "terraform", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	prefix := regexp.MustCompile(`(?s)variable "name_prefix" \{.*?default\s*=\s*"([^"]+)"`).FindSubmatch(read("variables.tf"))
	if prefix == nil {
		t.Fatal("terraform/variables.tf: no default for name_prefix")
	}
	derived := regexp.MustCompile(`webhook_secret\s*=\s*coalesce\(var\.webhook_secret_id,\s*"\$\{var\.name_prefix\}([^"]+)"\)`).FindSubmatch(read("main.tf"))
	if derived == nil {
		t.Fatal("terraform/main.tf: webhook_secret is not coalesce(var.webhook_secret_id, \"${var.name_prefix}…\")")
	}
	want := string(prefix[1]) + string(derived[1])
	e := newEnv(t)
	seen := 0
	for _, args := range [][]string{{"--help"}, {"create", "--help"}, {"rotate", "--help"}} {
		res := e.run(t, webhooks.Deps{}, args...)
		for _, s := range regexp.MustCompile(`--secret projects/[^/\s]+/secrets/([a-z][a-z0-9_-]+)`).FindAllStringSubmatch(res.stdout, -1) {
			seen++
			if s[1] != want {
				t.Errorf("%q help names secret %q; Terraform creates %q", args, s[1], want)
			}
		}
	}
	if seen == 0 {
		t.Error("no --secret example in the help texts")
	}
}

// TestWrongKeyHint: the live answer to a wrong key (400 INVALID_ARGUMENT,
// reason API_KEY_INVALID, a DebugInfo detail echoing the key) makes every
// subcommand fail with the "check GEMINI_API_KEY" hint, and the key shows
// nowhere in what the command prints. A key a proxy strips (403
// PERMISSION_DENIED) gets the hint too.
func TestWrongKeyHint(t *testing.T) {
	const wrong = "AIzaSyD-wrong-distinctive-key-0123456789"
	e := newEnv(t)
	e.apiKey = wrong
	for _, args := range [][]string{
		{"create", "--uri", "https://example.com/hook"},
		{"list"}, {"list", "--json"},
		{"rotate", "wh1"}, {"ping", "wh1"}, {"delete", "wh1"},
	} {
		res := e.run(t, webhooks.Deps{}, args...)
		if res.code != 1 || !strings.Contains(res.stderr, "HTTP 400 INVALID_ARGUMENT (API_KEY_INVALID)") ||
			!strings.Contains(res.stderr, "(check GEMINI_API_KEY)") {
			t.Errorf("%v: exit %d, stderr %q; want the key hint", args, res.code, res.stderr)
		}
		if strings.Contains(res.stdout+res.stderr, wrong) || strings.Contains(res.stdout+res.stderr, wrong[8:20]) {
			t.Errorf("%v: the key was printed:\n%s%s", args, res.stdout, res.stderr)
		}
	}
	// The fake echoes the key in its answer, so the check above can fail.
	req, err := http.NewRequest(http.MethodGet, e.url+"/v1beta/webhooks", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-goog-api-key", wrong)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), wrong) {
		t.Fatalf("the fake's answer does not echo the key: %s", body)
	}

	// 403: the key never reached the API.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("x-goog-api-key")
		e.fake.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	e.url = front.URL
	res := e.run(t, webhooks.Deps{}, "list")
	if res.code != 1 || !strings.Contains(res.stderr, "HTTP 403 PERMISSION_DENIED") || !strings.Contains(res.stderr, "(check GEMINI_API_KEY)") {
		t.Errorf("403: exit %d, stderr %q", res.code, res.stderr)
	}
}

// TestKeyCutShortIsNotPrinted: a proxy's 403 echoes the request's headers
// in a plain body, the key straddling the 512-byte bound of the printed
// message. The bound kept a prefix of the key (28 of its 40 characters),
// which exact redaction missed; no part of it may be printed.
func TestKeyCutShortIsNotPrinted(t *testing.T) {
	const key = "AIzaSyD-distinctive-proxy-key-0123456789"
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("Forbidden by proxy policy. " + strings.Repeat("-", 440) + " x-goog-api-key: " + r.Header.Get("x-goog-api-key")))
	}))
	t.Cleanup(front.Close)
	e := newEnv(t)
	e.url, e.apiKey = front.URL, key
	res := e.run(t, webhooks.Deps{}, "list")
	if res.code != 1 || !strings.Contains(res.stderr, "check GEMINI_API_KEY") || !strings.Contains(res.stderr, "[REDACTED]") {
		t.Errorf("exit %d, stderr %q; want 1, the key hint, and the echo redacted", res.code, res.stderr)
	}
	if strings.Contains(res.stdout+res.stderr, key[:12]) {
		t.Errorf("part of the key was printed:\n%s", res.stderr)
	}
}

// TestBadBaseURLIsConfiguration: a GOOGLE_GEMINI_BASE_URL that is no URL
// exits 2 naming the variable, as every other command does, before
// anything is sent. It used to fail at the request (exit 1) and tell the
// operator the webhook "may have been created anyway".
func TestBadBaseURLIsConfiguration(t *testing.T) {
	e := newEnv(t)
	e.url = "not a url"
	for _, args := range [][]string{{"create", "--uri", "https://example.com/h"}, {"rotate", "wh1"}, {"list"}} {
		res := e.run(t, webhooks.Deps{}, args...)
		if res.code != 2 || !strings.Contains(res.stderr, "GOOGLE_GEMINI_BASE_URL") || strings.Contains(res.stderr, "anyway") {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming GOOGLE_GEMINI_BASE_URL", args, res.code, res.stderr)
		}
	}
}
