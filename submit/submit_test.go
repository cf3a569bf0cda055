package submit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/app/apptest"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/submit"
)

// harness is a Client on the fake Gemini and lrosink's own Register
// function (apptest: serve's handlers over a SQLite ledger), both over real
// HTTP.
type harness struct {
	fake   *fakegemini.Server
	reg    *apptest.Server
	regURL string
	gem    *submit.Gemini
}

func newHarness(t *testing.T, o ...apptest.Options) *harness {
	t.Helper()
	h := &harness{fake: fakegemini.New()}
	gurl := h.fake.Start(t).URL
	var opts apptest.Options
	if len(o) > 0 {
		opts = o[0]
	}
	h.reg = apptest.Start(t, opts)
	h.regURL = h.reg.RegisterURL()
	g, err := submit.NewGemini(submit.GeminiConfig{APIKey: fakegemini.DefaultAPIKey, BaseURL: gurl})
	if err != nil {
		t.Fatal(err)
	}
	h.gem = g
	return h
}

func (h *harness) client(t *testing.T, o submit.Options, wrap ...func(submit.Intents) submit.Intents) *submit.Client {
	t.Helper()
	in := submit.HTTP(h.regURL, nil)
	for _, w := range wrap {
		in = w(in)
	}
	c, err := submit.New(h.gem, in, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// creates is every create the fake made.
func (h *harness) creates() int {
	return h.fake.Creates(fakegemini.KindBatch) + h.fake.Creates(fakegemini.KindVideo) + h.fake.Creates(fakegemini.KindInteraction)
}

// killedBeforeBind is the process dying between the create and the bind:
// the create went out, the bind never arrives.
type killedBeforeBind struct{ submit.Intents }

func (killedBeforeBind) Bind(context.Context, string, string) (submit.IntentStatus, error) {
	return submit.IntentStatus{}, errors.New("process killed")
}

func crash(in submit.Intents) submit.Intents { return killedBeforeBind{in} }

const jsonl = `{"key":"r1","request":{"contents":[{"parts":[{"text":"one"}]}]}}
{"key":"r2","request":{"contents":[{"parts":[{"text":"two"}]}]}}
`

func batchReq(key string) submit.Batch {
	return submit.Batch{Key: key, Model: "gemini-2.5-flash", Input: strings.NewReader(jsonl), InputSize: int64(len(jsonl)),
		Metadata: map[string]any{"job_id": json.Number("12345678901234567890"), "team": "data"}}
}

// submitKind submits one operation of kind under key with c.
func submitKind(t *testing.T, c *submit.Client, kind, key string, force bool) (submit.Submission, error) {
	t.Helper()
	meta := map[string]any{"job_id": json.Number("12345678901234567890")}
	switch kind {
	case submit.KindBatch:
		b := batchReq(key)
		b.Force = force
		return c.Batch(t.Context(), b)
	case submit.KindVideo:
		return c.Video(t.Context(), submit.Video{Key: key, Force: force, Model: "veo-3.0-generate-001", Prompt: "a red balloon", Metadata: meta})
	case "agent":
		return c.Interaction(t.Context(), submit.Interaction{Key: key, Force: force, Agent: "deep-research-pro-preview-12-2025", Input: "research", Metadata: meta})
	}
	return c.Interaction(t.Context(), submit.Interaction{Key: key, Force: force, Model: "gemini-2.5-flash", Input: "hello", Metadata: meta})
}

// storedMetadata is the user_metadata the fake holds for the operation.
func storedMetadata(t *testing.T, fake *fakegemini.Server, apiName string) map[string]any {
	t.Helper()
	segs := strings.Split(apiName, "/")
	var w *fakegemini.WebhookConfig
	switch {
	case segs[0] == "batches":
		st, _ := fake.Batch(segs[1])
		w = st.Webhook
	case segs[0] == "models":
		st, _ := fake.Video(segs[1], segs[3])
		w = st.Webhook
	default:
		st, _ := fake.Interaction(segs[1])
		w = st.Webhook
	}
	if w == nil {
		t.Fatalf("%s was created without a webhook config", apiName)
	}
	return w.UserMetadata
}

var kinds = []string{submit.KindBatch, submit.KindVideo, submit.KindInteraction, "agent"}

// TestSubmitEachKind: per kind, one call records the intent, creates
// exactly one operation whose user_metadata carries the intent key and the
// caller's metadata exactly, and binds it; the answer names the operation.
func TestSubmitEachKind(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t)
			sub, err := submitKind(t, h.client(t, submit.Options{}), kind, "", false)
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
			if !regexp.MustCompile(`^int_[0-9a-f]{20}$`).MatchString(sub.Key) {
				t.Errorf("generated key %q, want int_ and 20 hex digits", sub.Key)
			}
			if sub.Existing || sub.Operation == "" || sub.APIName == "" || h.creates() != 1 {
				t.Fatalf("submission %+v, %d creates; want one new operation", sub, h.creates())
			}
			meta := storedMetadata(t, h.fake, sub.APIName)
			if meta[submit.MetadataKey] != sub.Key || meta["job_id"] != json.Number("12345678901234567890") {
				t.Errorf("user_metadata %v, want the intent key and the caller's metadata exactly", meta)
			}
			st, ok := h.reg.Intent(t, sub.Key)
			if !ok || st.State != submit.StateBound || st.APIName != sub.APIName || st.Name != sub.Operation {
				t.Errorf("intent %+v, want bound to %s", st, sub.APIName)
			}
			if _, has := st.Metadata[submit.MetadataKey]; has || st.Metadata["job_id"] != json.Number("12345678901234567890") {
				t.Errorf("intent metadata %v, want the caller's alone, exactly", st.Metadata)
			}
			if sub.Completion != submit.CompletionPolling {
				t.Errorf("completion %q (%s), want polling: the fake project has no webhook", sub.Completion, sub.CompletionReason)
			}
		})
	}
}

