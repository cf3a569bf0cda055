package gemini_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/gemini"
)

// lastBody is the body of the last request the fake received for path.
func lastBody(t *testing.T, fake *fakegemini.Server, path string) []byte {
	t.Helper()
	reqs := fake.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Path == path {
			return reqs[i].Body
		}
	}
	t.Fatalf("no request for %s", path)
	return nil
}

var bigMeta = map[string]any{"lrosink_intent": "int_1", "job_id": json.Number("12345678901234567890")}

// TestCreateBatchSendsSnakeCase: the request body carries
// webhook_config.user_metadata snake_case (go-genai #779), exactly (a big
// integer as its literal), inline requests as given; the fake accepts it,
// creates one batch and echoes the metadata.
func TestCreateBatchSendsSnakeCase(t *testing.T) {
	h := newHarness(t)
	c := gemini.NewCreator(h.f)
	got, err := c.CreateBatch(t.Context(), gemini.BatchRequest{
		Model: "models/gemini-2.5-flash", DisplayName: "lrosink-int_1",
		Requests: []json.RawMessage{json.RawMessage(`{"request":{"contents":[{"parts":[{"text":"hi"}]}]},"metadata":{"key":"r1"}}`)},
		Webhook:  gemini.WebhookConfig{URIs: []string{"https://hooks.example/Webhook"}, UserMetadata: bigMeta},
	})
	if err != nil {
		t.Fatalf("CreateBatch: %v", err)
	}
	if !strings.HasPrefix(got.Name, "batches/") || got.DisplayName != "lrosink-int_1" || got.Model != "models/gemini-2.5-flash" {
		t.Errorf("created %+v", got)
	}
	body := lastBody(t, h.fake, "/v1beta/models/gemini-2.5-flash:batchGenerateContent")
	want := `"webhook_config":{"uris":["https://hooks.example/Webhook"],"user_metadata":{"job_id":12345678901234567890,"lrosink_intent":"int_1"}}`
	if !bytes.Contains(body, []byte(want)) || bytes.Contains(body, []byte("userMetadata")) {
		t.Errorf("body %s; want %s and no camelCase", body, want)
	}
	st, _ := h.fake.Batch(strings.TrimPrefix(got.Name, "batches/"))
	if st.InputRequests != 1 || st.Webhook.UserMetadata["job_id"] != json.Number("12345678901234567890") {
		t.Errorf("stored %+v", st)
	}
	if n := h.fake.Creates(fakegemini.KindBatch); n != 1 {
		t.Errorf("Creates(batch) = %d, want 1", n)
	}
}

// TestUploadThenCreateBatch: an input file goes up through the SDK's
// Files.Upload, whole, and the batch names it; without URIs the config
// carries only user_metadata (the static webhook).
func TestUploadThenCreateBatch(t *testing.T) {
	h := newHarness(t)
	c := gemini.NewCreator(h.f)
	data := []byte(`{"key":"a","request":{"contents":[{"parts":[{"text":"a"}]}]}}` + "\n")
	name, err := c.Upload(t.Context(), bytes.NewReader(data), int64(len(data)), "requests.jsonl")
	if err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if got, ok := h.fake.File(name); !ok || !bytes.Equal(got, data) {
		t.Fatalf("file %s holds %q", name, got)
	}
	created, err := c.CreateBatch(t.Context(), gemini.BatchRequest{Model: "gemini-2.5-flash", DisplayName: "d", FileName: name,
		Webhook: gemini.WebhookConfig{UserMetadata: map[string]any{"lrosink_intent": "int_2"}}})
	if err != nil {
		t.Fatal(err)
	}
	body := lastBody(t, h.fake, "/v1beta/models/gemini-2.5-flash:batchGenerateContent")
	if !bytes.Contains(body, []byte(`"webhook_config":{"user_metadata":{"lrosink_intent":"int_2"}}`)) || !bytes.Contains(body, []byte(`"file_name":"`+name+`"`)) {
		t.Errorf("body %s", body)
	}
	if st, _ := h.fake.Batch(strings.TrimPrefix(created.Name, "batches/")); st.InputFile != name {
		t.Errorf("stored input %q, want %s", st.InputFile, name)
	}
}

