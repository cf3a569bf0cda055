package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
	"github.com/lrosink/lrosink/submit"
)

// submitWorld is `lrosink serve` (a real process: SQLite ledger, file:
// results, a static webhook secret, the reconciler and the door asking
// the fake Gemini through the real genai SDK) and the fake, in the test.
type submitWorld struct {
	bin, dir, results, secret string
	fake                      *fakegemini.Server
	gemURL                    string
	serve                     *proc
}

func newSubmitWorld(t *testing.T, bin string) *submitWorld {
	t.Helper()
	w := &submitWorld{bin: bin, dir: t.TempDir(), secret: webhooktest.NewSecret(), fake: fakegemini.New()}
	w.gemURL = w.fake.Start(t).URL
	w.results = filepath.Join(w.dir, "results.jsonl")
	// LROSINK_GRACE's default (90 s) keeps the reconcile passes from
	// polling what the test delivers: every settlement here is a delivery's.
	w.serve = serve(t, bin, w.dir, []string{"LROSINK_WEBHOOK_SECRETS=" + w.secret, "LROSINK_RESULTS=file:" + w.results,
		"GEMINI_API_KEY=" + fakegemini.DefaultAPIKey, "GOOGLE_GEMINI_BASE_URL=" + w.gemURL, "LROSINK_RECONCILE_EVERY=24h"})
	// serve's first pass runs as it starts, and its adoption lists batches
	// (grace or not): one that met a batch between its create and its
	// submitter's bind would bind it first. The next is a day off: the
	// tests ask for the passes they mean (POST /Reconcile).
	waitFor(t, "serve's first reconcile pass", func() bool {
		return strings.Contains(w.serve.stderr.String(), `"message":"reconcile pass"`)
	})
	return w
}

// submitCLI runs `lrosink submit ARGS` against serve's Register function,
// with LROSINK_FAULT=fault when it is set (the faultinject build).
func (w *submitWorld) submitCLI(t *testing.T, fault string, args ...string) (string, string, int) {
	t.Helper()
	env := []string{"GEMINI_API_KEY=" + fakegemini.DefaultAPIKey, "GOOGLE_GEMINI_BASE_URL=" + w.gemURL,
		"LROSINK_REGISTER_URL=" + w.serve.base + "/Register"}
	if fault != "" {
		env = append(env, "LROSINK_FAULT="+fault)
	}
	return runWith(t, w.bin, w.dir, env, append([]string{"submit"}, args...)...)
}

// cliArgs are `lrosink submit`'s arguments for kind under key.
func cliArgs(kind, key string) []string {
	switch kind {
	case submit.KindBatch:
		return []string{"batch", "--model", "gemini-2.5-flash", "--input", "REQUESTS", "--key", key, "--meta", "team=data"}
	case submit.KindVideo:
		return []string{"video", "--model", "veo-3.0-generate-001", "--prompt", "a red balloon", "--key", key, "--meta", "team=data"}
	case "agent":
		return []string{"interaction", "--agent", "deep-research-pro-preview-12-2025", "--input", "bicycles", "--key", key, "--meta", "team=data"}
	}
	return []string{"interaction", "--model", "gemini-2.5-flash", "--input", "hello", "--key", key, "--meta", "team=data"}
}

// fakeKind is the fake's create counter of kind.
func fakeKind(kind string) string {
	if kind == "agent" {
		return fakegemini.KindInteraction
	}
	return kind
}

// finish makes the operation apiName terminal (succeeded) in the fake and
// returns the event type its delivery has.
func (w *submitWorld) finish(t *testing.T, apiName string) string {
	t.Helper()
	segs := strings.Split(apiName, "/")
	now := time.Now().UTC()
	switch segs[0] {
	case "batches":
		st, _ := w.fake.Batch(segs[1])
		st.State, st.UpdateTime, st.ResponsesFile = "BATCH_STATE_SUCCEEDED", now, "files/out-"+segs[1]
		w.fake.SetBatch(segs[1], st)
		return "batch.succeeded"
	case "models":
		st, _ := w.fake.Video(segs[1], segs[3])
		st.Done, st.VideoURIs = true, []string{"https://video.example/" + segs[3] + ".mp4"}
		w.fake.SetVideo(segs[1], segs[3], st)
		return "video.generated"
	}
	st, _ := w.fake.Interaction(segs[1])
	st.Status, st.Updated, st.OutputText = "completed", now, "done"
	w.fake.SetInteraction(segs[1], st)
	return "interaction.completed"
}