// TestBatchIntentFields: a batch's intent holds the model as models/M and
// the display name sent (lrosink-KEY by default); its input goes inline,
// each line's key as its request's metadata.
func TestBatchIntentFields(t *testing.T) {
	h := newHarness(t)
	sub, err := h.client(t, submit.Options{}).Batch(t.Context(), batchReq("job-1"))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := h.reg.Intent(t, "job-1")
	if st.Kind != submit.KindBatch || st.Model != "models/gemini-2.5-flash" || st.DisplayName != "lrosink-job-1" {
		t.Errorf("intent %+v", st)
	}
	b, _ := h.fake.Batch(strings.TrimPrefix(sub.APIName, "batches/"))
	if b.DisplayName != "lrosink-job-1" || b.InputRequests != 2 || b.InputFile != "" {
		t.Errorf("batch %+v, want 2 inline requests under lrosink-job-1", b)
	}
	var body []byte
	for _, r := range h.fake.Requests() {
		if strings.HasSuffix(r.Path, ":batchGenerateContent") {
			body = r.Body
		}
	}
	if !bytes.Contains(body, []byte(`"metadata":{"key":"r1"}`)) || !bytes.Contains(body, []byte(`"webhook_config":{"user_metadata":{`)) {
		t.Errorf("create body %s", body)
	}
}

// TestBatchAboveInlineLimitIsUploaded: an input over the inline limit goes
// up through the Files API whole and the batch names the file.
func TestBatchAboveInlineLimitIsUploaded(t *testing.T) {
	h := newHarness(t)
	sub, err := h.client(t, submit.Options{InlineLimit: 64}).Batch(t.Context(), batchReq(""))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := h.fake.Batch(strings.TrimPrefix(sub.APIName, "batches/"))
	data, ok := h.fake.File(b.InputFile)
	if !ok || string(data) != jsonl || b.InputRequests != 0 {
		t.Errorf("batch %+v with file %q, want the input uploaded as it is", b, data)
	}
}

