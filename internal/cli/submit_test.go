package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/app/apptest"
	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/register"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/submit"
)

// submitEnv is a fake Gemini and lrosink's own Register function (serve's
// handlers over a SQLite ledger, guarded by an admin token) over real
// HTTP, and the environment that points `lrosink submit` at them.
type submitEnv struct {
	fake     *fakegemini.Server
	reg      *apptest.Server
	requests atomic.Int64 // answered by the Register function's server
	env      map[string]string
}

const submitToken = "0123456789abcdef-admin"

func newSubmitEnv(t *testing.T, fakeOpts ...fakegemini.Option) *submitEnv {
	t.Helper()
	s := &submitEnv{fake: fakegemini.New(fakeOpts...)}
	s.reg = apptest.Start(t, apptest.Options{Config: func(c *config.Config) { c.AdminToken = submitToken },
		Wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.requests.Add(1); h.ServeHTTP(w, r) })
		}})
	s.env = map[string]string{
		"GEMINI_API_KEY": fakegemini.DefaultAPIKey, "GOOGLE_GEMINI_BASE_URL": s.fake.Start(t).URL,
		"LROSINK_REGISTER_URL": s.reg.RegisterURL(), "LROSINK_ADMIN_TOKEN": submitToken,
	}
	return s
}

func (s *submitEnv) creates() int {
	return s.fake.Creates(fakegemini.KindBatch) + s.fake.Creates(fakegemini.KindVideo) + s.fake.Creates(fakegemini.KindInteraction)
}

func writeJSONL(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "requests.jsonl")
	data := `{"key":"q1","request":{"contents":[{"parts":[{"text":"Why is the sky blue?"}]}]}}` + "\n"
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

var keyLine = regexp.MustCompile(`^lrosink submit (batch|video|interaction): intent key (int_[0-9a-f]{20}|[^ ]+) \(if this does not finish, run it again with --key `)

