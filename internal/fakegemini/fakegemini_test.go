package fakegemini_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genai"
	"google.golang.org/genai/interactions/models/interactions"

	"github.com/lrosink/lrosink/internal/fakegemini"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newClient(t *testing.T, baseURL string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(t.Context(), &genai.ClientConfig{
		APIKey:      fakegemini.DefaultAPIKey,
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: baseURL},
	})
	if err != nil {
		t.Fatalf("genai.NewClient: %v", err)
	}
	return c
}

func setup(t *testing.T, opts ...fakegemini.Option) (*fakegemini.Server, *genai.Client, string) {
	t.Helper()
	fake := fakegemini.New(opts...)
	srv := fake.Start(t)
	return fake, newClient(t, srv.URL), srv.URL
}

func rawGet(t *testing.T, url, key string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("x-goog-api-key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func apiCode(t *testing.T, err error) int {
	t.Helper()
	var ae genai.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not a genai.APIError", err, err)
	}
	return ae.Code
}

// TestAPIKeyRequired: the fake refuses a request as the live API does
// (GEMINI.md §10): no key is 403 PERMISSION_DENIED "unregistered callers";
// a wrong key is 400 INVALID_ARGUMENT, reason API_KEY_INVALID, with a
// DebugInfo detail that echoes the key.
func TestAPIKeyRequired(t *testing.T) {
	fake := fakegemini.New()
	srv := fake.Start(t)
	fake.SetBatch("b1", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})

	type status struct {
		Error struct {
			Code    int              `json:"code"`
			Message string           `json:"message"`
			Status  string           `json:"status"`
			Details []map[string]any `json:"details"`
		} `json:"error"`
	}
	decode := func(body []byte) status {
		var s status
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatalf("error body %s: %v", body, err)
		}
		return s
	}

	resp, body := rawGet(t, srv.URL+"/v1beta/batches/b1", "")
	if s := decode(body); resp.StatusCode != http.StatusForbidden || s.Error.Code != 403 || s.Error.Status != "PERMISSION_DENIED" ||
		!strings.Contains(s.Error.Message, "unregistered callers") {
		t.Errorf("no key: %d %s", resp.StatusCode, body)
	}

	const wrong = "AIzaSyWRONG-key-0123456789"
	resp, body = rawGet(t, srv.URL+"/v1beta/batches/b1", wrong)
	s := decode(body)
	if resp.StatusCode != http.StatusBadRequest || s.Error.Code != 400 || s.Error.Status != "INVALID_ARGUMENT" || s.Error.Message != fakegemini.MsgInvalidKey {
		t.Errorf("wrong key: %d %s", resp.StatusCode, body)
	}
	var reason, debug string
	for _, d := range s.Error.Details {
		switch d["@type"] {
		case "type.googleapis.com/google.rpc.ErrorInfo":
			reason, _ = d["reason"].(string)
		case "type.googleapis.com/google.rpc.DebugInfo":
			debug, _ = d["detail"].(string)
		}
	}
	if reason != "API_KEY_INVALID" || !strings.Contains(debug, wrong) {
		t.Errorf("wrong key details: reason %q, debug %q", reason, debug)
	}

	resp, _ = rawGet(t, srv.URL+"/v1beta/batches/b1", fakegemini.DefaultAPIKey)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("right key: status %d", resp.StatusCode)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 || reqs[0].HasAPIKey || !reqs[1].HasAPIKey || !reqs[2].HasAPIKey {
		t.Errorf("requests = %+v", reqs)
	}
	if got := fake.Calls("/v1beta/batches/b1"); got != 3 {
		t.Errorf("Calls = %d, want 3 (rejected requests count too)", got)
	}
}