// TestRetryOfABoundKeyCreatesNothing: the same key again answers the
// operation it is bound to, Existing, with no second create.
func TestRetryOfABoundKeyCreatesNothing(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t)
			c := h.client(t, submit.Options{})
			first, err := submitKind(t, c, kind, "k-"+kind, false)
			if err != nil {
				t.Fatal(err)
			}
			again, err := submitKind(t, c, kind, "k-"+kind, false)
			if err != nil || !again.Existing || again.APIName != first.APIName || again.Operation != first.Operation {
				t.Fatalf("retry: %+v %v; want Existing %s", again, err, first.APIName)
			}
			if h.creates() != 1 {
				t.Errorf("%d creates, want 1", h.creates())
			}
		})
	}
}

// TestKilledBetweenCreateAndBind: the process dies after the create and
// before the bind. A retried call with the same key creates nothing: a
// batch is found by listing and bound; a video or an interaction (no list
// API) is refused with ErrIntentUnbound naming the key, its age, the grace
// and --force. Force then creates anew under the same key, and binds it.
func TestKilledBetweenCreateAndBind(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t)
			key := "crash-" + kind
			first, err := submitKind(t, h.client(t, submit.Options{}, crash), kind, key, false)
			var be *submit.BindError
			if !errors.As(err, &be) || be.Operation == "" || first.APIName != be.Operation || first.Key != key {
				t.Fatalf("killed submit: %+v %v; want a BindError naming the created operation", first, err)
			}
			if !strings.Contains(err.Error(), "lrosink register "+be.Operation) {
				t.Errorf("error %q does not say how to register the operation", err)
			}
			c := h.client(t, submit.Options{})
			again, err := submitKind(t, c, kind, key, false)
			if kind == submit.KindBatch {
				if err != nil || !again.Existing || again.APIName != first.APIName {
					t.Fatalf("retried batch: %+v %v; want the listed batch %s", again, err, first.APIName)
				}
				if st, _ := h.reg.Intent(t, key); st.State != submit.StateBound || st.APIName != first.APIName {
					t.Errorf("intent %+v, want bound to %s", st, first.APIName)
				}
				if h.creates() != 1 {
					t.Errorf("%d creates, want 1", h.creates())
				}
				return
			}
			var ue *submit.UnboundError
			if !errors.Is(err, submit.ErrIntentUnbound) || !errors.As(err, &ue) || ue.Alerted() {
				t.Fatalf("retried %s: %+v %v; want ErrIntentUnbound within grace", kind, again, err)
			}
			for _, want := range []string{key, "grace of 1h0m0s", "--force", "ago"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			if h.creates() != 1 || again.Key != key {
				t.Errorf("%d creates, key %q; want 1 and the key back", h.creates(), again.Key)
			}
			forced, err := submitKind(t, c, kind, key, true)
			if err != nil || forced.Existing || forced.APIName == first.APIName {
				t.Fatalf("forced: %+v %v; want a new operation", forced, err)
			}
			if st, _ := h.reg.Intent(t, key); st.State != submit.StateBound || st.APIName != forced.APIName {
				t.Errorf("intent %+v, want bound to the forced %s", st, forced.APIName)
			}
			if h.creates() != 2 {
				t.Errorf("%d creates, want 2 (one forced)", h.creates())
			}
		})
	}
}

// TestKilledBatchFoundByDisplayName: where the listing echoes no metadata
// (live may not, GEMINI.md §13) the batch is found by its display name
// and model.
func TestKilledBatchFoundByDisplayName(t *testing.T) {
	h := newHarness(t)
	first, err := h.client(t, submit.Options{}, crash).Batch(t.Context(), batchReq("dn-1"))
	if err == nil {
		t.Fatal("the killed submit succeeded")
	}
	id := strings.TrimPrefix(first.APIName, "batches/")
	st, _ := h.fake.Batch(id)
	st.Webhook = nil
	h.fake.SetBatch(id, st)
	// Another batch of another model under the same display name is not it.
	h.fake.SetBatch("other", fakegemini.BatchState{State: "BATCH_STATE_PENDING", DisplayName: "lrosink-dn-1", Model: "models/other", CreateTime: time.Now()})
	again, err := h.client(t, submit.Options{}).Batch(t.Context(), batchReq("dn-1"))
	if err != nil || !again.Existing || again.APIName != first.APIName {
		t.Fatalf("retry: %+v %v; want %s", again, err, first.APIName)
	}
}