// deliver sends the fake's delivery about apiName, v1-signed with serve's
// secret, as Gemini's static webhook would, and returns the answer.
func (w *submitWorld) deliver(t *testing.T, apiName, typ, msgID string) (int, map[string]string) {
	t.Helper()
	b, err := w.fake.Delivery(apiName, typ, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, w.serve.base+"/Webhook", bytes.NewReader(b))
	req.Header = webhooktest.Headers(msgID, time.Now(), b, w.secret)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a
}

// messages are the results lines about operation (canonical name), their
// metadata as the JSON text the file holds.
func (w *submitWorld) messages(t *testing.T, operation string) []string {
	t.Helper()
	var out []string
	for _, l := range wholeLines(t, w.results) {
		var m struct {
			Operation    string          `json:"operation"`
			UserMetadata json.RawMessage `json:"user_metadata"`
		}
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("results line %q: %v", l, err)
		}
		if m.Operation == operation {
			out = append(out, string(m.UserMetadata))
		}
	}
	return out
}

// opShow is what the test reads of `ops show --json`.
type opShow struct {
	Intent       string         `json:"intent"`
	UserMetadata map[string]any `json:"user_metadata"`
	History      []struct {
		Source, Reason string
	} `json:"history"`
	Deliveries []struct {
		Reason string `json:"reason"`
	} `json:"deliveries"`
}

func (w *submitWorld) show(t *testing.T, name string) opShow {
	t.Helper()
	out, errOut, code := runCLI(t, w.bin, w.dir, "ops", "show", name, "--json")
	var s opShow
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
		t.Fatalf("ops show %s: exit %d, %q %q", name, code, out, errOut)
	}
	return s
}

// boundBy reports who the history says bound the operation's intent ("" if
// nobody did).
func (s opShow) boundBy() string {
	for _, h := range s.History {
		if strings.Contains(h.Reason, "bound-intent") {
			return h.Source
		}
	}
	return ""
}

// TestSubmitAcceptance (issue #48): submissions through the real genai SDK
// against the fake Gemini, bound by a real `lrosink serve`; the fake counts
// every create.
func TestSubmitAcceptance(t *testing.T) {
	bin := build(t, "faultinject")
	t.Run("EachKindDeliveredOnce", func(t *testing.T) { testEachKindDeliveredOnce(t, bin) })
	t.Run("KilledBetweenCreateAndBind", func(t *testing.T) { testKilledBetweenCreateAndBind(t, bin) })
}