// TestAuthErrorsThroughSDK: both SDK clients see the live status codes.
func TestAuthErrorsThroughSDK(t *testing.T) {
	fake := fakegemini.New(fakegemini.WithAPIKey("the-right-key"))
	srv := fake.Start(t)
	fake.SetBatch("b1", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	client, err := genai.NewClient(t.Context(), &genai.ClientConfig{APIKey: "a-wrong-key", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Batches.Get(t.Context(), "batches/b1", nil)
	var ae genai.APIError
	if !errors.As(err, &ae) || ae.Code != 400 || ae.Status != "INVALID_ARGUMENT" || len(ae.Details) != 3 {
		t.Errorf("genai error %#v", err)
	}
	if !strings.Contains(err.Error(), "a-wrong-key") {
		t.Errorf("the SDK's error text no longer echoes the key (the scrubbing tests rely on it): %v", err)
	}
}

func TestWithAPIKey(t *testing.T) {
	fake := fakegemini.New(fakegemini.WithAPIKey("other"))
	srv := fake.Start(t)
	fake.SetBatch("b1", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	if resp, _ := rawGet(t, srv.URL+"/v1beta/batches/b1", fakegemini.DefaultAPIKey); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("default key accepted: %d", resp.StatusCode)
	}
	if resp, _ := rawGet(t, srv.URL+"/v1beta/batches/b1", "other"); resp.StatusCode != http.StatusOK {
		t.Errorf("configured key rejected: %d", resp.StatusCode)
	}
}

func TestBatchThroughSDK(t *testing.T) {
	fake, client, _ := setup(t)
	ctx := t.Context()
	fake.SetBatch("done", fakegemini.BatchState{
		State: "BATCH_STATE_SUCCEEDED", DisplayName: "nightly", Model: "models/gemini-x",
		CreateTime: t0, UpdateTime: t0.Add(time.Minute), EndTime: t0.Add(time.Minute),
		ResponsesFile: "files/out1",
	})
	fake.SetBatch("inline", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", InlinedResponses: 3, UpdateTime: t0})
	fake.SetBatch("notime", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	fake.SetBatch("failed", fakegemini.BatchState{State: "BATCH_STATE_FAILED", ErrorCode: 3, ErrorMessage: "bad input", UpdateTime: t0})

	job, err := client.Batches.Get(ctx, "batches/done", nil)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if job.Name != "batches/done" || job.State != genai.JobStateSucceeded || job.DisplayName != "nightly" || job.Model != "models/gemini-x" {
		t.Errorf("job = %+v", job)
	}
	if !job.UpdateTime.Equal(t0.Add(time.Minute)) || !job.CreateTime.Equal(t0) || !job.EndTime.Equal(t0.Add(time.Minute)) {
		t.Errorf("times: create %v update %v end %v", job.CreateTime, job.UpdateTime, job.EndTime)
	}
	if job.Dest == nil || job.Dest.FileName != "files/out1" {
		t.Errorf("dest = %+v", job.Dest)
	}

	job, err = client.Batches.Get(ctx, "batches/inline", nil)
	if err != nil {
		t.Fatalf("Get inline: %v", err)
	}
	if job.Dest == nil || len(job.Dest.InlinedResponses) != 3 {
		t.Errorf("inlined dest = %+v", job.Dest)
	}

	job, err = client.Batches.Get(ctx, "batches/notime", nil)
	if err != nil {
		t.Fatalf("Get notime: %v", err)
	}
	if !job.UpdateTime.IsZero() || job.State != genai.JobStateRunning {
		t.Errorf("notime: state %s update %v, want RUNNING and zero", job.State, job.UpdateTime)
	}

	// The SDK drops the Operation error in Gemini mode; the raw body has it.
	job, err = client.Batches.Get(ctx, "batches/failed", nil)
	if err != nil {
		t.Fatalf("Get failed: %v", err)
	}
	if job.State != genai.JobStateFailed || job.Error != nil {
		t.Errorf("failed: state %s error %+v", job.State, job.Error)
	}
}

func TestBatchRawShape(t *testing.T) {
	fake := fakegemini.New()
	srv := fake.Start(t)
	fake.SetBatch("f", fakegemini.BatchState{State: "BATCH_STATE_FAILED", ErrorCode: 3, ErrorMessage: "bad input"})
	fake.SetBatch("r", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})

	_, body := rawGet(t, srv.URL+"/v1beta/batches/f", fakegemini.DefaultAPIKey)
	var op map[string]any
	if err := json.Unmarshal(body, &op); err != nil {
		t.Fatal(err)
	}
	md, _ := op["metadata"].(map[string]any)
	errObj, _ := op["error"].(map[string]any)
	if op["name"] != "batches/f" || op["done"] != true || md["state"] != "BATCH_STATE_FAILED" ||
		md["@type"] == nil || errObj["code"] != float64(3) || errObj["message"] != "bad input" {
		t.Errorf("operation = %s", body)
	}
	if _, ok := md["updateTime"]; ok {
		t.Errorf("zero update time must be omitted: %s", body)
	}

	_, body = rawGet(t, srv.URL+"/v1beta/batches/r", fakegemini.DefaultAPIKey)
	if strings.Contains(string(body), `"done"`) || strings.Contains(string(body), `"error"`) {
		t.Errorf("running batch: %s", body)
	}
}

func TestNotFoundAndDelete(t *testing.T) {
	fake, client, _ := setup(t)
	ctx := t.Context()
	fake.SetBatch("b1", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	fake.SetVideo("veo", "v1", fakegemini.VideoState{})
	fake.SetInteraction("i1", fakegemini.InteractionState{Status: "in_progress"})

	fake.DeleteBatch("b1")
	fake.DeleteVideo("veo", "v1")
	fake.DeleteInteraction("i1")

	_, err := client.Batches.Get(ctx, "batches/b1", nil)
	if code := apiCode(t, err); code != 404 {
		t.Errorf("batch code %d", code)
	}
	_, err = client.Operations.GetVideosOperation(ctx, &genai.GenerateVideosOperation{Name: "models/veo/operations/v1"}, nil)
	if code := apiCode(t, err); code != 404 {
		t.Errorf("video code %d", code)
	}
	var ae genai.APIError
	errors.As(err, &ae)
	if ae.Status != "NOT_FOUND" || ae.Message != "not found" {
		t.Errorf("404 body = %+v", ae)
	}
	if _, err := client.Interactions.Get(ctx, interactionReq("i1")); err == nil {
		t.Error("deleted interaction: no error")
	}
	if _, err := client.Batches.Get(ctx, "batches/never", nil); apiCode(t, err) != 404 {
		t.Error("unknown batch: not 404")
	}
}

// TestNotFoundUntil: an operation scripted to be unknown for a while
// answers 404 (and a batch is not listed) until then on the fake's clock,
// and is answered as scripted from that time on.
func TestNotFoundUntil(t *testing.T) {
	now := t0
	fake, client, _ := setup(t, fakegemini.WithClock(func() time.Time { return now }))
	ctx := t.Context()
	fake.SetBatch("late", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", NotFoundUntil: t0.Add(time.Minute)})
	fake.SetInteraction("late", fakegemini.InteractionState{Status: "completed", NotFoundUntil: t0.Add(time.Minute)})

	if _, err := client.Batches.Get(ctx, "batches/late", nil); apiCode(t, err) != 404 {
		t.Errorf("batch before its time: %v, want 404", err)
	}
	if page, err := client.Batches.List(ctx, nil); err != nil || len(page.Items) != 0 {
		t.Errorf("listing before its time: %d items, %v", len(page.Items), err)
	}
	if _, err := client.Interactions.Get(ctx, interactionReq("late")); err == nil {
		t.Error("interaction before its time: no error")
	}
	now = t0.Add(time.Minute)
	if job, err := client.Batches.Get(ctx, "batches/late", nil); err != nil || job.State != genai.JobStateRunning {
		t.Errorf("batch at its time: %+v %v", job, err)
	}
	if page, err := client.Batches.List(ctx, nil); err != nil || len(page.Items) != 1 {
		t.Errorf("listing at its time: %d items, %v", len(page.Items), err)
	}
	if resp, err := client.Interactions.Get(ctx, interactionReq("late")); err != nil || resp.Interaction.Status != "completed" {
		t.Errorf("interaction at its time: %v", err)
	}
}

func TestBatchListPaging(t *testing.T) {
	fake, client, _ := setup(t)
	ctx := t.Context()
	for i := range 5 {
		fake.SetBatch(fmt.Sprintf("b%d", i), fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	}
	fake.SetBatch("b0", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED"}) // keeps its place

	var names []string
	var states []genai.JobState
	page, err := client.Batches.List(ctx, &genai.ListBatchJobsConfig{PageSize: 2})
	for pages := 0; ; pages++ {
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		for _, j := range page.Items {
			names = append(names, j.Name)
			states = append(states, j.State)
		}
		page, err = page.Next(ctx)
		if errors.Is(err, genai.ErrPageDone) {
			break
		}
	}
	// Newest first, as live; a replaced batch keeps its place.
	want := []string{"batches/b4", "batches/b3", "batches/b2", "batches/b1", "batches/b0"}
	if !slices.Equal(names, want) {
		t.Errorf("names = %v, want %v", names, want)
	}
	if states[4] != genai.JobStateSucceeded {
		t.Errorf("b0 state = %s", states[4])
	}
	var queries []string
	for _, r := range fake.Requests() {
		queries = append(queries, r.Query.Encode())
	}
	wantQ := []string{"pageSize=2", "pageSize=2&pageToken=p2", "pageSize=2&pageToken=p4"}
	if !slices.Equal(queries, wantQ) {
		t.Errorf("queries = %q, want %q", queries, wantQ)
	}
}

// TestBatchListNewestFirst: create times order the list, latest first,
// whatever order the batches were set in.
func TestBatchListNewestFirst(t *testing.T) {
	fake, client, _ := setup(t)
	fake.SetBatch("mid", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", CreateTime: t0.Add(time.Hour)})
	fake.SetBatch("new", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", CreateTime: t0.Add(2 * time.Hour)})
	fake.SetBatch("old", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", CreateTime: t0})
	page, err := client.Batches.List(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range page.Items {
		names = append(names, j.Name)
	}
	if want := []string{"batches/new", "batches/mid", "batches/old"}; !slices.Equal(names, want) {
		t.Errorf("names = %v, want %v", names, want)
	}
}

func TestBatchListBadToken(t *testing.T) {
	_, client, _ := setup(t)
	_, err := client.Batches.List(t.Context(), &genai.ListBatchJobsConfig{PageToken: "garbage"})
	if code := apiCode(t, err); code != 400 {
		t.Errorf("code %d, want 400", code)
	}
}

func TestVideoThroughSDK(t *testing.T) {
	fake, client, srv := setup(t)
	ctx := t.Context()
	fake.SetVideo("veo-3", "run", fakegemini.VideoState{})
	fake.SetVideo("veo-3", "ok", fakegemini.VideoState{Done: true, VideoURIs: []string{"https://v/1", "https://v/2"},
		RAIMediaFilteredCount: 1, RAIMediaFilteredReasons: []string{"policy"}})
	fake.SetVideo("veo-3", "bad", fakegemini.VideoState{Done: true, ErrorCode: 13, ErrorMessage: "boom"})

	get := func(id string) *genai.GenerateVideosOperation {
		t.Helper()
		op, err := client.Operations.GetVideosOperation(ctx, &genai.GenerateVideosOperation{Name: "models/veo-3/operations/" + id}, nil)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		return op
	}
	if op := get("run"); op.Done || op.Error != nil || op.Response != nil || op.Name != "models/veo-3/operations/run" {
		t.Errorf("running = %+v", op)
	}
	op := get("ok")
	if !op.Done || op.Response == nil || len(op.Response.GeneratedVideos) != 2 ||
		op.Response.GeneratedVideos[1].Video.URI != "https://v/2" || op.Response.RAIMediaFilteredCount != 1 {
		t.Errorf("done = %+v", op)
	}
	// Every video RAI-filtered: done, a response, no generatedSamples.
	fake.SetVideo("veo-3", "rai", fakegemini.VideoState{Done: true, RAIMediaFilteredCount: 1,
		RAIMediaFilteredReasons: []string{"Unable to generate videos: the prompt violates usage guidelines."}})
	resp, body := rawGet(t, srv+"/v1beta/models/veo-3/operations/rai", fakegemini.DefaultAPIKey)
	if resp.StatusCode != 200 || strings.Contains(string(body), "generatedSamples") || !strings.Contains(string(body), `"raiMediaFilteredCount":1`) {
		t.Errorf("RAI answer %s", body)
	}
	if op := get("rai"); !op.Done || op.Response == nil || len(op.Response.GeneratedVideos) != 0 || op.Response.RAIMediaFilteredCount != 1 {
		t.Errorf("RAI = %+v", op)
	}
	op = get("bad")
	if !op.Done || op.Error["code"] != float64(13) || op.Error["message"] != "boom" || op.Response != nil {
		t.Errorf("failed = %+v", op)
	}
	if fake.Calls("/v1beta/models/veo-3/operations/ok") != 1 {
		t.Errorf("calls = %d", fake.Calls("/v1beta/models/veo-3/operations/ok"))
	}
}

func TestInteractionThroughSDK(t *testing.T) {
	fake, client, _ := setup(t)
	fake.SetInteraction("v1_abc", fakegemini.InteractionState{
		Status: "failed", Created: t0, Updated: t0.Add(time.Second),
		ErrorCode: "quota", ErrorMessage: "out of quota", OutputText: "partial",
	})
	fake.SetInteraction("raw", fakegemini.InteractionState{Status: "completed", Updated: t0, UpdatedRaw: "yesterday"})

	resp, err := client.Interactions.Get(t.Context(), interactionReq("v1_abc"))
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	it := resp.Interaction
	if it == nil || it.ID == nil || *it.ID != "v1_abc" || it.Status != "failed" {
		t.Fatalf("interaction = %+v", it)
	}
	if it.Updated == nil || *it.Updated != "2026-03-01T12:00:01Z" || it.Created == nil || *it.Created != "2026-03-01T12:00:00Z" {
		t.Errorf("times: created %v updated %v", it.Created, it.Updated)
	}
	if len(it.Errors) != 1 || *it.Errors[0].Code != "quota" || *it.Errors[0].Message != "out of quota" {
		t.Errorf("errors = %+v", it.Errors)
	}
	if it.OutputText == nil || *it.OutputText != "partial" {
		t.Errorf("output text = %v", it.OutputText)
	}

	// A failure whose error sits only in a model_output step.
	fake.SetInteraction("step", fakegemini.InteractionState{Status: "failed", Updated: t0,
		StepError: &fakegemini.StepError{Code: 13, Message: "model crashed"}})
	resp, err = client.Interactions.Get(t.Context(), interactionReq("step"))
	if err != nil {
		t.Fatalf("get step: %v", err)
	}
	var stepErr *interactions.Status
	for _, st := range resp.Interaction.Steps {
		if st.ModelOutputStep != nil && st.ModelOutputStep.Error != nil {
			stepErr = st.ModelOutputStep.Error
		}
	}
	if len(resp.Interaction.Errors) != 0 || stepErr == nil || stepErr.Code == nil || *stepErr.Code != 13 || *stepErr.Message != "model crashed" {
		t.Errorf("step error: errors %+v, step %+v", resp.Interaction.Errors, stepErr)
	}

	resp, err = client.Interactions.Get(t.Context(), interactionReq("raw"))
	if err != nil {
		t.Fatalf("get raw: %v", err)
	}
	if resp.Interaction.Updated == nil || *resp.Interaction.Updated != "yesterday" {
		t.Errorf("raw updated = %v", resp.Interaction.Updated)
	}
}

func TestFailNext(t *testing.T) {
	fake := fakegemini.New()
	srv := fake.Start(t)
	fake.SetBatch("b1", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	fake.SetBatch("b2", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	key := fakegemini.DefaultAPIKey

	fake.FailNext("/v1beta/batches/b1", http.StatusTooManyRequests, 2)
	fake.FailNext("/v1beta/batches/b1", http.StatusServiceUnavailable, 1)
	// Another path is unaffected.
	if resp, _ := rawGet(t, srv.URL+"/v1beta/batches/b2", key); resp.StatusCode != 200 {
		t.Errorf("b2: %d", resp.StatusCode)
	}
	for i, want := range []int{429, 429, 503, 200} {
		resp, body := rawGet(t, srv.URL+"/v1beta/batches/b1", key)
		if resp.StatusCode != want {
			t.Errorf("call %d: status %d, want %d", i, resp.StatusCode, want)
		}
		if want == 429 {
			// As live: RetryInfo in details[], no Retry-After header.
			if resp.Header.Get("Retry-After") != "" || !strings.Contains(string(body), "RESOURCE_EXHAUSTED") ||
				!strings.Contains(string(body), `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"}`) {
				t.Errorf("429: Retry-After %q body %s", resp.Header.Get("Retry-After"), body)
			}
		}
		if want == 503 && !strings.Contains(string(body), `"code":503`) {
			t.Errorf("503 body %s", body)
		}
	}
	if fake.Calls("/v1beta/batches/b1") != 4 || fake.TotalCalls() != 5 {
		t.Errorf("calls b1 %d total %d", fake.Calls("/v1beta/batches/b1"), fake.TotalCalls())
	}

	// Forever, for every path, until cleared.
	fake.FailNext("", http.StatusInternalServerError, -1)
	for range 3 {
		if resp, _ := rawGet(t, srv.URL+"/v1beta/batches/b2", key); resp.StatusCode != 500 {
			t.Errorf("forever fault: %d", resp.StatusCode)
		}
	}
	fake.ClearFaults()
	if resp, _ := rawGet(t, srv.URL+"/v1beta/batches/b2", key); resp.StatusCode != 200 {
		t.Errorf("after ClearFaults: %d", resp.StatusCode)
	}

	// Unauthenticated requests do not consume faults.
	fake.FailNext("/v1beta/batches/b2", http.StatusInternalServerError, 1)
	if resp, _ := rawGet(t, srv.URL+"/v1beta/batches/b2", ""); resp.StatusCode != 403 {
		t.Errorf("no key: %d", resp.StatusCode)
	}
	if resp, _ := rawGet(t, srv.URL+"/v1beta/batches/b2", key); resp.StatusCode != 500 {
		t.Errorf("fault consumed by unauthenticated request: %d", resp.StatusCode)
	}

	fake.FailNextMatching(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/b2") }, http.StatusForbidden, 1)
	if resp, _ := rawGet(t, srv.URL+"/v1beta/batches/b2", key); resp.StatusCode != 403 {
		t.Errorf("matcher fault: %d", resp.StatusCode)
	}
}

// TestFailNextWith: a 429 with the delay a test names (and a Retry-After
// only when asked), and 499 CANCELLED.
func TestFailNextWith(t *testing.T) {
	fake := fakegemini.New()
	srv := fake.Start(t)
	fake.SetBatch("b1", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	all := func(*http.Request) bool { return true }
	fake.FailNextWith(all, fakegemini.Fault{Status: 429, RetryDelay: 37 * time.Second}, 1)
	fake.FailNextWith(all, fakegemini.Fault{Status: 429, RetryDelay: 1500 * time.Millisecond, RetryAfter: "2"}, 1)
	fake.FailNextWith(all, fakegemini.Fault{Status: 429, RetryDelay: -1}, 1)
	fake.FailNext("", fakegemini.StatusClientClosedRequest, 1)
	for i, want := range []struct {
		status           int
		retryAfter, body string
		absent           string
	}{
		{429, "", `"retryDelay":"37s"`, ""},
		{429, "2", `"retryDelay":"1.5s"`, ""},
		{429, "", `"RESOURCE_EXHAUSTED"`, "RetryInfo"},
		{499, "", `{"error":{"code":499,"message":"The operation was cancelled.","status":"CANCELLED"}}`, ""},
	} {
		resp, body := rawGet(t, srv.URL+"/v1beta/batches/b1", fakegemini.DefaultAPIKey)
		if resp.StatusCode != want.status || resp.Header.Get("Retry-After") != want.retryAfter || !strings.Contains(string(body), want.body) ||
			(want.absent != "" && strings.Contains(string(body), want.absent)) {
			t.Errorf("call %d: %d Retry-After %q %s", i, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
}

func TestProtoDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{37 * time.Second: "37s", 1500 * time.Millisecond: "1.5s", time.Nanosecond: "0.000000001s", 0: "0s"} {
		if got := fakegemini.ProtoDuration(d); got != want {
			t.Errorf("ProtoDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestFailNextDrop(t *testing.T) {
	fake, client, _ := setup(t)
	fake.SetBatch("b1", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	fake.FailNext("/v1beta/batches/b1", fakegemini.Drop, 1)
	_, err := client.Batches.Get(t.Context(), "batches/b1", nil)
	if err == nil {
		t.Fatal("dropped connection: no error")
	}
	var ae genai.APIError
	if errors.As(err, &ae) {
		t.Errorf("dropped connection gave an API error: %v", err)
	}
	if _, err := client.Batches.Get(t.Context(), "batches/b1", nil); err != nil {
		t.Errorf("after the drop: %v", err)
	}
}

func TestUnknownRoutes(t *testing.T) {
	fake := fakegemini.New()
	srv := fake.Start(t)
	for _, p := range []string{"/v1beta/nothing", "/v2/batches/x", "/v1beta/models/m/operations", "/v1beta/webhooks/missing:ping"} {
		if resp, _ := rawGet(t, srv.URL+p, fakegemini.DefaultAPIKey); resp.StatusCode != 404 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/v1beta/batches", nil)
	req.Header.Set("x-goog-api-key", fakegemini.DefaultAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("DELETE /batches: %d", resp.StatusCode)
	}
}

func TestConcurrentUse(t *testing.T) {
	fake, client, _ := setup(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id := fmt.Sprintf("b%d", i)
			for j := range 10 {
				fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: t0.Add(time.Duration(j))})
				if _, err := client.Batches.Get(ctx, "batches/"+id, nil); err != nil {
					t.Errorf("get %s: %v", id, err)
				}
				_ = fake.Calls("/v1beta/batches/" + id)
				_ = fake.Requests()
			}
		})
	}
	wg.Wait()
	if fake.TotalCalls() != 80 {
		t.Errorf("total calls %d, want 80", fake.TotalCalls())
	}
}

func decodeSecret(t *testing.T, s string) []byte {
	t.Helper()
	tail, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		t.Fatalf("secret %q lacks whsec_", s)
	}
	b, err := base64.StdEncoding.DecodeString(tail)
	if err != nil {
		t.Fatalf("secret %q: %v", s, err)
	}
	return b
}

func TestSecretsAreDeterministic(t *testing.T) {
	secrets := func() []string {
		fake := fakegemini.New(fakegemini.WithClock(func() time.Time { return t0 }))
		srv := fake.Start(t)
		c := newClient(t, srv.URL)
		var out []string
		for range 2 {
			resp, err := c.Webhooks.Create(t.Context(), createReq("https://example.com/h"))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, *resp.Webhook.NewSigningSecret)
		}
		return out
	}
	a, b := secrets(), secrets()
	if !slices.Equal(a, b) || a[0] == a[1] {
		t.Errorf("secrets %q and %q: want equal across servers, distinct within one", a, b)
	}
}