// TestUnboundPastGraceIsAlerted: past its grace, a retried video still
// creates nothing and says the intent is alerted.
func TestUnboundPastGraceIsAlerted(t *testing.T) {
	// The Register function's clock two hours behind: the intent it
	// records is two hours old to the submitter.
	h := newHarness(t, apptest.Options{Config: func(c *config.Config) { c.IntentGrace = time.Minute },
		Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
	if _, err := submitKind(t, h.client(t, submit.Options{}, crash), submit.KindVideo, "old-1", false); err == nil {
		t.Fatal("the killed submit succeeded")
	}
	_, err := submitKind(t, h.client(t, submit.Options{}), submit.KindVideo, "old-1", false)
	var ue *submit.UnboundError
	if !errors.As(err, &ue) || !ue.Alerted() || !strings.Contains(err.Error(), "alerted (intent-unbound)") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("err %v; want ErrIntentUnbound past grace, alerted", err)
	}
	if h.creates() != 1 {
		t.Errorf("%d creates, want 1", h.creates())
	}
}

// TestRefusedBeforeAnythingIsStored: bad input records no intent and
// creates nothing; the error is ErrInvalidRequest.
func TestRefusedBeforeAnythingIsStored(t *testing.T) {
	h := newHarness(t)
	c := h.client(t, submit.Options{})
	ctx := t.Context()
	bad := func(b submit.Batch) submit.Batch { b.Key = ""; return b }
	for name, call := range map[string]func() error{
		"reserved metadata key": func() error {
			_, err := c.Video(ctx, submit.Video{Model: "veo", Prompt: "p", Metadata: map[string]any{submit.MetadataKey: "x"}})
			return err
		},
		"bad key": func() error { _, err := c.Video(ctx, submit.Video{Key: "a/b", Model: "veo", Prompt: "p"}); return err },
		"long key": func() error {
			_, err := c.Video(ctx, submit.Video{Key: strings.Repeat("k", 129), Model: "veo", Prompt: "p"})
			return err
		},
		"metadata not JSON": func() error {
			_, err := c.Video(ctx, submit.Video{Model: "veo", Prompt: "p", Metadata: map[string]any{"ch": make(chan int)}})
			return err
		},
		"no prompt": func() error { _, err := c.Video(ctx, submit.Video{Model: "veo"}); return err },
		"bad model": func() error { _, err := c.Video(ctx, submit.Video{Model: "../x", Prompt: "p"}); return err },
		"model and agent": func() error {
			_, err := c.Interaction(ctx, submit.Interaction{Model: "m", Agent: "a", Input: "x"})
			return err
		},
		"bad jsonl line": func() error {
			b := bad(batchReq(""))
			b.Input, b.InputSize = strings.NewReader("{\"request\":{}}\nnot json\n"), 25
			_, err := c.Batch(ctx, b)
			return err
		},
		"jsonl without request": func() error {
			b := bad(batchReq(""))
			b.Input, b.InputSize = strings.NewReader(`{"key":"a"}`), 11
			_, err := c.Batch(ctx, b)
			return err
		},
		"large bad jsonl": func() error {
			b := bad(batchReq(""))
			data := strings.Repeat(`{"request":{}}`+"\n", 10) + "oops\n"
			b.Input, b.InputSize = strings.NewReader(data), int64(len(data))
			_, err := h.client(t, submit.Options{InlineLimit: 16}).Batch(ctx, b)
			return err
		},
	} {
		if err := call(); !errors.Is(err, submit.ErrInvalidRequest) {
			t.Errorf("%s: %v; want ErrInvalidRequest", name, err)
		}
	}
	if n := h.reg.Unbound(t); n != 0 || h.creates() != 0 || len(h.fake.Requests()) != 0 {
		t.Errorf("%d intents, %d creates, %d Gemini requests; want none", n, h.creates(), len(h.fake.Requests()))
	}
}

// TestSameKeyOtherFieldsIsRefused: a key recorded for one submission and
// reused for another is refused (intent-mismatch), creating nothing.
func TestSameKeyOtherFieldsIsRefused(t *testing.T) {
	h := newHarness(t)
	c := h.client(t, submit.Options{})
	if _, err := c.Video(t.Context(), submit.Video{Key: "same", Model: "veo-3.0-generate-001", Prompt: "a"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Video(t.Context(), submit.Video{Key: "same", Model: "veo-2.0-generate-001", Prompt: "a"})
	if !errors.Is(err, submit.ErrIntentMismatch) {
		t.Fatalf("err %v; want ErrIntentMismatch", err)
	}
	if h.creates() != 1 {
		t.Errorf("%d creates, want 1", h.creates())
	}
}

// TestRefusedCreate: Gemini refusing the create leaves the intent unbound
// and says nothing was created; the key comes back, and Force with it
// creates the operation once.
func TestRefusedCreate(t *testing.T) {
	h := newHarness(t)
	c := h.client(t, submit.Options{})
	h.fake.FailNext("/v1beta/models/veo-3.0-generate-001:predictLongRunning", http.StatusTooManyRequests, 1)
	sub, err := submitKind(t, c, submit.KindVideo, "", false)
	if !errors.Is(err, submit.ErrCreateRefused) || errors.Is(err, submit.ErrCreateUnknown) || sub.Key == "" || sub.APIName != "" {
		t.Fatalf("submit: %+v %v; want ErrCreateRefused and the key", sub, err)
	}
	if !strings.Contains(err.Error(), sub.Key) {
		t.Errorf("error %q does not name the key", err)
	}
	if st, _ := h.reg.Intent(t, sub.Key); st.State != submit.StateUnbound {
		t.Errorf("intent %+v, want unbound", st)
	}
	forced, err := submitKind(t, c, submit.KindVideo, sub.Key, true)
	if err != nil || h.creates() != 1 {
		t.Fatalf("forced: %+v %v, %d creates", forced, err, h.creates())
	}
}

// TestCompletion: polling without a project webhook, webhook with an
// enabled static one (none sent in the create: only user_metadata) or a
// dynamic URI (sent as webhook_config.uris).
func TestCompletion(t *testing.T) {
	h := newHarness(t)
	h.fake.AddWebhook("lrosink", "https://lrosink.example/Webhook")
	sub, err := submitKind(t, h.client(t, submit.Options{}), submit.KindInteraction, "", false)
	if err != nil || sub.Completion != submit.CompletionWebhook || !strings.Contains(sub.CompletionReason, "https://lrosink.example/Webhook") {
		t.Fatalf("static: %+v %v", sub, err)
	}
	st, _ := h.fake.Interaction(strings.TrimPrefix(sub.APIName, "interactions/"))
	if len(st.Webhook.URIs) != 0 {
		t.Errorf("static webhook: the create sent uris %v", st.Webhook.URIs)
	}
	for _, w := range h.fake.Webhooks() {
		h.fake.SetWebhookState(w.ID, fakegemini.WebhookDisabledDueToFailedDeliveries)
	}
	if sub, err = submitKind(t, h.client(t, submit.Options{}), submit.KindInteraction, "", false); err != nil || sub.Completion != submit.CompletionPolling {
		t.Errorf("disabled webhook: %+v %v; want polling", sub, err)
	}
	dyn := h.client(t, submit.Options{WebhookURIs: []string{"https://mine.example/Webhook"}})
	sub, err = submitKind(t, dyn, submit.KindBatch, "", false)
	if err != nil || sub.Completion != submit.CompletionWebhook {
		t.Fatalf("dynamic: %+v %v", sub, err)
	}
	b, _ := h.fake.Batch(strings.TrimPrefix(sub.APIName, "batches/"))
	if len(b.Webhook.URIs) != 1 || b.Webhook.URIs[0] != "https://mine.example/Webhook" {
		t.Errorf("dynamic: the create sent %+v", b.Webhook)
	}
}