// TestSubmitBatchCommand: `lrosink submit batch` records the intent (with
// the admin token), creates one batch carrying the key and --meta in its
// user_metadata, binds it, and prints the operation, the key and how
// completion arrives; the key was on stderr first.
func TestSubmitBatchCommand(t *testing.T) {
	s := newSubmitEnv(t)
	r := run(t, s.env, "submit", "batch", "--model", "gemini-2.5-flash", "--input", writeJSONL(t), "--meta", "job=nightly")
	if r.code != command.ExitOK {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	m := keyLine.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("stderr %q does not start with the intent key", r.stderr)
	}
	key := m[2]
	want := regexp.MustCompile(`^operation   batches/batch-000001\nintent      ` + key + `\ncompletion  polling: the project has no enabled webhook`)
	if !want.MatchString(r.stdout) {
		t.Errorf("stdout %q", r.stdout)
	}
	st, ok := s.fake.Batch("batch-000001")
	if !ok || st.Webhook.UserMetadata["lrosink_intent"] != key || st.Webhook.UserMetadata["job"] != "nightly" || st.DisplayName != "lrosink-"+key {
		t.Errorf("batch %+v", st)
	}
	if in, _ := s.reg.Intent(t, key); in.State != register.StateBound || in.APIName != "batches/batch-000001" {
		t.Errorf("intent %+v", in)
	}
	// The same key again: the bound operation, nothing created.
	r = run(t, s.env, "submit", "batch", "--model", "gemini-2.5-flash", "--input", writeJSONL(t), "--meta", "job=nightly", "--key", key, "--json")
	var out map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out["existing"] != true || out["operation"] != "batches/batch-000001" ||
		out["intent"] != key || out["completion"] != "polling" {
		t.Errorf("retry: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if s.creates() != 1 {
		t.Errorf("%d creates, want 1", s.creates())
	}
}

// TestSubmitVideoRetry: a create whose answer is lost (the connection
// dropped) leaves the key on stderr; the same key again is refused while
// the intent is unbound (exit 1, naming --force); --force creates it.
func TestSubmitVideoRetry(t *testing.T) {
	s := newSubmitEnv(t)
	s.fake.FailNext("/v1beta/models/veo-3.0-generate-001:predictLongRunning", fakegemini.Drop, 1)
	args := []string{"submit", "video", "--model", "veo-3.0-generate-001", "--prompt", "a red balloon", "--key", "promo-7"}
	r := run(t, s.env, args...)
	if r.code != command.ExitError || !keyLine.MatchString(r.stderr) || !strings.Contains(r.stderr, "may have created the operation") {
		t.Fatalf("lost create: exit %d, stderr %q", r.code, r.stderr)
	}
	r = run(t, s.env, args...)
	if r.code != command.ExitError || !strings.Contains(r.stderr, "intent promo-7 (video)") || !strings.Contains(r.stderr, "--force") || r.stdout != "" {
		t.Fatalf("retry: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = run(t, s.env, append(args, "--force")...)
	if r.code != 0 || !strings.Contains(r.stdout, "operation   models/veo-3.0-generate-001/operations/video-000001") {
		t.Fatalf("forced: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if s.creates() != 1 {
		t.Errorf("%d creates, want 1 (the dropped one never reached the fake)", s.creates())
	}
}

// TestSubmitInteractionCommand: an agent interaction with a dynamic
// webhook URI says completion arrives by that webhook.
func TestSubmitInteractionCommand(t *testing.T) {
	s := newSubmitEnv(t)
	r := run(t, s.env, "submit", "interaction", "--agent", "deep-research-pro-preview-12-2025", "--input", "history of the bicycle",
		"--webhook-uri", "https://lrosink.example/Webhook")
	if r.code != 0 || !strings.Contains(r.stdout, "operation   interactions/v1_interaction000001") ||
		!strings.Contains(r.stdout, "completion  webhook: a dynamic webhook: Gemini delivers to https://lrosink.example/Webhook") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	st, _ := s.fake.Interaction("v1_interaction000001")
	if st.Agent != "deep-research-pro-preview-12-2025" || len(st.Webhook.URIs) != 1 {
		t.Errorf("interaction %+v", st)
	}
}

// TestSubmitRefusals: what is refused before anything is sent, with the
// exit status of a usage or configuration error; a refused key is never
// printed.
func TestSubmitRefusals(t *testing.T) {
	s := newSubmitEnv(t)
	without := func(keys ...string) map[string]string {
		env := map[string]string{}
		for k, v := range s.env {
			env[k] = v
		}
		for _, k := range keys {
			delete(env, k)
		}
		return env
	}
	input := writeJSONL(t)
	for _, c := range []struct {
		env  map[string]string
		args []string
		code int
		want string
	}{
		{without("GEMINI_API_KEY"), []string{"submit", "video", "--model", "veo", "--prompt", "p"}, 2, "GEMINI_API_KEY is not set"},
		{without("LROSINK_REGISTER_URL"), []string{"submit", "video", "--model", "veo", "--prompt", "p", "--store", "mysql:x"}, 2, "--store"},
		{s.env, []string{"submit", "video", "--model", "veo"}, 2, "--model and --prompt are required"},
		{s.env, []string{"submit", "batch", "--model", "m"}, 2, "--model and --input are required"},
		{s.env, []string{"submit", "batch", "--model", "m", "--input", "/no/such/file"}, 2, "--input"},
		{s.env, []string{"submit", "interaction", "--model", "m", "--agent", "a", "--input", "x"}, 2, "exactly one of --model and --agent"},
		{s.env, []string{"submit", "video", "--model", "veo", "--prompt", "p", "--key", "a b"}, 2, "--key: intent key"},
		{s.env, []string{"submit", "video", "--model", "veo", "--prompt", "p", "--meta", "lrosink_intent=x"}, 2, "is reserved"},
		{s.env, []string{"submit", "video", "--model", "veo", "--prompt", "p", "--webhook-uri", "ftp://x"}, 2, "--webhook-uri"},
		{s.env, []string{"submit", "batch", "--model", "m", "--input", input, "--register-url", "nope"}, 2, "is not an http(s) URL"},
	} {
		r := run(t, c.env, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d with %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
	if n := s.requests.Load(); n != 0 || len(s.fake.Requests()) != 0 {
		t.Errorf("%d Register requests, %d Gemini requests; want none", n, len(s.fake.Requests()))
	}
	// A key Gemini refuses: exit 1, "check GEMINI_API_KEY", the key nowhere.
	const wrong = "AIzaSyWRONG-0123456789abcdefghijkl"
	env := without()
	env["GEMINI_API_KEY"] = wrong
	r := run(t, env, "submit", "video", "--model", "veo", "--prompt", "p")
	if r.code != 1 || !strings.Contains(r.stderr, "check GEMINI_API_KEY") || strings.Contains(r.stderr+r.stdout, wrong) {
		t.Errorf("wrong key: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// Without the admin token the Register function refuses, and says what to check.
	r = run(t, without("LROSINK_ADMIN_TOKEN"), "submit", "video", "--model", "veo", "--prompt", "p")
	if r.code != 1 || !strings.Contains(r.stderr, "LROSINK_ADMIN_TOKEN") || s.creates() != 0 {
		t.Errorf("no token: exit %d, stderr %q, %d creates", r.code, r.stderr, s.creates())
	}
}

// TestSubmitEmbedded: without a Register URL, `lrosink submit` records and
// binds straight into the ledger of --store (or LROSINK_STORE), the same
// intent path as POST /Register: the operation is registered with the
// caller's metadata, and `ops show` shows it bound to its intent.
func TestSubmitEmbedded(t *testing.T) {
	s := newSubmitEnv(t)
	env := map[string]string{"GEMINI_API_KEY": s.env["GEMINI_API_KEY"], "GOOGLE_GEMINI_BASE_URL": s.env["GOOGLE_GEMINI_BASE_URL"]}
	store := "sqlite:" + filepath.Join(t.TempDir(), "ledger.db")
	args := []string{"submit", "video", "--model", "veo-3.0-generate-001", "--prompt", "waves", "--key", "emb-1",
		"--meta", "job=42", "--store", store, "--json"}
	// No ledger there: refused before anything is created at Gemini, as
	// every command but serve refuses one (issue #50); --create means it.
	r := run(t, env, args...)
	if r.code != command.ExitUsage || !strings.Contains(r.stderr, "no ledger at "+strings.TrimPrefix(store, "sqlite:")) || s.creates() != 0 {
		t.Fatalf("embedded submit without a ledger: exit %d, stderr %q, %d creates", r.code, r.stderr, s.creates())
	}
	r = run(t, env, append(slices.Clone(args), "--create")...)
	if !strings.Contains(r.stderr, "lrosink submit video: ledger "+store+" (new: created now)\n") {
		t.Errorf("embedded submit --create: stderr %q does not name the new ledger", r.stderr)
	}
	var out map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out["api_name"] != "models/veo-3.0-generate-001/operations/video-000001" {
		t.Fatalf("embedded submit: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if n := s.requests.Load(); n != 0 {
		t.Errorf("%d requests to the Register function; the embedded path makes none", n)
	}
	env["LROSINK_STORE"] = store
	r = run(t, env, "ops", "show", "operations/video-000001", "--json")
	var op map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &op) != nil {
		t.Fatalf("ops show: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if md, _ := op["user_metadata"].(map[string]any); md["job"] != "42" || md["lrosink_intent"] != nil || op["intent"] != "emb-1" {
		t.Errorf("the operation %v: want the caller's metadata and its intent emb-1", op)
	}
	r = run(t, env, args[:len(args)-1]...)
	if r.code != 0 || !strings.Contains(r.stdout, "existing") || s.creates() != 1 {
		t.Fatalf("the same key again: exit %d, %q %q, %d creates", r.code, r.stdout, r.stderr, s.creates())
	}
}

// diesBeforeBind is a submitter killed between its create and its bind:
// the create went out, the bind never arrives.
type diesBeforeBind struct{ submit.Intents }

func (diesBeforeBind) Bind(context.Context, string, string) (submit.IntentStatus, error) {
	return submit.IntentStatus{}, errors.New("killed")
}

// TestDroppedVideoIsAlertedAndListed (issue #48): a video whose submitter
// died before binding it and whose delivery is dropped (a kind with no
// list: nothing else can find it) is, after LROSINK_INTENT_GRACE, alerted
// by the reconcile pass (intent-unbound, counted in intents_unbound),
// listed by `ops list --stuck --json` and on the console's Stuck page, and
// a retried submit still creates nothing.
func TestDroppedVideoIsAlertedAndListed(t *testing.T) {
	clock := testutil.NewClock(time.Now().Add(-2 * time.Hour))
	logs := &testutil.SyncBuffer{}
	reg := apptest.Start(t, apptest.Options{Now: clock.Now, Logs: logs, Config: func(c *config.Config) { c.IntentGrace = time.Hour }})
	fake := fakegemini.New()
	gurl := fake.Start(t).URL
	g, err := submit.NewGemini(submit.GeminiConfig{APIKey: fakegemini.DefaultAPIKey, BaseURL: gurl})
	if err != nil {
		t.Fatal(err)
	}
	c, err := submit.New(g, diesBeforeBind{submit.HTTP(reg.RegisterURL(), nil)}, submit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var be *submit.BindError
	if _, err := c.Video(t.Context(), submit.Video{Key: "dropped-1", Model: "veo-3.0-generate-001", Prompt: "waves",
		Metadata: map[string]any{"secret": "do-not-show"}}); !errors.As(err, &be) {
		t.Fatalf("the dying submit: %v, want a BindError", err)
	}
	// Two hours later, the delivery never came: a pass alerts it.
	clock.Set(time.Now())
	resp, err := http.Post(reg.URL+"/Reconcile", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&sum)
	resp.Body.Close()
	if sum["intents_unbound"] != float64(1) || logs.CountLines(`"alert":"intent-unbound"`) != 1 || logs.CountLines(`"intent":"dropped-1"`) == 0 {
		t.Fatalf("reconcile pass %v; log:\n%s\nwant intents_unbound 1 and one intent-unbound alert naming dropped-1", sum, logs)
	}
	r := run(t, map[string]string{"LROSINK_STORE": reg.Store}, "ops", "list", "--stuck", "--json")
	var rows []map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rows) != nil || len(rows) != 1 || rows[0]["intent"] != "dropped-1" ||
		rows[0]["kind"] != "video" || rows[0]["model"] != "models/veo-3.0-generate-001" || rows[0]["alerted_at"] == nil {
		t.Fatalf("ops list --stuck --json: exit %d, %q %q; want the alerted intent dropped-1", r.code, r.stdout, r.stderr)
	}
	page, err := http.Get(reg.URL + "/ui/stuck")
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if !strings.Contains(string(html), ">dropped-1<") || !strings.Contains(string(html), "models/veo-3.0-generate-001") || strings.Contains(string(html), "do-not-show") {
		t.Fatalf("the console's Stuck page does not list dropped-1 (or shows its metadata):\n%s", html)
	}
	env := map[string]string{"GEMINI_API_KEY": fakegemini.DefaultAPIKey, "GOOGLE_GEMINI_BASE_URL": gurl, "LROSINK_REGISTER_URL": reg.RegisterURL()}
	r = run(t, env, "submit", "video", "--model", "veo-3.0-generate-001", "--prompt", "waves", "--key", "dropped-1", "--meta", "secret=do-not-show")
	if r.code != command.ExitError || !strings.Contains(r.stderr, "alerted (intent-unbound)") {
		t.Fatalf("retry past grace: exit %d, %q; want refused, alerted", r.code, r.stderr)
	}
	if n := fake.Creates(fakegemini.KindVideo); n != 1 {
		t.Fatalf("%d creates, want 1", n)
	}
}