// TestCreateVideoAndInteraction: a video's raw body and an interaction's
// SDK body both carry user_metadata snake_case; model and agent
// interactions are background; names come back in API form.
func TestCreateVideoAndInteraction(t *testing.T) {
	h := newHarness(t)
	c := gemini.NewCreator(h.f)
	ctx := t.Context()
	v, err := c.CreateVideo(ctx, gemini.VideoRequest{Model: "veo-3.0-generate-001", Prompt: "a cat",
		Parameters: map[string]any{"aspectRatio": "16:9"}, Webhook: gemini.WebhookConfig{UserMetadata: bigMeta}})
	if err != nil {
		t.Fatalf("CreateVideo: %v", err)
	}
	if v.Name != "models/veo-3.0-generate-001/operations/video-000001" {
		t.Errorf("video %+v", v)
	}
	body := lastBody(t, h.fake, "/v1beta/models/veo-3.0-generate-001:predictLongRunning")
	if !bytes.Contains(body, []byte(`"webhook_config":{"user_metadata":{"job_id":12345678901234567890,"lrosink_intent":"int_1"}}`)) ||
		!bytes.Contains(body, []byte(`"parameters":{"aspectRatio":"16:9"}`)) {
		t.Errorf("video body %s", body)
	}
	m, err := c.CreateInteraction(ctx, gemini.InteractionRequest{Model: "models/gemini-2.5-flash", Input: "hello", Webhook: gemini.WebhookConfig{UserMetadata: bigMeta}})
	if err != nil {
		t.Fatalf("CreateInteraction(model): %v", err)
	}
	body = lastBody(t, h.fake, "/v1beta/interactions")
	if !strings.HasPrefix(m.Name, "interactions/") || m.CreateTime.IsZero() ||
		!bytes.Contains(body, []byte(`"background":true`)) || !bytes.Contains(body, []byte(`"model":"gemini-2.5-flash"`)) ||
		!bytes.Contains(body, []byte(`"user_metadata":{"job_id":12345678901234567890,"lrosink_intent":"int_1"}`)) {
		t.Errorf("model interaction %+v, body %s", m, body)
	}
	a, err := c.CreateInteraction(ctx, gemini.InteractionRequest{Agent: "deep-research-pro-preview-12-2025", Input: "research"})
	if err != nil {
		t.Fatalf("CreateInteraction(agent): %v", err)
	}
	st, ok := h.fake.Interaction(strings.TrimPrefix(a.Name, "interactions/"))
	if !ok || st.Agent != "deep-research-pro-preview-12-2025" || st.Status != "in_progress" || st.Webhook != nil {
		t.Errorf("agent interaction stored %+v", st)
	}
	for k, want := range map[string]int{fakegemini.KindVideo: 1, fakegemini.KindInteraction: 2} {
		if n := h.fake.Creates(k); n != want {
			t.Errorf("Creates(%s) = %d, want %d", k, n, want)
		}
	}
}

// TestCreateFailures: a create is sent once, never retried (neither by
// the Creator nor by the Interactions client), and its failure says
// whether anything may have been created: a 4xx is ErrCreateRefused, a
// 5xx or a dropped connection ErrCreateUnknown, a refused key also
// ErrAPIKeyRefused, and no error text holds the key.
func TestCreateFailures(t *testing.T) {
	const wrongKey = "AIzaWRONG-KEY-0123456789"
	batchPath := "/v1beta/models/m:batchGenerateContent"
	req := gemini.BatchRequest{Model: "m", DisplayName: "d", Requests: []json.RawMessage{json.RawMessage(`{"request":{}}`)}}
	for _, c := range []struct {
		name    string
		path    string
		status  int
		want    error
		keyErr  bool
		create  func(*gemini.Creator) error
		wrongID bool
	}{
		{name: "batch 400", path: batchPath, status: 400, want: gemini.ErrCreateRefused},
		{name: "batch 429", path: batchPath, status: 429, want: gemini.ErrCreateRefused},
		{name: "batch 503", path: batchPath, status: 503, want: gemini.ErrCreateUnknown},
		{name: "batch dropped", path: batchPath, status: fakegemini.Drop, want: gemini.ErrCreateUnknown},
		{name: "video 500", path: "/v1beta/models/veo:predictLongRunning", status: 500, want: gemini.ErrCreateUnknown,
			create: func(c *gemini.Creator) error {
				_, err := c.CreateVideo(t.Context(), gemini.VideoRequest{Model: "veo", Prompt: "p"})
				return err
			}},
		{name: "interaction 503", path: "/v1beta/interactions", status: 503, want: gemini.ErrCreateUnknown,
			create: func(c *gemini.Creator) error {
				_, err := c.CreateInteraction(t.Context(), gemini.InteractionRequest{Model: "m", Input: "x"})
				return err
			}},
		{name: "interaction 400", path: "/v1beta/interactions", status: 400, want: gemini.ErrCreateRefused,
			create: func(c *gemini.Creator) error {
				_, err := c.CreateInteraction(t.Context(), gemini.InteractionRequest{Model: "m", Input: "x"})
				return err
			}},
		{name: "wrong key", path: batchPath, want: gemini.ErrCreateRefused, keyErr: true, wrongID: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := fakegemini.New()
			url := fake.Start(t).URL
			key := fakegemini.DefaultAPIKey
			if c.wrongID {
				key = wrongKey
			} else {
				fake.FailNext(c.path, c.status, 1)
			}
			f, err := gemini.New(gemini.Options{APIKey: key, BaseURL: url, Sleep: func(ctx context.Context, d time.Duration) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			cr := gemini.NewCreator(f)
			create := c.create
			if create == nil {
				create = func(cr *gemini.Creator) error { _, err := cr.CreateBatch(t.Context(), req); return err }
			}
			err = create(cr)
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v; want %v", err, c.want)
			}
			other := gemini.ErrCreateUnknown
			if c.want == gemini.ErrCreateUnknown {
				other = gemini.ErrCreateRefused
			}
			if errors.Is(err, other) {
				t.Errorf("err %v is both refused and unknown", err)
			}
			if c.keyErr && !errors.Is(err, gemini.ErrAPIKeyRefused) {
				t.Errorf("err %v does not say the key was refused", err)
			}
			if strings.Contains(err.Error(), wrongKey) {
				t.Errorf("the error quotes the key: %v", err)
			}
			if n := fake.Calls(c.path); n != 1 {
				t.Errorf("%d calls to %s, want exactly 1 (a create is never retried)", n, c.path)
			}
			if fake.Creates(fakegemini.KindBatch)+fake.Creates(fakegemini.KindVideo)+fake.Creates(fakegemini.KindInteraction) != 0 {
				t.Error("a failed create created something")
			}
		})
	}
}