// testEachKindDeliveredOnce: per kind (batch, video, interaction, agent
// interaction), package submit records the intent at serve's Register
// function, creates the operation and binds it; Gemini's delivery (twice)
// gives exactly one results message, whose user_metadata is the caller's
// exactly, a big integer included (and no intent key). One create per key.
func testEachKindDeliveredOnce(t *testing.T, bin string) {
	w := newSubmitWorld(t, bin)
	g, err := submit.NewGemini(submit.GeminiConfig{APIKey: fakegemini.DefaultAPIKey, BaseURL: w.gemURL})
	if err != nil {
		t.Fatal(err)
	}
	c, err := submit.New(g, submit.HTTP(w.serve.base+"/Register", nil), submit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	meta := func() map[string]any {
		return map[string]any{"campaign": json.Number("12345678901234567890123"), "team": "data"}
	}
	const wantMeta = `{"campaign":12345678901234567890123,"team":"data"}`
	input := `{"key":"q1","request":{"contents":[{"parts":[{"text":"Why is the sky blue?"}]}]}}` + "\n"
	for _, kind := range []string{submit.KindBatch, submit.KindVideo, submit.KindInteraction, "agent"} {
		t.Run(kind, func(t *testing.T) {
			key := "each-" + kind
			before := w.fake.Creates(fakeKind(kind))
			var sub submit.Submission
			var err error
			switch kind {
			case submit.KindBatch:
				sub, err = c.Batch(t.Context(), submit.Batch{Key: key, Model: "gemini-2.5-flash", Input: strings.NewReader(input),
					InputSize: int64(len(input)), Metadata: meta()})
			case submit.KindVideo:
				sub, err = c.Video(t.Context(), submit.Video{Key: key, Model: "veo-3.0-generate-001", Prompt: "waves", Metadata: meta()})
			case "agent":
				sub, err = c.Interaction(t.Context(), submit.Interaction{Key: key, Agent: "deep-research-pro-preview-12-2025", Input: "bicycles", Metadata: meta()})
			default:
				sub, err = c.Interaction(t.Context(), submit.Interaction{Key: key, Model: "gemini-2.5-flash", Input: "hello", Metadata: meta()})
			}
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
			typ := w.finish(t, sub.APIName)
			for i, want := range []string{"completed", "duplicate"} {
				if code, a := w.deliver(t, sub.APIName, typ, fmt.Sprintf("msg_%s_%d", key, i)); code != http.StatusOK || a["outcome"] != want {
					t.Fatalf("delivery %d: %d %v, want 200 %s", i, code, a, want)
				}
			}
			if got := w.messages(t, sub.Operation); len(got) != 1 || got[0] != wantMeta {
				t.Fatalf("results for %s: %q, want one message with user_metadata %s", sub.Operation, got, wantMeta)
			}
			if s := w.show(t, sub.Operation); s.Intent != key || s.boundBy() != "register" {
				t.Errorf("%s: intent %q bound by %q, want %s bound by the submitter's registration", sub.Operation, s.Intent, s.boundBy(), key)
			}
			if n := w.fake.Creates(fakeKind(kind)) - before; n != 1 {
				t.Errorf("%d creates for key %s, want 1", n, key)
			}
		})
	}
}

// testKilledBetweenCreateAndBind: `lrosink submit` is killed (exit 137,
// the faultinject build's LROSINK_FAULT=crash-before-bind) after its
// create and before its bind. Per kind, nothing is lost and nothing is
// created twice: the delivery binds a video's or an interaction's intent
// (a retried submit refuses until then, and answers the operation after);
// the reconciler's adoption finds a batch, and so does a retried submit.
// Exactly one create per key in every case but an explicit --force.
func testKilledBetweenCreateAndBind(t *testing.T, bin string) {
	w := newSubmitWorld(t, bin)
	requests := filepath.Join(w.dir, "requests.jsonl")
	if err := os.WriteFile(requests, []byte(`{"key":"q1","request":{"contents":[{"parts":[{"text":"one"}]}]}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	argsOf := func(kind, key string) []string {
		a := cliArgs(kind, key)
		for i := range a {
			if a[i] == "REQUESTS" {
				a[i] = requests
			}
		}
		return a
	}
	// crash submits kind under key in a process killed before its bind and
	// returns the API name the fake created.
	crash := func(t *testing.T, kind, key string) string {
		t.Helper()
		before := w.fake.Creates(fakeKind(kind))
		_, errOut, code := w.submitCLI(t, "crash-before-bind", argsOf(kind, key)...)
		if code != 137 || !strings.Contains(errOut, "intent key "+key) || !strings.Contains(errOut, "crashing before binding") {
			t.Fatalf("killed submit: exit %d, stderr %q; want 137 after the key was printed", code, errOut)
		}
		if n := w.fake.Creates(fakeKind(kind)) - before; n != 1 {
			t.Fatalf("%d creates by the killed submit, want 1", n)
		}
		_, api, _ := strings.Cut(errOut, "crashing before binding ")
		api, _, _ = strings.Cut(api, " ")
		return api
	}
	retry := func(t *testing.T, kind, key string, extra ...string) (string, string, int) {
		t.Helper()
		return w.submitCLI(t, "", append(argsOf(kind, key), extra...)...)
	}
	canonical := func(api string) string {
		if strings.HasPrefix(api, "models/") {
			return api[strings.Index(api, "operations/"):]
		}
		return api
	}
	const wantMeta = `{"team":"data"}`

	for _, kind := range []string{submit.KindVideo, submit.KindInteraction, "agent"} {
		t.Run(kind+"/delivery binds", func(t *testing.T) {
			key := "crash-" + kind
			api := crash(t, kind, key)
			before := w.fake.Creates(fakeKind(kind))
			// No list to find it by: the retry refuses while the intent is
			// unbound and in its grace, creating nothing.
			if out, errOut, code := retry(t, kind, key); code != 1 || !strings.Contains(errOut, "is not bound to a Gemini operation yet") ||
				!strings.Contains(errOut, "--force") || out != "" {
				t.Fatalf("retry while unbound: exit %d, %q %q", code, out, errOut)
			}
			typ := w.finish(t, api)
			if code, a := w.deliver(t, api, typ, "msg_"+key); code != http.StatusOK || a["outcome"] != "completed" || a["reason"] != "bound-intent" {
				t.Fatalf("delivery: %d %v, want 200 completed, bound-intent", code, a)
			}
			s := w.show(t, canonical(api))
			if s.Intent != key || s.boundBy() != "webhook" || len(s.Deliveries) == 0 || s.Deliveries[0].Reason != "bound-intent" {
				t.Fatalf("%s: %+v, want its intent %s bound by the webhook, the delivery log saying bound-intent", api, s, key)
			}
			if got := w.messages(t, canonical(api)); len(got) != 1 || got[0] != wantMeta {
				t.Fatalf("results %q, want one message with %s", got, wantMeta)
			}
			out, errOut, code := retry(t, kind, key)
			if code != 0 || !strings.Contains(out, "operation   "+api) || !strings.Contains(out, "existing") {
				t.Fatalf("retry once bound: exit %d, %q %q", code, out, errOut)
			}
			if n := w.fake.Creates(fakeKind(kind)) - before; n != 0 {
				t.Errorf("%d creates after the killed one, want 0", n)
			}
		})
	}

	t.Run("batch/adoption finds it", func(t *testing.T) {
		key := "crash-batch-adopt"
		api := crash(t, submit.KindBatch, key)
		resp, err := http.Post(w.serve.base+"/Reconcile", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var sum map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(raw, &sum) != nil || sum["intents_bound"] != float64(1) {
			t.Fatalf("reconcile: %d %s, want intents_bound 1", resp.StatusCode, raw)
		}
		if s := w.show(t, api); s.Intent != key || s.boundBy() != "reconcile" || s.UserMetadata["team"] != "data" {
			t.Fatalf("%s: %+v, want it adopted as the registration of %s", api, s, key)
		}
		before := w.fake.Creates(fakegemini.KindBatch)
		if out, errOut, code := retry(t, submit.KindBatch, key); code != 0 || !strings.Contains(out, "existing") {
			t.Fatalf("retry: exit %d, %q %q", code, out, errOut)
		}
		typ := w.finish(t, api)
		if code, a := w.deliver(t, api, typ, "msg_"+key); code != http.StatusOK || a["outcome"] != "completed" {
			t.Fatalf("delivery: %d %v", code, a)
		}
		if got := w.messages(t, api); len(got) != 1 || got[0] != wantMeta {
			t.Fatalf("results %q, want one message with %s", got, wantMeta)
		}
		if n := w.fake.Creates(fakegemini.KindBatch) - before; n != 0 {
			t.Errorf("%d creates after the killed one, want 0", n)
		}
	})

	t.Run("batch/retried submit finds it", func(t *testing.T) {
		key := "crash-batch-retry"
		api := crash(t, submit.KindBatch, key)
		before := w.fake.Creates(fakegemini.KindBatch)
		out, errOut, code := retry(t, submit.KindBatch, key)
		if code != 0 || !strings.Contains(out, "operation   "+api) || !strings.Contains(out, "existing") {
			t.Fatalf("retry: exit %d, %q %q; want the listed %s", code, out, errOut, api)
		}
		if s := w.show(t, api); s.Intent != key {
			t.Fatalf("%s: intent %q, want %s", api, s.Intent, key)
		}
		if n := w.fake.Creates(fakegemini.KindBatch) - before; n != 0 {
			t.Errorf("%d creates after the killed one, want 0", n)
		}
	})

	t.Run("video/force creates anew", func(t *testing.T) {
		key := "crash-force"
		first := crash(t, submit.KindVideo, key)
		before := w.fake.Creates(fakegemini.KindVideo)
		out, errOut, code := retry(t, submit.KindVideo, key, "--force")
		if code != 0 || strings.Contains(out, first) {
			t.Fatalf("forced: exit %d, %q %q; want a new operation", code, out, errOut)
		}
		if n := w.fake.Creates(fakegemini.KindVideo) - before; n != 1 {
			t.Errorf("%d creates by --force, want 1 (the explicit exception)", n)
		}
		// The first operation's late delivery is registered on its own,
		// never lost: its intent is bound to the forced one.
		typ := w.finish(t, first)
		if code, a := w.deliver(t, first, typ, "msg_late_"+key); code != http.StatusOK || a["outcome"] != "completed" || a["reason"] != "intent-bound-elsewhere" {
			t.Fatalf("late delivery of the first: %d %v, want completed, intent-bound-elsewhere", code, a)
		}
		if s := w.show(t, canonical(first)); s.Intent != "" || s.UserMetadata["team"] != "data" {
			t.Fatalf("first operation %+v: want it registered, bound to no intent", s)
		}
	})
}
