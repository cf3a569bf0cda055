package fakegemini_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"
	"google.golang.org/genai/interactions/models/interactions"
	"google.golang.org/genai/interactions/models/operations"
	"google.golang.org/genai/interactions/retry"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/webhook"
)

// wantCamelCaseRefusal is the live answer go-genai #779 quotes.
const wantCamelCaseRefusal = `Invalid JSON payload received. Unknown name "userMetadata" at 'batch.webhook_config': Cannot find field.`

// rawPost sends body as JSON to url with the fake's key.
func rawPost(t *testing.T, url string, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-goog-api-key", fakegemini.DefaultAPIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// uploadJSONL puts data up through the SDK's Files.Upload, as a batch's
// input, and returns the file's name.
func uploadJSONL(t *testing.T, c *genai.Client, data []byte) string {
	t.Helper()
	f, err := c.Files.Upload(t.Context(), bytes.NewReader(data), &genai.UploadFileConfig{MIMEType: "jsonl", DisplayName: "requests"})
	if err != nil {
		t.Fatalf("Files.Upload: %v", err)
	}
	if !strings.HasPrefix(f.Name, "files/") || f.SizeBytes == nil || *f.SizeBytes != int64(len(data)) {
		t.Fatalf("uploaded file %+v, want files/… of %d bytes", f, len(data))
	}
	return f.Name
}

// TestBatchCreateThroughSDK: the SDK's own Files.Upload and Batches.Create
// (no webhook config) work against the fake: the file arrives whole (over
// two chunks), the batch is PENDING under the name the answer gives, and
// GET and list answer it; one create is counted.
func TestBatchCreateThroughSDK(t *testing.T) {
	fake, client, _ := setup(t, fakegemini.WithClock(func() time.Time { return t0 }))
	ctx := t.Context()
	// Over the SDK's 8 MiB chunk: the upload takes two requests.
	data := bytes.Repeat([]byte(`{"key":"k","request":{"contents":[{"parts":[{"text":"hi"}]}]}}`+"\n"), (8<<20)/60+10)
	file := uploadJSONL(t, client, data)
	if got, ok := fake.File(file); !ok || !bytes.Equal(got, data) {
		t.Fatalf("fake holds %d bytes for %s, want the %d uploaded", len(got), file, len(data))
	}
	job, err := client.Batches.Create(ctx, "gemini-2.5-flash", &genai.BatchJobSource{FileName: file},
		&genai.CreateBatchJobConfig{DisplayName: "nightly"})
	if err != nil {
		t.Fatalf("Batches.Create: %v", err)
	}
	if !strings.HasPrefix(job.Name, "batches/") || job.State != genai.JobStatePending || job.DisplayName != "nightly" ||
		job.Model != "models/gemini-2.5-flash" || !job.CreateTime.Equal(t0) {
		t.Errorf("created %+v", job)
	}
	if n := fake.Creates(fakegemini.KindBatch); n != 1 {
		t.Errorf("Creates(batch) = %d, want 1", n)
	}
	st, ok := fake.Batch(strings.TrimPrefix(job.Name, "batches/"))
	if !ok || st.InputFile != file || st.Webhook != nil {
		t.Errorf("stored %+v, want input %s and no webhook config", st, file)
	}
	got, err := client.Batches.Get(ctx, job.Name, nil)
	if err != nil || got.Name != job.Name || got.State != genai.JobStatePending {
		t.Errorf("Get: %+v %v", got, err)
	}
	page, err := client.Batches.List(ctx, nil)
	if err != nil || len(page.Items) != 1 || page.Items[0].Name != job.Name {
		t.Errorf("List: %+v %v", page.Items, err)
	}
	// An input file the fake does not hold is refused, and counted as no create.
	if _, err := client.Batches.Create(ctx, "gemini-2.5-flash", &genai.BatchJobSource{FileName: "files/nope"}, nil); err == nil || apiCode(t, err) != 400 {
		t.Errorf("create with an unknown file: %v", err)
	}
	if n := fake.Creates(fakegemini.KindBatch); n != 1 {
		t.Errorf("Creates(batch) = %d after a refused create, want 1", n)
	}
}

// TestCamelCaseUserMetadataRefusedThroughSDK: the SDK v1.77.0's own
// Batches.Create and GenerateVideos with WebhookConfig.UserMetadata send
// camelCase "userMetadata", and the fake refuses them as live does
// (go-genai #779): 400 INVALID_ARGUMENT with the live message and a
// BadRequest field violation. Nothing is created.
func TestCamelCaseUserMetadataRefusedThroughSDK(t *testing.T) {
	fake, client, _ := setup(t)
	ctx := t.Context()
	hook := &genai.WebhookConfig{Uris: []string{"https://example.com/hook"}, UserMetadata: map[string]any{"book_id": "1"}}
	_, err := client.Batches.Create(ctx, "gemini-2.5-flash",
		&genai.BatchJobSource{InlinedRequests: []*genai.InlinedRequest{{Contents: genai.Text("hi")}}},
		&genai.CreateBatchJobConfig{DisplayName: "d", WebhookConfig: hook})
	var ae genai.APIError
	if !errors.As(err, &ae) || ae.Code != 400 || ae.Status != "INVALID_ARGUMENT" || ae.Message != wantCamelCaseRefusal {
		t.Fatalf("Batches.Create with UserMetadata: %v; want 400 INVALID_ARGUMENT %q", err, wantCamelCaseRefusal)
	}
	if len(ae.Details) != 1 || ae.Details[0]["@type"] != "type.googleapis.com/google.rpc.BadRequest" {
		t.Errorf("details %v, want one google.rpc.BadRequest", ae.Details)
	}
	reqs := fake.Requests()
	if last := reqs[len(reqs)-1]; !bytes.Contains(last.Body, []byte(`"userMetadata"`)) {
		t.Errorf("the SDK sent %s; the test assumes it sends camelCase userMetadata", last.Body)
	}
	_, err = client.Models.GenerateVideos(ctx, "veo-3.0-generate-001", "a cat", nil, &genai.GenerateVideosConfig{WebhookConfig: hook})
	if !errors.As(err, &ae) || ae.Code != 400 || ae.Message != `Invalid JSON payload received. Unknown name "userMetadata" at 'webhook_config': Cannot find field.` {
		t.Errorf("GenerateVideos with UserMetadata: %v", err)
	}
	for _, k := range []string{fakegemini.KindBatch, fakegemini.KindVideo} {
		if n := fake.Creates(k); n != 0 {
			t.Errorf("Creates(%s) = %d after refused creates, want 0", k, n)
		}
	}
	// Without metadata the SDK's own calls go through.
	if _, err := client.Models.GenerateVideos(ctx, "veo-3.0-generate-001", "a cat", nil,
		&genai.GenerateVideosConfig{WebhookConfig: &genai.WebhookConfig{Uris: []string{"https://example.com/hook"}}}); err != nil {
		t.Errorf("GenerateVideos with uris only: %v", err)
	}
}

// TestSnakeCaseUserMetadataAccepted: a raw body with
// webhook_config.user_metadata (no uris: the static webhook) creates the
// batch; its GET echoes the metadata exactly, big integers included, and
// its delivery carries it at the top level, which the webhook parser reads.
func TestSnakeCaseUserMetadataAccepted(t *testing.T) {
	fake, client, base := setup(t)
	body := `{"batch":{"display_name":"lrosink-int_1","input_config":{"requests":{"requests":[` +
		`{"request":{"contents":[{"parts":[{"text":"a"}]}]},"metadata":{"key":"r1"}},` +
		`{"request":{"contents":[{"parts":[{"text":"b"}]}]}}]}},` +
		`"webhook_config":{"user_metadata":{"lrosink_intent":"int_1","job_id":12345678901234567890}}}}`
	resp, b := rawPost(t, base+"/v1beta/models/gemini-2.5-flash:batchGenerateContent", body)
	if resp.StatusCode != 200 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	var op struct {
		Name     string `json:"name"`
		Metadata struct {
			DisplayName string `json:"displayName"`
			State       string `json:"state"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &op); err != nil || op.Metadata.State != "BATCH_STATE_PENDING" || op.Metadata.DisplayName != "lrosink-int_1" {
		t.Fatalf("answer %s (%v)", b, err)
	}
	id := strings.TrimPrefix(op.Name, "batches/")
	if st, _ := fake.Batch(id); st.InputRequests != 2 || st.Webhook == nil || len(st.Webhook.URIs) != 0 {
		t.Errorf("stored %+v", st)
	}
	_, got := rawGet(t, base+"/v1beta/"+op.Name, fakegemini.DefaultAPIKey)
	if !bytes.Contains(got, []byte(`"webhookConfig":{"user_metadata":{"job_id":12345678901234567890,"lrosink_intent":"int_1"}}`)) {
		t.Errorf("GET %s does not echo the metadata exactly: %s", op.Name, got)
	}
	if job, err := client.Batches.Get(t.Context(), op.Name, nil); err != nil || job.State != genai.JobStatePending {
		t.Errorf("SDK Get: %+v %v", job, err)
	}
	st, _ := fake.Batch(id)
	st.State, st.ResponsesFile = "BATCH_STATE_SUCCEEDED", fakegemini.ResponsesFile(id)
	fake.SetBatch(id, st)
	d, err := fake.Delivery(op.Name, "batch.succeeded", t0)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := webhook.Parse(d, webhook.Verified{ID: "msg_1", Method: webhook.MethodHMAC})
	if err != nil {
		t.Fatalf("parse %s: %v", d, err)
	}
	if ev.Name != op.Name || ev.UserMetadata["lrosink_intent"] != "int_1" || ev.UserMetadata["job_id"] != json.Number("12345678901234567890") ||
		ev.Output["output_file_uri"] != fakegemini.ResponsesFile(id) {
		t.Errorf("delivery %s parsed to %+v", d, ev)
	}
	if n := fake.Creates(fakegemini.KindBatch); n != 1 {
		t.Errorf("Creates(batch) = %d, want 1", n)
	}
}

// TestCreateValidation: what the fake refuses, each without creating:
// an unknown field at each level (in the live parser's words), camelCase
// userMetadata in a raw body, both or neither input, a non-object config.
func TestCreateValidation(t *testing.T) {
	fake, _, base := setup(t)
	batchURL := base + "/v1beta/models/gemini-2.5-flash:batchGenerateContent"
	inline := `"inputConfig":{"requests":{"requests":[{"request":{}}]}}`
	for _, c := range []struct{ url, body, msg string }{
		{batchURL, `{"batch":{` + inline + `,"webhookConfig":{"userMetadata":{"a":1}}}}`, wantCamelCaseRefusal},
		{batchURL, `{"batch":{` + inline + `,"webhook_config":{"uri":"x"}}}`, `Unknown name "uri" at 'batch.webhook_config'`},
		{batchURL, `{"batch":{` + inline + `,"colour":1}}`, `Unknown name "colour" at 'batch'`},
		{batchURL, `{"batsh":{}}`, `Invalid JSON payload received. Unknown name "batsh": Cannot find field.`},
		{batchURL, `{"batch":{"inputConfig":{}}}`, "one of file_name and requests is required"},
		{batchURL, `{"batch":{"inputConfig":{"fileName":"files/a","requests":{"requests":[]}}}}`, "only one of"},
		{batchURL, `{"batch":{` + inline + `,"webhookConfig":[1]}}`, "must be an object"},
		{base + "/v1beta/models/veo-3.0-generate-001:predictLongRunning", `{"instances":[{"prompt":"a"}],"webhook_config":{"userMetadata":{}}}`,
			`Unknown name "userMetadata" at 'webhook_config'`},
		{base + "/v1beta/models/veo-3.0-generate-001:predictLongRunning", `{"instances":[]}`, "needs a prompt"},
		{base + "/v1beta/interactions", `{"model":"m","input":"x","background":true,"webhook_config":{"userMetadata":{}}}`,
			`Unknown name "userMetadata" at 'webhook_config'`},
		{base + "/v1beta/interactions", `{"model":"m","agent":"a","input":"x"}`, "exactly one of model and agent"},
		{base + "/v1beta/interactions", `{"model":"m"}`, "input is required"},
	} {
		resp, b := rawPost(t, c.url, c.body)
		if resp.StatusCode != 400 || !strings.Contains(string(b), strings.ReplaceAll(c.msg, `"`, `\"`)) {
			t.Errorf("POST %s %s: %d %s; want 400 with %q", c.url, c.body, resp.StatusCode, b, c.msg)
		}
	}
	for _, k := range []string{fakegemini.KindBatch, fakegemini.KindVideo, fakegemini.KindInteraction} {
		if n := fake.Creates(k); n != 0 {
			t.Errorf("Creates(%s) = %d, want 0", k, n)
		}
	}
}

// TestVideoCreate: a raw predictLongRunning with snake_case metadata makes
// a running operation the SDK's GetVideosOperation reads; its delivery
// carries the metadata; ids come from a counter.
func TestVideoCreate(t *testing.T) {
	fake, client, base := setup(t)
	resp, b := rawPost(t, base+"/v1beta/models/veo-3.0-generate-001:predictLongRunning",
		`{"instances":[{"prompt":"a cat"}],"webhook_config":{"uris":["https://hooks.example/v"],"user_metadata":{"lrosink_intent":"int_v"}}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	var op struct{ Name string }
	if err := json.Unmarshal(b, &op); err != nil || op.Name != "models/veo-3.0-generate-001/operations/video-000001" {
		t.Fatalf("answer %s", b)
	}
	got, err := client.Operations.GetVideosOperation(t.Context(), &genai.GenerateVideosOperation{Name: op.Name}, nil)
	if err != nil || got.Done {
		t.Fatalf("GetVideosOperation: %+v %v", got, err)
	}
	st, ok := fake.Video("veo-3.0-generate-001", "video-000001")
	if !ok || st.Prompt != "a cat" || st.Webhook == nil || st.Webhook.URIs[0] != "https://hooks.example/v" {
		t.Fatalf("stored %+v", st)
	}
	st.Done, st.VideoURIs = true, []string{fakegemini.FileDownloadURI("v1")}
	fake.SetVideo("veo-3.0-generate-001", "video-000001", st)
	d, err := fake.Delivery(op.Name, "video.generated", t0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(d, []byte(`"user_metadata":{"lrosink_intent":"int_v"}`)) || !bytes.Contains(d, []byte(`"id":"`+op.Name+`"`)) {
		t.Errorf("delivery %s", d)
	}
	if n := fake.Creates(fakegemini.KindVideo); n != 1 {
		t.Errorf("Creates(video) = %d, want 1", n)
	}
}

// TestInteractionCreateThroughSDK: the Interactions client's own Create
// (model and agent, background) sends user_metadata snake_case, which the
// fake accepts; the answer and the GET echo webhook_config as a live
// create's answer does (GEMINI.md §13).
func TestInteractionCreateThroughSDK(t *testing.T) {
	fake, client, _ := setup(t)
	ctx := t.Context()
	bg := true
	noRetry := operations.WithRetries(retry.Config{Strategy: "none"})
	in := interactions.NewInteractionsInput("summarize")
	body := operations.NewCreateInteractionRequestBody(interactions.CreateModelInteraction{
		Model: "gemini-2.5-flash", Background: &bg, Input: &in,
		WebhookConfig: &interactions.WebhookConfig{UserMetadata: map[string]any{"lrosink_intent": "int_i", "n": json.Number("12345678901234567890")}},
	})
	resp, err := client.Interactions.Create(ctx, operations.CreateInteractionRequest{Body: body}, noRetry)
	if err != nil {
		t.Fatalf("Interactions.Create: %v", err)
	}
	it := resp.Interaction
	if it.ID == nil || it.Status != interactions.InteractionStatusInProgress || it.WebhookConfig == nil ||
		it.WebhookConfig.UserMetadata["lrosink_intent"] != "int_i" {
		t.Fatalf("created %+v", it)
	}
	reqs := fake.Requests()
	if last := reqs[len(reqs)-1]; !bytes.Contains(last.Body, []byte(`"user_metadata":{"lrosink_intent":"int_i","n":12345678901234567890}`)) {
		t.Errorf("the Interactions client sent %s", last.Body)
	}
	got, err := client.Interactions.Get(ctx, operations.GetInteractionByIDRequest{ID: *it.ID}, noRetry)
	if err != nil || got.Interaction.WebhookConfig == nil || got.Interaction.Model == nil || *got.Interaction.Model != "gemini-2.5-flash" {
		t.Fatalf("Get: %+v %v", got, err)
	}
	agentIn := interactions.NewInteractionsInput("research this")
	agent := operations.NewCreateInteractionRequestBody(interactions.CreateAgentInteraction{
		Agent: interactions.AgentOptionDeepResearchProPreview122025, Background: &bg, Input: &agentIn,
	})
	resp, err = client.Interactions.Create(ctx, operations.CreateInteractionRequest{Body: agent}, noRetry)
	if err != nil || resp.Interaction.Agent == nil || resp.Interaction.Status != interactions.InteractionStatusInProgress {
		t.Fatalf("agent Create: %+v %v", resp, err)
	}
	if n := fake.Creates(fakegemini.KindInteraction); n != 2 {
		t.Errorf("Creates(interaction) = %d, want 2", n)
	}
	d, err := fake.Delivery("interactions/"+*it.ID, "interaction.completed", t0)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := webhook.Parse(d, webhook.Verified{ID: "msg_2", Method: webhook.MethodHMAC})
	if err != nil || ev.Name != *it.ID || ev.Kind != "interaction" || ev.UserMetadata["n"] != json.Number("12345678901234567890") {
		t.Errorf("delivery %s parsed to %+v (%v)", d, ev, err)
	}
}