// TestCreateRefusesBadNames: a model that would change the request path
// is refused before any call.
func TestCreateRefusesBadNames(t *testing.T) {
	h := newHarness(t)
	c := gemini.NewCreator(h.f)
	for _, m := range []string{"", "../webhooks", "m?x=1", "models/a/b", "m#f"} {
		if _, err := c.CreateVideo(t.Context(), gemini.VideoRequest{Model: m, Prompt: "p"}); err == nil {
			t.Errorf("model %q accepted", m)
		}
	}
	if n := h.fake.TotalCalls(); n != 0 {
		t.Errorf("%d calls made for refused names", n)
	}
}

// TestFindBatch: a listing finds a batch by the lrosink_intent its
// metadata echoes, or by display name, newest first, and stops at jobs
// older than since.
func TestFindBatch(t *testing.T) {
	now := t0
	fake := fakegemini.New(fakegemini.WithClock(func() time.Time { return now }))
	url := fake.Start(t).URL
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	c := gemini.NewCreator(f)
	create := func(display, key string) gemini.Created {
		now = now.Add(time.Minute)
		got, err := c.CreateBatch(t.Context(), gemini.BatchRequest{Model: "gemini-2.5-flash", DisplayName: display,
			Requests: []json.RawMessage{json.RawMessage(`{"request":{}}`)}, Webhook: gemini.WebhookConfig{UserMetadata: map[string]any{"lrosink_intent": key}}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	old := create("lrosink-int_old", "int_old")
	mid := create("shared-name", "int_mid")
	create("shared-name", "int_new")
	for i := range 120 { // a second page
		create("filler", "int_f"+string(rune('a'+i%26)))
	}
	byKey := func(key string) func(gemini.BatchJob) bool {
		return func(j gemini.BatchJob) bool { return j.UserMetadata["lrosink_intent"] == key }
	}
	job, ok, err := c.FindBatch(t.Context(), time.Time{}, byKey("int_mid"))
	if err != nil || !ok || job.Name != mid.Name || job.DisplayName != "shared-name" || job.Model != "models/gemini-2.5-flash" {
		t.Fatalf("by key: %+v %v %v", job, ok, err)
	}
	job, ok, err = c.FindBatch(t.Context(), time.Time{}, func(j gemini.BatchJob) bool { return j.DisplayName == "lrosink-int_old" })
	if err != nil || !ok || job.Name != old.Name {
		t.Fatalf("by display name: %+v %v %v", job, ok, err)
	}
	// since after the old job was created: not read, so not found.
	if _, ok, err := c.FindBatch(t.Context(), t0.Add(90*time.Second), byKey("int_old")); err != nil || ok {
		t.Errorf("past since: found %v, err %v", ok, err)
	}
	if _, ok, err := c.FindBatch(t.Context(), time.Time{}, byKey("int_none")); err != nil || ok {
		t.Errorf("no match: found %v, err %v", ok, err)
	}
	if n := fake.Creates(fakegemini.KindBatch); n != 123 {
		t.Errorf("Creates(batch) = %d", n)
	}
}
