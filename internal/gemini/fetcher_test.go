package gemini_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/fetcherr"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/testutil"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// harness is a Fetcher on a real genai client talking to the fake over
// real HTTP, with the sleep recorded instead of slept.
type harness struct {
	fake *fakegemini.Server
	url  string
	f    *gemini.Fetcher

	mu     sync.Mutex
	sleeps []time.Duration
}

func (h *harness) sleep(ctx context.Context, d time.Duration) error {
	h.mu.Lock()
	h.sleeps = append(h.sleeps, d)
	h.mu.Unlock()
	return ctx.Err()
}

func (h *harness) slept() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.sleeps)
}

func genaiClient(t *testing.T, baseURL, key string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(t.Context(), &genai.ClientConfig{
		APIKey:      key,
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: baseURL},
	})
	if err != nil {
		t.Fatalf("genai.NewClient: %v", err)
	}
	return c
}

func newHarness(t *testing.T, edit ...func(*gemini.Options)) *harness {
	t.Helper()
	h := &harness{fake: fakegemini.New()}
	h.url = h.fake.Start(t).URL
	o := gemini.Options{Client: genaiClient(t, h.url, fakegemini.DefaultAPIKey), Sleep: h.sleep}
	for _, e := range edit {
		e(&o)
	}
	f, err := gemini.New(o)
	if err != nil {
		t.Fatalf("gemini.New: %v", err)
	}
	h.f = f
	return h
}

func (h *harness) fetch(t *testing.T, kind opname.Kind, name string) event.Event {
	t.Helper()
	ev, err := h.f.Fetch(t.Context(), kind, name)
	if err != nil {
		t.Fatalf("Fetch(%s, %s): %v", kind, name, err)
	}
	return ev
}

func checkCommon(t *testing.T, ev event.Event, kind opname.Kind, name string) {
	t.Helper()
	if ev.Name != name || ev.Kind != kind || ev.Source != event.SourceReconcile {
		t.Errorf("event name %q kind %q source %q, want %q %q %q", ev.Name, ev.Kind, ev.Source, name, kind, event.SourceReconcile)
	}
}

func TestBatchStates(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		raw  string
		want lifecycle.State
	}{
		{"BATCH_STATE_PENDING", lifecycle.Pending},
		{"BATCH_STATE_RUNNING", lifecycle.Running},
		{"BATCH_STATE_SUCCEEDED", lifecycle.Succeeded},
		{"BATCH_STATE_FAILED", lifecycle.Failed},
		{"BATCH_STATE_CANCELLED", lifecycle.Cancelled},
		{"BATCH_STATE_EXPIRED", lifecycle.Expired},
		{"JOB_STATE_PENDING", lifecycle.Pending},
		{"JOB_STATE_QUEUED", lifecycle.Pending},
		{"JOB_STATE_RUNNING", lifecycle.Running},
		{"JOB_STATE_SUCCEEDED", lifecycle.Succeeded},
		{"JOB_STATE_FAILED", lifecycle.Failed},
		{"JOB_STATE_CANCELLED", lifecycle.Cancelled},
		{"JOB_STATE_EXPIRED", lifecycle.Expired},
		// Unknown to lrosink: kept raw, never a guessed terminal.
		{"BATCH_STATE_UNSPECIFIED", "JOB_STATE_UNSPECIFIED"},
		{"JOB_STATE_UNSPECIFIED", "JOB_STATE_UNSPECIFIED"},
		{"", "JOB_STATE_UNSPECIFIED"},
		{"JOB_STATE_CANCELLING", "JOB_STATE_CANCELLING"},
		{"JOB_STATE_PAUSED", "JOB_STATE_PAUSED"},
		{"JOB_STATE_UPDATING", "JOB_STATE_UPDATING"},
		{"JOB_STATE_PARTIALLY_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED"},
		{"BATCH_STATE_SOMETHING_NEW", "BATCH_STATE_SOMETHING_NEW"},
	}
	for i, c := range cases {
		t.Run(c.raw, func(t *testing.T) {
			id := fmt.Sprintf("b%d", i)
			upd := t0.Add(time.Duration(i) * time.Second)
			h.fake.SetBatch(id, fakegemini.BatchState{State: c.raw, UpdateTime: upd})
			ev := h.fetch(t, opname.KindBatch, "batches/"+id)
			checkCommon(t, ev, opname.KindBatch, "batches/"+id)
			if ev.State != c.want {
				t.Errorf("state %q, want %q", ev.State, c.want)
			}
			if ev.State.Known() != c.want.Known() {
				t.Errorf("Known() = %v", ev.State.Known())
			}
			// The raw status is the job state as the SDK reports it: it
			// translates the BATCH_STATE_* it knows and passes others on.
			want := strings.Replace(c.raw, "BATCH_STATE_", "JOB_STATE_", 1)
			if c.raw == "BATCH_STATE_SOMETHING_NEW" {
				want = c.raw
			}
			if ev.GeminiStatus != want {
				t.Errorf("gemini status %q, want %q", ev.GeminiStatus, want)
			}
			if !ev.UpdateTime.Equal(upd) {
				t.Errorf("update time %v, want %v", ev.UpdateTime, upd)
			}
		})
	}
}

func TestBatchZeroUpdateTime(t *testing.T) {
	h := newHarness(t)
	h.fake.SetBatch("b", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED"})
	ev := h.fetch(t, opname.KindBatch, "batches/b")
	if !ev.UpdateTime.IsZero() {
		t.Errorf("update time %v, want zero", ev.UpdateTime)
	}
	if ev.State != lifecycle.Succeeded {
		t.Errorf("state %s", ev.State)
	}
}

func TestBatchOutput(t *testing.T) {
	h := newHarness(t)
	h.fake.SetBatch("file", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", ResponsesFile: "files/out"})
	h.fake.SetBatch("inline", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", InlinedResponses: 2})
	h.fake.SetBatch("none", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})

	if ev := h.fetch(t, opname.KindBatch, "batches/file"); len(ev.Output) != 1 || ev.Output["responses_file"] != "files/out" {
		t.Errorf("file output = %v", ev.Output)
	}
	if ev := h.fetch(t, opname.KindBatch, "batches/inline"); len(ev.Output) != 1 || ev.Output["inlined_response_count"] != 2 {
		t.Errorf("inline output = %v", ev.Output)
	}
	if ev := h.fetch(t, opname.KindBatch, "batches/none"); ev.Output != nil || ev.Error != nil {
		t.Errorf("running: output %v error %v", ev.Output, ev.Error)
	}
}

func TestBatchFailedErrorDetail(t *testing.T) {
	h := newHarness(t)
	h.fake.SetBatch("f", fakegemini.BatchState{State: "BATCH_STATE_FAILED", UpdateTime: t0, ErrorCode: 3, ErrorMessage: "invalid input file"})
	h.fake.SetBatch("s", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: t0, ResponsesFile: "files/o"})

	ev := h.fetch(t, opname.KindBatch, "batches/f")
	if ev.State != lifecycle.Failed || ev.Error == nil || *ev.Error != (event.ErrorInfo{Code: 3, Message: "invalid input file"}) {
		t.Fatalf("event = %+v (error %+v)", ev, ev.Error)
	}
	// One GET of the resource, with the key: the error comes from the same
	// answer as the state.
	reqs := h.fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	if r := reqs[0]; r.Method != http.MethodGet || r.Path != "/v1beta/batches/f" || !r.HasAPIKey {
		t.Errorf("request %+v", r)
	}
	if ev := h.fetch(t, opname.KindBatch, "batches/s"); ev.Error != nil {
		t.Errorf("succeeded batch has error %+v", ev.Error)
	}
	if n := h.fake.Calls("/v1beta/batches/s"); n != 1 {
		t.Errorf("succeeded batch: %d calls, want 1", n)
	}
}

// TestBatchCheckIsOneGET pins the cost of checking a batch (a reconcile
// check, a hint's confirmation): one GET, whatever the state, its error and
// statistics included, retries aside.
func TestBatchCheckIsOneGET(t *testing.T) {
	stats := &fakegemini.BatchStats{RequestCount: "3", SuccessfulRequestCount: "2", FailedRequestCount: "1"}
	for name, st := range map[string]fakegemini.BatchState{
		"pending":           {State: "BATCH_STATE_PENDING", UpdateTime: t0},
		"running":           {State: "BATCH_STATE_RUNNING", UpdateTime: t0, Stats: stats},
		"succeeded":         {State: "BATCH_STATE_SUCCEEDED", UpdateTime: t0, ResponsesFile: "files/o", Stats: stats},
		"succeeded inlined": {State: "BATCH_STATE_SUCCEEDED", UpdateTime: t0, InlinedResponses: 3, Stats: stats},
		"succeeded no file": {State: "BATCH_STATE_SUCCEEDED", UpdateTime: t0},
		"failed":            {State: "BATCH_STATE_FAILED", UpdateTime: t0, ErrorCode: 3, ErrorMessage: "bad", Stats: stats},
		"cancelled":         {State: "BATCH_STATE_CANCELLED", UpdateTime: t0, Stats: stats},
		"expired":           {State: "BATCH_STATE_EXPIRED", UpdateTime: t0},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.fake.SetBatch("one", st)
			ev := h.fetch(t, opname.KindBatch, "batches/one")
			if n, total := h.fake.Calls("/v1beta/batches/one"), h.fake.TotalCalls(); n != 1 || total != 1 {
				t.Fatalf("%s: %d GETs of the batch, %d requests in all; want one", ev.State, n, total)
			}
			if ev.State.Terminal() && st.Stats != nil && ev.Output["batch_stats"] == nil {
				t.Errorf("%s: statistics missing from the one answer: %v", ev.State, ev.Output)
			}
			if ev.State == lifecycle.Failed && (ev.Error == nil || ev.Error.Code != 3) {
				t.Errorf("failed: error %+v missing from the one answer", ev.Error)
			}
		})
	}
}

// TestBatchFetchMapsAsTheSDK: the fetch reads the raw Operation, the
// listing the SDK's BatchJob; both give the same event (state, Gemini's
// status, time, output), so the SDK's mapping is kept whichever path saw
// the job.
func TestBatchFetchMapsAsTheSDK(t *testing.T) {
	h := newHarness(t, func(o *gemini.Options) { o.Now = func() time.Time { return t0 } })
	states := []fakegemini.BatchState{
		{State: "BATCH_STATE_PENDING", CreateTime: t0},
		{State: "BATCH_STATE_RUNNING", UpdateTime: t0, DisplayName: "d", Model: "models/m"},
		{State: "BATCH_STATE_SUCCEEDED", UpdateTime: t0, ResponsesFile: "files/o"},
		{State: "BATCH_STATE_SUCCEEDED", UpdateTime: t0.Add(-time.Minute), InlinedResponses: 2},
		{State: "BATCH_STATE_SUCCEEDED", EndTime: t0}, // held: no output yet
		{State: "BATCH_STATE_CANCELLED"},
		{State: "BATCH_STATE_EXPIRED", UpdateTime: t0},
		{State: "BATCH_STATE_UNSPECIFIED"},
		{State: "JOB_STATE_PAUSED"},
		{State: "BATCH_STATE_SOMETHING_NEW"},
		{},
	}
	for i, st := range states {
		h.fake.SetBatch(fmt.Sprintf("m%02d", i), st)
	}
	listed, _, err := h.f.ListBatches(t.Context(), 100, "")
	if err != nil || len(listed) != len(states) {
		t.Fatalf("ListBatches: %d events, %v", len(listed), err)
	}
	for _, l := range listed {
		got := h.fetch(t, opname.KindBatch, l.Name)
		if got.Name != l.Name || got.State != l.State || got.GeminiStatus != l.GeminiStatus || !got.UpdateTime.Equal(l.UpdateTime) ||
			!reflect.DeepEqual(got.Output, l.Output) || got.Error != nil || l.Error != nil {
			t.Errorf("%s: fetched %+v, the SDK's listing %+v", l.Name, got, l)
		}
	}
}

func TestBatchFailedWithoutErrorBody(t *testing.T) {
	h := newHarness(t)
	h.fake.SetBatch("f", fakegemini.BatchState{State: "BATCH_STATE_FAILED"})
	ev := h.fetch(t, opname.KindBatch, "batches/f")
	if ev.State != lifecycle.Failed || ev.Error != nil {
		t.Errorf("state %s error %+v", ev.State, ev.Error)
	}
}

// TestBatchCheckRetried: a transient failure of the one GET is retried,
// and the answer that comes carries the state and the detail.
func TestBatchCheckRetried(t *testing.T) {
	h := newHarness(t)
	h.fake.SetBatch("f", fakegemini.BatchState{State: "BATCH_STATE_FAILED", ErrorCode: 13, ErrorMessage: "internal"})
	h.fake.FailNext("/v1beta/batches/f", http.StatusServiceUnavailable, 1)
	ev := h.fetch(t, opname.KindBatch, "batches/f")
	if ev.State != lifecycle.Failed || ev.Error == nil || ev.Error.Code != 13 {
		t.Errorf("event %+v error %+v", ev, ev.Error)
	}
	if n := h.fake.Calls("/v1beta/batches/f"); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}
	if n := len(h.slept()); n != 1 {
		t.Errorf("%d sleeps, want 1", n)
	}
}

// TestBatchCheckUndecodable: an answer the Fetcher cannot read (a bad
// time, as the SDK's decoding refuses it too) is a permanent error, not a
// state.
func TestBatchCheckUndecodable(t *testing.T) {
	h := newHarness(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"name":"batches/x","metadata":{"state":"BATCH_STATE_SUCCEEDED","updateTime":"last tuesday"}}`))
	}))
	t.Cleanup(srv.Close)
	f, err := gemini.New(gemini.Options{Client: genaiClient(t, srv.URL, fakegemini.DefaultAPIKey), Sleep: h.sleep})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Fetch(t.Context(), opname.KindBatch, "batches/x")
	if fetcherr.KindOf(err) != fetcherr.Permanent || !strings.Contains(err.Error(), "metadata.updateTime") {
		t.Fatalf("err %v (kind %v), want a permanent decoding error naming the field", err, fetcherr.KindOf(err))
	}
}

// TestListedErrorDetailUnavailable: when the extra GET for a listed FAILED
// job's error detail keeps failing, the FAILED state the listing returned
// is still the answer, without the detail; the GET is retried only while
// the failure may be transient.
func TestListedErrorDetailUnavailable(t *testing.T) {
	for _, c := range []struct {
		name     string
		status   int
		rawCalls int
	}{
		{"final 403", http.StatusForbidden, 1},
		{"404 on the raw GET", http.StatusNotFound, 1},
		{"503 until the attempts run out", http.StatusServiceUnavailable, gemini.DefaultMaxAttempts},
		{"connection dropped every time", fakegemini.Drop, gemini.DefaultMaxAttempts},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			h := newHarness(t, func(o *gemini.Options) { o.Log = logging.New(logs, slog.LevelInfo, "") })
			h.fake.SetBatch("f", fakegemini.BatchState{State: "BATCH_STATE_FAILED", UpdateTime: t0, ErrorCode: 3, ErrorMessage: "invalid input file"})
			h.fake.FailNext("/v1beta/batches/f", c.status, -1)
			evs, _, err := h.f.ListBatches(t.Context(), 10, "")
			if err != nil || len(evs) != 1 {
				t.Fatalf("ListBatches: %+v %v", evs, err)
			}
			ev := evs[0]
			checkCommon(t, ev.Event, opname.KindBatch, "batches/f")
			if ev.State != lifecycle.Failed || ev.Error != nil || !ev.UpdateTime.Equal(t0) {
				t.Fatalf("event %+v (error %+v), want FAILED at %v without detail", ev, ev.Error, t0)
			}
			// The Fetcher's attempts show in its sleeps; with a dropped
			// connection net/http may replay a GET itself, so calls are
			// exact only for answered requests.
			if n := len(h.slept()); n != c.rawCalls-1 {
				t.Errorf("%d sleeps, want %d (%d raw GET attempts)", n, c.rawCalls-1, c.rawCalls)
			}
			if n := h.fake.Calls("/v1beta/batches/f"); c.status != fakegemini.Drop && n != c.rawCalls {
				t.Errorf("%d calls, want %d raw GET(s)", n, c.rawCalls)
			}
			if n := logs.CountLines(`"severity":"WARNING","message":"gemini: FAILED batch without its error detail`); n != 1 ||
				logs.CountLines(`"operation":"batches/f"`) != 1 || logs.CountLines(`raw GET for the error detail`) != 1 {
				t.Errorf("want one WARNING naming the operation and why, got %d: %s", n, logs.String())
			}
		})
	}
}

// TestListedErrorDetailCallerGone: when the caller's context ends during
// the detail GET of a listed FAILED job, that is no failure of the detail:
// the listing reports it, and nothing applies a FAILED without detail that
// the next check could read in full.
func TestListedErrorDetailCallerGone(t *testing.T) {
	h := newHarness(t)
	h.fake.SetBatch("f", fakegemini.BatchState{State: "BATCH_STATE_FAILED", UpdateTime: t0, ErrorCode: 3, ErrorMessage: "x"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h.fake.FailNextMatching(func(r *http.Request) bool {
		if r.URL.Path == "/v1beta/batches/f" {
			cancel() // the caller gives up while the detail GET is answered
			return true
		}
		return false
	}, http.StatusServiceUnavailable, -1)
	evs, _, err := h.f.ListBatches(ctx, 10, "")
	var te *gemini.TransientError
	if !errors.As(err, &te) || !errors.Is(err, context.Canceled) {
		t.Fatalf("ListBatches = %+v, %v; want a TransientError wrapping context.Canceled", evs, err)
	}
}

// TestListBatchesErrorDetailUnavailable: one FAILED job whose detail cannot
// be read does not cost the page: every job is returned, the others with
// their detail.
func TestListBatchesErrorDetailUnavailable(t *testing.T) {
	h := newHarness(t)
	h.fake.SetBatch("b0", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: t0})
	h.fake.SetBatch("b1", fakegemini.BatchState{State: "BATCH_STATE_FAILED", UpdateTime: t0, ErrorCode: 3, ErrorMessage: "bad"})
	h.fake.SetBatch("b2", fakegemini.BatchState{State: "BATCH_STATE_FAILED", UpdateTime: t0, ErrorCode: 9, ErrorMessage: "also bad"})
	h.fake.FailNext("/v1beta/batches/b1", http.StatusForbidden, -1)
	evs, next, err := h.f.ListBatches(t.Context(), 10, "")
	if err != nil || next != "" {
		t.Fatalf("ListBatches: %v (next %q)", err, next)
	}
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3", len(evs))
	}
	if evs[1].Name != "batches/b1" || evs[1].State != lifecycle.Failed || evs[1].Error != nil {
		t.Errorf("job without detail: %+v (error %+v)", evs[1], evs[1].Error)
	}
	// Newest first: b2, b1, b0.
	if e := evs[0].Error; evs[0].Name != "batches/b2" || e == nil || *e != (event.ErrorInfo{Code: 9, Message: "also bad"}) {
		t.Errorf("job with detail: %+v (error %+v)", evs[0], e)
	}
}

func TestVideoStates(t *testing.T) {
	h := newHarness(t)
	h.fake.SetVideo("veo-3", "run", fakegemini.VideoState{})
	h.fake.SetVideo("veo-3", "ok", fakegemini.VideoState{Done: true, VideoURIs: []string{"https://v/1", "https://v/2"}})
	h.fake.SetVideo("veo-3", "bad", fakegemini.VideoState{Done: true, ErrorCode: 3, ErrorMessage: "prompt rejected"})
	h.fake.SetVideo("veo-3", "rai", fakegemini.VideoState{Done: true, RAIMediaFilteredCount: 1, RAIMediaFilteredReasons: []string{"policy"}})

	ev := h.fetch(t, opname.KindVideo, "models/veo-3/operations/run")
	checkCommon(t, ev, opname.KindVideo, "models/veo-3/operations/run")
	if ev.State != lifecycle.Running || ev.Output != nil || ev.Error != nil || ev.GeminiStatus != "not_done" {
		t.Errorf("running = %+v", ev)
	}

	ev = h.fetch(t, opname.KindVideo, "models/veo-3/operations/ok")
	if ev.State != lifecycle.Succeeded || ev.GeminiStatus != "done" || !slices.Equal(ev.Output["video_uris"].([]string), []string{"https://v/1", "https://v/2"}) {
		t.Errorf("succeeded = %+v", ev)
	}

	ev = h.fetch(t, opname.KindVideo, "models/veo-3/operations/bad")
	if ev.State != lifecycle.Failed || ev.Error == nil || *ev.Error != (event.ErrorInfo{Code: 3, Message: "prompt rejected"}) || ev.Output != nil {
		t.Errorf("failed = %+v (error %+v)", ev, ev.Error)
	}

	ev = h.fetch(t, opname.KindVideo, "models/veo-3/operations/rai")
	if ev.State != lifecycle.Succeeded || len(ev.Output["video_uris"].([]string)) != 0 ||
		ev.Output["rai_media_filtered_count"] != 1 || !slices.Equal(ev.Output["rai_media_filtered_reasons"].([]string), []string{"policy"}) {
		t.Errorf("filtered = %+v", ev)
	}
	// Operations carry no update time.
	if !ev.UpdateTime.IsZero() {
		t.Errorf("video update time %v, want zero", ev.UpdateTime)
	}
}

func TestInteractionStates(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		status string
		want   lifecycle.State
	}{
		{"queued", lifecycle.Pending},
		{"in_progress", lifecycle.Running},
		{"requires_action", lifecycle.RequiresAction},
		{"completed", lifecycle.Succeeded},
		{"failed", lifecycle.Failed},
		{"cancelled", lifecycle.Cancelled},
		{"incomplete", lifecycle.Incomplete},
		{"budget_exceeded", lifecycle.Incomplete},
		{"requires_continuation", lifecycle.Running},
		{"brand_new", "interaction:brand_new"},
	}
	for i, c := range cases {
		t.Run(c.status, func(t *testing.T) {
			id := fmt.Sprintf("v1_%d", i)
			upd := t0.Add(time.Duration(i)*time.Second + 250*time.Millisecond)
			h.fake.SetInteraction(id, fakegemini.InteractionState{Status: c.status, Created: t0, Updated: upd})
			ev := h.fetch(t, opname.KindInteraction, "interactions/"+id)
			checkCommon(t, ev, opname.KindInteraction, "interactions/"+id)
			if ev.State != c.want || ev.State.Known() != c.want.Known() {
				t.Errorf("state %q, want %q", ev.State, c.want)
			}
			if ev.GeminiStatus != c.status {
				t.Errorf("gemini status %q, want %q", ev.GeminiStatus, c.status)
			}
			if !ev.UpdateTime.Equal(upd) {
				t.Errorf("update time %v, want %v", ev.UpdateTime, upd)
			}
		})
	}
}

func TestInteractionDetails(t *testing.T) {
	h := newHarness(t)
	h.fake.SetInteraction("noupd", fakegemini.InteractionState{Status: "in_progress", Created: t0})
	h.fake.SetInteraction("badupd", fakegemini.InteractionState{Status: "in_progress", UpdatedRaw: "last tuesday"})
	h.fake.SetInteraction("fail", fakegemini.InteractionState{Status: "failed", Updated: t0, ErrorCode: "RESOURCE_EXHAUSTED", ErrorMessage: "quota"})
	h.fake.SetInteraction("fail2", fakegemini.InteractionState{Status: "failed", Updated: t0, ErrorCode: "429", ErrorMessage: "quota"})
	h.fake.SetInteraction("done", fakegemini.InteractionState{Status: "completed", Updated: t0, OutputText: "hello",
		ErrorCode: "x", ErrorMessage: "diagnostic only"})

	if ev := h.fetch(t, opname.KindInteraction, "interactions/noupd"); !ev.UpdateTime.IsZero() {
		t.Errorf("missing updated: %v", ev.UpdateTime)
	}
	if ev := h.fetch(t, opname.KindInteraction, "interactions/badupd"); !ev.UpdateTime.IsZero() || ev.State != lifecycle.Running {
		t.Errorf("unparsable updated: %v %s", ev.UpdateTime, ev.State)
	}
	if ev := h.fetch(t, opname.KindInteraction, "interactions/fail"); ev.Error == nil || *ev.Error != (event.ErrorInfo{Message: "RESOURCE_EXHAUSTED: quota"}) {
		t.Errorf("failed error %+v", ev.Error)
	}
	if ev := h.fetch(t, opname.KindInteraction, "interactions/fail2"); ev.Error == nil || *ev.Error != (event.ErrorInfo{Code: 429, Message: "quota"}) {
		t.Errorf("numeric code error %+v", ev.Error)
	}
	ev := h.fetch(t, opname.KindInteraction, "interactions/done")
	if ev.Error != nil || ev.Output["output_text"] != "hello" {
		t.Errorf("completed: error %+v output %v", ev.Error, ev.Output)
	}
}

// kinds holds one operation per kind, its path on the fake, and how to
// script it.
var kinds = []struct {
	kind opname.Kind
	name string
	path string
	set  func(*fakegemini.Server)
	want lifecycle.State
}{
	{opname.KindBatch, "batches/b1", "/v1beta/batches/b1",
		func(s *fakegemini.Server) { s.SetBatch("b1", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"}) }, lifecycle.Running},
	{opname.KindVideo, "models/veo/operations/o1", "/v1beta/models/veo/operations/o1",
		func(s *fakegemini.Server) { s.SetVideo("veo", "o1", fakegemini.VideoState{Done: true}) }, lifecycle.Succeeded},
	{opname.KindInteraction, "interactions/i1", "/v1beta/interactions/i1",
		func(s *fakegemini.Server) { s.SetInteraction("i1", fakegemini.InteractionState{Status: "completed"}) }, lifecycle.Succeeded},
}

func TestNotFound(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.kind), func(t *testing.T) {
			h := newHarness(t)
			_, err := h.f.Fetch(t.Context(), k.kind, k.name)
			if !errors.Is(err, gemini.ErrNotFound) {
				t.Fatalf("err = %v (%T), want ErrNotFound", err, err)
			}
			var te *gemini.TransientError
			if errors.As(err, &te) {
				t.Error("404 reported as transient")
			}
			if n := h.fake.Calls(k.path); n != 1 || len(h.slept()) != 0 {
				t.Errorf("%d calls, %d sleeps; a 404 is final", n, len(h.slept()))
			}
		})
	}
}

func TestRetry429ThenSuccess(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.kind), func(t *testing.T) {
			h := newHarness(t) // default Backoff, recorded Sleep
			k.set(h.fake)
			// No RetryInfo: the backoff alone decides (TestRetryDelay).
			h.fake.FailNextWith(pathIs(k.path), fakegemini.Fault{Status: http.StatusTooManyRequests, RetryDelay: -1}, 2)

			ev := h.fetch(t, k.kind, k.name)
			if ev.State != k.want {
				t.Errorf("state %s, want %s", ev.State, k.want)
			}
			if n := h.fake.Calls(k.path); n != 3 {
				t.Errorf("%d calls, want exactly 3 (the SDK must not retry on its own)", n)
			}
			s := h.slept()
			if len(s) != 2 {
				t.Fatalf("sleeps %v, want 2", s)
			}
			if s[0] < 250*time.Millisecond || s[0] > 500*time.Millisecond ||
				s[1] < 500*time.Millisecond || s[1] > time.Second || s[1] < s[0] {
				t.Errorf("sleeps %v: want growing, in [250ms,500ms] then [500ms,1s]", s)
			}
		})
	}
}

func pathIs(p string) fakegemini.Matcher {
	return func(r *http.Request) bool { return r.URL.Path == p }
}

// TestRetryDelay: a 429 is retried no sooner than its RetryInfo.retryDelay
// asks (37s, far above the backoff), through each client lrosink reads
// with (the batch's raw GET among them); a Retry-After header, when one comes,
// counts the same way. No wall time passes: the Sleep is recorded.
func TestRetryDelay(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.kind), func(t *testing.T) {
			h := newHarness(t)
			k.set(h.fake)
			h.fake.FailNextWith(pathIs(k.path), fakegemini.Fault{Status: http.StatusTooManyRequests, RetryDelay: 37 * time.Second}, 1)
			h.fake.FailNextWith(pathIs(k.path), fakegemini.Fault{Status: http.StatusTooManyRequests, RetryDelay: time.Millisecond}, 1)
			if ev := h.fetch(t, k.kind, k.name); ev.State != k.want {
				t.Errorf("state %s, want %s", ev.State, k.want)
			}
			s := h.slept()
			if len(s) != 2 || s[0] < 37*time.Second || s[1] < 500*time.Millisecond || s[1] > time.Second {
				t.Errorf("sleeps %v: want >= 37s (asked), then the backoff's [500ms,1s] (asked less)", s)
			}
		})
	}
	t.Run("raw GET with Retry-After", func(t *testing.T) {
		h := newHarness(t)
		h.fake.SetBatch("f", fakegemini.BatchState{State: "BATCH_STATE_FAILED", UpdateTime: t0, ErrorCode: 3, ErrorMessage: "bad"})
		h.fake.FailNextWith(pathIs("/v1beta/batches/f"), fakegemini.Fault{Status: http.StatusTooManyRequests, RetryDelay: -1, RetryAfter: "45"}, 1)
		if ev := h.fetch(t, opname.KindBatch, "batches/f"); ev.Error == nil || ev.Error.Message != "bad" {
			t.Errorf("event %+v", ev)
		}
		if s := h.slept(); len(s) != 1 || s[0] != 45*time.Second {
			t.Errorf("sleeps %v, want [45s]", s)
		}
	})
}

// TestRetryDelayBeyondDeadline: a retryDelay the caller's deadline cannot
// afford is not slept: the fetch ends at once, transient, after one call.
func TestRetryDelayBeyondDeadline(t *testing.T) {
	h := newHarness(t)
	k := kinds[0]
	k.set(h.fake)
	h.fake.FailNextWith(pathIs(k.path), fakegemini.Fault{Status: http.StatusTooManyRequests, RetryDelay: 45 * time.Second}, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := h.f.Fetch(ctx, k.kind, k.name)
	var te *gemini.TransientError
	if !errors.As(err, &te) || te.Code != http.StatusTooManyRequests || te.Attempts != 1 || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("err = %v (%T), want a transient 429 after 1 attempt", err, err)
	}
	if s := h.slept(); len(s) != 0 || h.fake.Calls(k.path) != 1 {
		t.Errorf("slept %v, %d calls", s, h.fake.Calls(k.path))
	}
}

// TestRetryDelayOverMaxWait: a retryDelay over MaxWait (default 1 min) is
// not waited even without a deadline: the fetch ends at once, transient,
// and the caller's next check tries again.
func TestRetryDelayOverMaxWait(t *testing.T) {
	h := newHarness(t)
	k := kinds[0]
	k.set(h.fake)
	h.fake.FailNextWith(pathIs(k.path), fakegemini.Fault{Status: http.StatusTooManyRequests, RetryDelay: gemini.DefaultMaxWait + time.Second}, 1)
	_, err := h.f.Fetch(t.Context(), k.kind, k.name)
	var te *gemini.TransientError
	if !errors.As(err, &te) || te.Code != http.StatusTooManyRequests || te.Attempts != 1 || !strings.Contains(err.Error(), "asked to wait 1m1s") {
		t.Fatalf("err = %v (%T), want a transient 429 after 1 attempt", err, err)
	}
	if s := h.slept(); len(s) != 0 {
		t.Errorf("slept %v", s)
	}
	// Exactly MaxWait is waited.
	h.fake.FailNextWith(pathIs(k.path), fakegemini.Fault{Status: http.StatusTooManyRequests, RetryDelay: gemini.DefaultMaxWait}, 1)
	h.fetch(t, k.kind, k.name)
	if s := h.slept(); len(s) != 1 || s[0] != gemini.DefaultMaxWait {
		t.Errorf("slept %v, want [1m0s]", s)
	}
}

// Test499IsTransient: CANCELLED (499) is retried like a 503.
func Test499IsTransient(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.kind), func(t *testing.T) {
			h := newHarness(t)
			k.set(h.fake)
			h.fake.FailNext(k.path, fakegemini.StatusClientClosedRequest, 1)
			if ev := h.fetch(t, k.kind, k.name); ev.State != k.want {
				t.Errorf("state %s", ev.State)
			}
			if n := h.fake.Calls(k.path); n != 2 || len(h.slept()) != 1 {
				t.Errorf("%d calls, sleeps %v; want one retry", n, h.slept())
			}
		})
	}
}

func TestBackoffGetsAttemptNumbers(t *testing.T) {
	var attempts []int
	h := newHarness(t, func(o *gemini.Options) {
		o.Backoff = func(n int) time.Duration { attempts = append(attempts, n); return time.Duration(n) * time.Hour }
	})
	k := kinds[0]
	k.set(h.fake)
	h.fake.FailNext(k.path, http.StatusBadGateway, 3)
	h.fetch(t, k.kind, k.name)
	if !slices.Equal(attempts, []int{1, 2, 3}) || !slices.Equal(h.slept(), []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour}) {
		t.Errorf("backoff attempts %v, sleeps %v", attempts, h.slept())
	}
}

func Test500ForeverIsTransient(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.kind), func(t *testing.T) {
			h := newHarness(t)
			k.set(h.fake)
			h.fake.FailNext(k.path, http.StatusInternalServerError, -1)

			ev, err := h.f.Fetch(t.Context(), k.kind, k.name)
			var te *gemini.TransientError
			if !errors.As(err, &te) {
				t.Fatalf("err = %v (%T), want *TransientError", err, err)
			}
			if te.Attempts != gemini.DefaultMaxAttempts || te.Code != 500 || te.Name != k.name {
				t.Errorf("transient = %+v", te)
			}
			if ev.State != "" {
				t.Errorf("a transient failure produced state %q", ev.State)
			}
			if n := h.fake.Calls(k.path); n != gemini.DefaultMaxAttempts {
				t.Errorf("%d calls, want %d", n, gemini.DefaultMaxAttempts)
			}
			if n := len(h.slept()); n != gemini.DefaultMaxAttempts-1 {
				t.Errorf("%d sleeps, want %d", n, gemini.DefaultMaxAttempts-1)
			}
		})
	}
}

func TestMaxAttempts(t *testing.T) {
	h := newHarness(t, func(o *gemini.Options) { o.MaxAttempts = 2 })
	k := kinds[2]
	k.set(h.fake)
	h.fake.FailNext(k.path, http.StatusServiceUnavailable, -1)
	_, err := h.f.Fetch(t.Context(), k.kind, k.name)
	var te *gemini.TransientError
	if !errors.As(err, &te) || te.Attempts != 2 || h.fake.Calls(k.path) != 2 {
		t.Errorf("err %v, calls %d", err, h.fake.Calls(k.path))
	}
}

func TestSDKRetriesOffEvenIfClientConfiguresThem(t *testing.T) {
	h := newHarness(t)
	// Fast SDK retries, so a regression fails quickly instead of sleeping.
	five, tiny, zero := int32(5), 0.001, 0.0
	c, err := genai.NewClient(t.Context(), &genai.ClientConfig{
		APIKey: fakegemini.DefaultAPIKey, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: h.url, RetryOptions: &genai.HTTPRetryOptions{
			Attempts: &five, InitialDelay: &tiny, MaxDelay: &tiny, Jitter: &zero}},
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := gemini.New(gemini.Options{Client: c, Sleep: h.sleep, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds[:2] { // the genai-core kinds
		k.set(h.fake)
		h.fake.FailNext(k.path, http.StatusServiceUnavailable, -1)
		_, err := f.Fetch(t.Context(), k.kind, k.name)
		var te *gemini.TransientError
		if !errors.As(err, &te) {
			t.Fatalf("%s: %v", k.kind, err)
		}
		if n := h.fake.Calls(k.path); n != 2 {
			t.Errorf("%s: %d calls, want 2 (the client's own 5 attempts must be off)", k.kind, n)
		}
	}
	h.fake.FailNext("/v1beta/batches", http.StatusServiceUnavailable, -1)
	_, _, err = f.ListBatches(t.Context(), 0, "")
	var te *gemini.TransientError
	if !errors.As(err, &te) || h.fake.Calls("/v1beta/batches") != 2 {
		t.Errorf("list: err %v, %d calls, want a TransientError after 2", err, h.fake.Calls("/v1beta/batches"))
	}
}

func TestTransportErrors(t *testing.T) {
	h := newHarness(t)
	k := kinds[0]
	k.set(h.fake)
	h.fake.FailNext(k.path, fakegemini.Drop, 1)
	if ev := h.fetch(t, k.kind, k.name); ev.State != k.want {
		t.Errorf("state %s", ev.State)
	}
	if n := h.fake.Calls(k.path); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}

	h.fake.FailNext(k.path, fakegemini.Drop, -1)
	_, err := h.f.Fetch(t.Context(), k.kind, k.name)
	var te *gemini.TransientError
	if !errors.As(err, &te) || te.Code != 0 || te.Attempts != gemini.DefaultMaxAttempts {
		t.Errorf("err = %v", err)
	}
}

func TestCancelledContextStopsRetrying(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.kind), func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var sleeps int
			h := newHarness(t, func(o *gemini.Options) {
				o.Sleep = func(ctx context.Context, d time.Duration) error {
					sleeps++
					cancel() // the caller gives up while we wait
					return ctx.Err()
				}
			})
			k.set(h.fake)
			h.fake.FailNext(k.path, http.StatusServiceUnavailable, -1)

			_, err := h.f.Fetch(ctx, k.kind, k.name)
			var te *gemini.TransientError
			if !errors.Is(err, context.Canceled) || !errors.As(err, &te) {
				t.Fatalf("err = %v, want a TransientError wrapping context.Canceled", err)
			}
			if !strings.Contains(err.Error(), "503") {
				t.Errorf("the last failure is lost: %v", err)
			}
			if n := h.fake.Calls(k.path); n != 1 || sleeps != 1 {
				t.Errorf("%d calls, %d sleeps after cancel; want 1 and 1", n, sleeps)
			}
		})
	}

	t.Run("cancelled during the call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		fake := fakegemini.New()
		fake.SetBatch("b1", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fake.Handler().ServeHTTP(httptest.NewRecorder(), r) // counted, answer discarded
			cancel()
			select { // hold the answer until the client hangs up
			case <-r.Context().Done():
			case <-time.After(time.Minute): // a safety net, not a timing assertion
			}
		}))
		t.Cleanup(srv.Close)
		sleeps := 0
		f, err := gemini.New(gemini.Options{Client: genaiClient(t, srv.URL, fakegemini.DefaultAPIKey),
			Sleep: func(ctx context.Context, d time.Duration) error { sleeps++; return nil }})
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Fetch(ctx, opname.KindBatch, "batches/b1")
		var te *gemini.TransientError
		if !errors.Is(err, context.Canceled) || !errors.As(err, &te) || te.Attempts != 1 {
			t.Errorf("err = %v", err)
		}
		if fake.TotalCalls() != 1 || sleeps != 0 {
			t.Errorf("%d calls, %d sleeps; want 1 and 0", fake.TotalCalls(), sleeps)
		}
	})

	t.Run("already cancelled", func(t *testing.T) {
		h := newHarness(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := h.f.Fetch(ctx, opname.KindBatch, "batches/b1")
		if !errors.Is(err, context.Canceled) || h.fake.TotalCalls() != 0 {
			t.Errorf("err %v, %d calls", err, h.fake.TotalCalls())
		}
	})
}

func TestOther4xxIsFinal(t *testing.T) {
	for _, code := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden} {
		for _, k := range kinds {
			t.Run(fmt.Sprintf("%d/%s", code, k.kind), func(t *testing.T) {
				h := newHarness(t)
				k.set(h.fake)
				h.fake.FailNext(k.path, code, 1)
				_, err := h.f.Fetch(t.Context(), k.kind, k.name)
				var te *gemini.TransientError
				if err == nil || errors.Is(err, gemini.ErrNotFound) || errors.As(err, &te) {
					t.Fatalf("err = %v (%T), want a plain error", err, err)
				}
				if n := h.fake.Calls(k.path); n != 1 || len(h.slept()) != 0 {
					t.Errorf("%d calls, %d sleeps; want 1 and 0", n, len(h.slept()))
				}
			})
		}
	}
}

// TestWrongKeyIsFinal: the live answers to a wrong key (400
// API_KEY_INVALID, whose DebugInfo echoes the key) and to no key (403) are
// final, say "check GEMINI_API_KEY", wrap ErrAPIKeyRefused, and never
// carry the key, through each client lrosink reads with and ListWebhooks.
func TestWrongKeyIsFinal(t *testing.T) {
	const wrong = "AIzaSy-not-the-key-0123456789abcdef"
	for _, k := range kinds {
		t.Run(string(k.kind), func(t *testing.T) {
			h := newHarness(t)
			k.set(h.fake)
			f, err := gemini.New(gemini.Options{APIKey: wrong, BaseURL: h.url, Sleep: h.sleep})
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Fetch(t.Context(), k.kind, k.name)
			var te *gemini.TransientError
			if err == nil || errors.As(err, &te) || errors.Is(err, gemini.ErrNotFound) || h.fake.TotalCalls() != 1 {
				t.Errorf("err = %v, calls %d", err, h.fake.TotalCalls())
			}
			if got := fetcherr.KindOf(err); got != fetcherr.Permanent { // a refused key is no passing trouble
				t.Errorf("KindOf(%v) = %v, want permanent", err, got)
			}
			if !errors.Is(err, gemini.ErrAPIKeyRefused) || !strings.Contains(err.Error(), "check GEMINI_API_KEY") ||
				!strings.Contains(err.Error(), "HTTP 400 INVALID_ARGUMENT (API_KEY_INVALID): API key not valid") {
				t.Errorf("err = %v, want the key hint", err)
			}
			if strings.Contains(err.Error(), wrong) || strings.Contains(fmt.Sprintf("%+v", err), wrong) {
				t.Errorf("the key shows in the error: %v", err)
			}
		})
	}
	t.Run("webhooks", func(t *testing.T) {
		h := newHarness(t)
		f, err := gemini.New(gemini.Options{APIKey: wrong, BaseURL: h.url, Sleep: h.sleep})
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.ListWebhooks(t.Context())
		if !errors.Is(err, gemini.ErrAPIKeyRefused) || strings.Contains(err.Error(), wrong) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("no key reaches the API", func(t *testing.T) {
		h := newHarness(t)
		h.fake.SetBatch("b1", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
		// A proxy that strips the key: the live API answers 403.
		strip := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Del("x-goog-api-key")
			return http.DefaultTransport.RoundTrip(r)
		})}
		f, err := gemini.New(gemini.Options{APIKey: wrong, BaseURL: h.url, HTTPClient: strip, Sleep: h.sleep})
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Fetch(t.Context(), opname.KindBatch, "batches/b1")
		if !errors.Is(err, gemini.ErrAPIKeyRefused) || !strings.Contains(err.Error(), "HTTP 403 PERMISSION_DENIED: Method doesn't allow unregistered callers") {
			t.Errorf("err = %v", err)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestAPINameChecks(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		kind opname.Kind
		name string
	}{
		{opname.KindBatch, "abc123"},          // bare id: rejected, not prefixed
		{opname.KindInteraction, "v1_abc"},    // bare id
		{opname.KindBatch, "foo/batches/abc"}, // the SDK's unanchored pattern would accept it
		{opname.KindBatch, "batchPredictionJobs/1"},
		{opname.KindBatch, " batches/abc"},
		{opname.KindVideo, "batches/abc"}, // contradicting kind
		{opname.KindUnknown, "abc"},
		{opname.KindBatch, ""},
	} {
		_, err := h.f.Fetch(t.Context(), c.kind, c.name)
		if !errors.Is(err, opname.ErrInvalidName) {
			t.Errorf("Fetch(%q, %q) = %v, want ErrInvalidName", c.kind, c.name, err)
		}
	}
	if n := h.fake.TotalCalls(); n != 0 {
		t.Errorf("%d calls for invalid names", n)
	}

	// A prefixed name needs no kind.
	h.fake.SetBatch("abc", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	if ev := h.fetch(t, opname.KindUnknown, "batches/abc"); ev.Kind != opname.KindBatch {
		t.Errorf("kind %q", ev.Kind)
	}
}

func TestListBatches(t *testing.T) {
	h := newHarness(t)
	states := []string{"BATCH_STATE_RUNNING", "BATCH_STATE_FAILED", "BATCH_STATE_SUCCEEDED", "BATCH_STATE_PENDING", "JOB_STATE_PAUSED"}
	for i, s := range states {
		h.fake.SetBatch(fmt.Sprintf("b%d", i), fakegemini.BatchState{State: s, UpdateTime: t0, ErrorCode: 9 * (i % 2), ErrorMessage: "failed " + s})
	}
	h.fake.FailNext("/v1beta/batches", http.StatusServiceUnavailable, 1)

	var evs []event.ListedBatch
	token := ""
	for pages := 1; ; pages++ {
		if pages > 4 {
			t.Fatal("paging does not end")
		}
		page, next, err := h.f.ListBatches(t.Context(), 2, token)
		if err != nil {
			t.Fatalf("ListBatches: %v", err)
		}
		if len(page) > 2 {
			t.Errorf("page of %d", len(page))
		}
		evs = append(evs, page...)
		if next == "" {
			break
		}
		token = next
	}
	if len(evs) != len(states) {
		t.Fatalf("%d events, want %d", len(evs), len(states))
	}
	slices.Reverse(evs) // the API lists newest first
	wantStates := []lifecycle.State{lifecycle.Running, lifecycle.Failed, lifecycle.Succeeded, lifecycle.Pending, "JOB_STATE_PAUSED"}
	for i, ev := range evs {
		checkCommon(t, ev.Event, opname.KindBatch, fmt.Sprintf("batches/b%d", i))
		if ev.State != wantStates[i] || !ev.UpdateTime.Equal(t0) {
			t.Errorf("event %d: %s %v", i, ev.State, ev.UpdateTime)
		}
	}
	if e := evs[1].Error; e == nil || *e != (event.ErrorInfo{Code: 9, Message: "failed BATCH_STATE_FAILED"}) {
		t.Errorf("failed batch error %+v", e)
	}
	if evs[3].Error != nil {
		t.Errorf("error detail fetched for a pending batch: %+v", evs[3].Error)
	}
	// 3 pages + 1 retry, and one raw GET for the failed batch only.
	if n := h.fake.Calls("/v1beta/batches"); n != 4 {
		t.Errorf("%d list calls, want 4", n)
	}
	if n := h.fake.Calls("/v1beta/batches/b1"); n != 1 || h.fake.TotalCalls() != 5 {
		t.Errorf("raw GETs %d, total %d", n, h.fake.TotalCalls())
	}
	var queries []string
	for _, r := range h.fake.Requests() {
		if r.Path == "/v1beta/batches" {
			queries = append(queries, r.Query.Encode())
		}
	}
	if !slices.Equal(queries, []string{"pageSize=2", "pageSize=2", "pageSize=2&pageToken=p2", "pageSize=2&pageToken=p4"}) {
		t.Errorf("queries %q", queries)
	}

	if _, _, err := h.f.ListBatches(t.Context(), -1, ""); err == nil {
		t.Error("negative page size accepted")
	}
}

func TestNewOptions(t *testing.T) {
	h := newHarness(t)
	c := genaiClient(t, h.url, fakegemini.DefaultAPIKey)
	vertex, err := genai.NewClient(t.Context(), &genai.ClientConfig{APIKey: "k", Backend: genai.BackendVertexAI})
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]gemini.Options{
		"nothing":         {},
		"client and key":  {Client: c, APIKey: "k"},
		"client and url":  {Client: c, BaseURL: h.url},
		"client and http": {Client: c, HTTPClient: http.DefaultClient},
		"negative":        {Client: c, MaxAttempts: -1},
		"vertex":          {Client: vertex},
		"unusable base":   {APIKey: "k", BaseURL: "not a url"},
	} {
		if _, err := gemini.New(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// countingTransport counts the requests an http.Client makes.
type countingTransport struct {
	mu sync.Mutex
	n  int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func TestNewBuildsClientFromOptions(t *testing.T) {
	fake := fakegemini.New(fakegemini.WithAPIKey("own-key"))
	srv := fake.Start(t)
	tr := &countingTransport{}
	f, err := gemini.New(gemini.Options{APIKey: "own-key", BaseURL: srv.URL, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	fake.SetBatch("f", fakegemini.BatchState{State: "BATCH_STATE_FAILED", ErrorCode: 5, ErrorMessage: "gone"})
	fake.SetInteraction("i", fakegemini.InteractionState{Status: "queued"})
	ev, err := f.Fetch(t.Context(), opname.KindBatch, "batches/f")
	if err != nil || ev.Error == nil || ev.Error.Code != 5 {
		t.Fatalf("fetch: %+v %v", ev, err)
	}
	if ev, err := f.Fetch(t.Context(), opname.KindInteraction, "interactions/i"); err != nil || ev.State != lifecycle.Pending {
		t.Fatalf("interaction: %+v %v", ev, err)
	}
	// The raw GET of the batch and the Interactions client both use the
	// given client.
	if tr.n != 2 || fake.TotalCalls() != 2 {
		t.Errorf("transport saw %d requests, fake %d; want 2", tr.n, fake.TotalCalls())
	}
}

func TestAPIKeyNeverInErrors(t *testing.T) {
	const key = "AIzaSy-SECRET-do-not-leak-0123"
	fake := fakegemini.New(fakegemini.WithAPIKey(key))
	// A misbehaving proxy that echoes the key it was sent in error bodies.
	echo := func(w http.ResponseWriter, r *http.Request, code int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"code":%d,"message":"rejected key %s","status":"X"}}`, code, r.Header.Get("x-goog-api-key"))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/echo400"):
			echo(w, r, 400)
		case strings.HasSuffix(r.URL.Path, "/echo503"):
			echo(w, r, 503)
		case strings.HasSuffix(r.URL.Path, "/echo404"):
			echo(w, r, 404)
		case strings.HasSuffix(r.URL.Path, "/echocut"):
			// The key straddles the 512-byte bound of an error message:
			// the bound keeps a prefix of it, which exact redaction missed.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"error":{"code":403,"message":"%s %s","status":"PERMISSION_DENIED"}}`, strings.Repeat("-", 495), r.Header.Get("x-goog-api-key"))
		case strings.HasSuffix(r.URL.Path, "/rawecho") && r.Header.Get("Content-Type") == "":
			echo(w, r, 400) // only the Fetcher's raw GET sends no Content-Type
		default:
			fake.Handler().ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	fake.SetBatch("rawecho", fakegemini.BatchState{State: "BATCH_STATE_FAILED"})
	fake.FailNext("/v1beta/batches/fail", http.StatusInternalServerError, -1)

	logs := &testutil.SyncBuffer{}
	f, err := gemini.New(gemini.Options{APIKey: key, BaseURL: srv.URL, Sleep: func(ctx context.Context, d time.Duration) error { return nil },
		Log: logging.New(logs, slog.LevelInfo, "")})
	if err != nil {
		t.Fatal(err)
	}
	// A failed detail GET of a listed job is no error of the listing, but
	// its logged reason must not leak the key either.
	if evs, _, err := f.ListBatches(t.Context(), 10, ""); err != nil || len(evs) != 1 || evs[0].State != lifecycle.Failed {
		t.Fatalf("rawecho: %+v %v", evs, err)
	}
	if strings.Contains(logs.String(), key) || logs.CountLines("[REDACTED]") != 1 {
		t.Errorf("the detail GET's failure is not logged once, redacted: %s", logs.String())
	}
	cases := []struct {
		kind   opname.Kind
		name   string
		echoed bool
	}{
		{opname.KindBatch, "batches/echo400", true},
		{opname.KindBatch, "batches/echo503", true},
		{opname.KindBatch, "batches/echo404", true},
		{opname.KindVideo, "models/veo/operations/echo400", true},
		{opname.KindVideo, "models/veo/operations/echo503", true},
		{opname.KindInteraction, "interactions/echo400", true},
		{opname.KindInteraction, "interactions/echo503", true},
		{opname.KindInteraction, "interactions/echo404", true},
		{opname.KindBatch, "batches/echocut", false},
		{opname.KindInteraction, "interactions/echocut", false},
		{opname.KindBatch, "batches/fail", false},
		{opname.KindBatch, "batches/missing", false},
		{opname.KindBatch, "bare", false},
	}
	for _, c := range cases {
		_, err := f.Fetch(t.Context(), c.kind, c.name)
		if err == nil {
			t.Fatalf("%s: no error", c.name)
		}
		for _, s := range []string{err.Error(), fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err)} {
			if strings.Contains(s, key[:12]) {
				t.Errorf("%s: error leaks (part of) the key: %s", c.name, s)
			}
		}
		if c.echoed && !strings.Contains(err.Error(), "[REDACTED]") {
			t.Errorf("%s: the echo did not reach the error, so the test proves nothing: %v", c.name, err)
		}
	}
	// Redaction keeps the error chain.
	_, err = f.Fetch(t.Context(), opname.KindBatch, "batches/echo404")
	if !errors.Is(err, gemini.ErrNotFound) {
		t.Errorf("redacted 404 lost ErrNotFound: %v", err)
	}
	_, err = f.Fetch(t.Context(), opname.KindBatch, "batches/echo503")
	var te *gemini.TransientError
	if !errors.As(err, &te) {
		t.Errorf("redacted 503 lost TransientError: %v", err)
	}
}

func TestDefaultBackoff(t *testing.T) {
	for attempt := -1; attempt <= 10; attempt++ {
		d := 500 * time.Millisecond
		for i := 1; i < attempt && d < 8*time.Second; i++ {
			d *= 2
		}
		for range 200 {
			got := gemini.DefaultBackoff(attempt)
			if got < d/2 || got > d {
				t.Fatalf("DefaultBackoff(%d) = %v, want in [%v, %v]", attempt, got, d/2, d)
			}
		}
	}
}

func TestConcurrentFetch(t *testing.T) {
	h := newHarness(t)
	for _, k := range kinds {
		k.set(h.fake)
	}
	var wg sync.WaitGroup
	for i := range 12 {
		k := kinds[i%len(kinds)]
		wg.Go(func() {
			ev, err := h.f.Fetch(t.Context(), k.kind, k.name)
			if err != nil || ev.State != k.want {
				t.Errorf("%s: %+v %v", k.name, ev, err)
			}
		})
	}
	wg.Wait()
	if n := h.fake.TotalCalls(); n != 12 {
		t.Errorf("%d calls, want 12", n)
	}
}

// TestVideoErrorShapes: a Veo operation that carries an error is FAILED
// with the error's code and message whatever fields the google.rpc.Status
// has or lacks; never SUCCEEDED.
func TestVideoErrorShapes(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		name string
		done bool
		err  map[string]any
		want event.ErrorInfo
	}{
		{"code and message", true, map[string]any{"code": 3, "message": "prompt rejected"}, event.ErrorInfo{Code: 3, Message: "prompt rejected"}},
		{"with status and details", true, map[string]any{"code": 8, "message": "quota", "status": "RESOURCE_EXHAUSTED", "details": []any{map[string]any{"@type": "x"}}},
			event.ErrorInfo{Code: 8, Message: "quota"}},
		{"status name only", true, map[string]any{"status": "INVALID_ARGUMENT", "message": "bad prompt"}, event.ErrorInfo{Message: "INVALID_ARGUMENT: bad prompt"}},
		{"code as numeric string", true, map[string]any{"code": "13", "message": "internal"}, event.ErrorInfo{Code: 13, Message: "internal"}},
		{"code as name", true, map[string]any{"code": "INTERNAL"}, event.ErrorInfo{Message: "INTERNAL"}},
		{"message only", true, map[string]any{"message": "safety"}, event.ErrorInfo{Message: "safety"}},
		{"code only", true, map[string]any{"code": 13}, event.ErrorInfo{Code: 13}},
		{"empty error", true, map[string]any{}, event.ErrorInfo{}},
		{"error without done", false, map[string]any{"code": 3, "message": "m"}, event.ErrorInfo{Code: 3, Message: "m"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := fmt.Sprintf("e%d", i)
			h.fake.SetVideo("veo-3", id, fakegemini.VideoState{Done: c.done, Error: c.err, VideoURIs: []string{"https://v/never"}})
			ev := h.fetch(t, opname.KindVideo, "models/veo-3/operations/"+id)
			if ev.State != lifecycle.Failed || ev.Error == nil || *ev.Error != c.want || ev.Output != nil {
				t.Errorf("event %+v (error %+v), want FAILED with %+v", ev, ev.Error, c.want)
			}
		})
	}
}

// TestInteractionErrorShapes: a failed interaction gives the first error's
// code and message, with a non-numeric code kept in front of the message;
// a failed interaction without errors is FAILED without detail.
func TestInteractionErrorShapes(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		name  string
		state fakegemini.InteractionState
		want  *event.ErrorInfo
	}{
		{"numeric code", fakegemini.InteractionState{ErrorCode: "429", ErrorMessage: "quota"}, &event.ErrorInfo{Code: 429, Message: "quota"}},
		{"named code", fakegemini.InteractionState{ErrorCode: "RESOURCE_EXHAUSTED", ErrorMessage: "quota"}, &event.ErrorInfo{Message: "RESOURCE_EXHAUSTED: quota"}},
		{"named code only", fakegemini.InteractionState{ErrorCode: "RESOURCE_EXHAUSTED"}, &event.ErrorInfo{Message: "RESOURCE_EXHAUSTED"}},
		{"URI code", fakegemini.InteractionState{ErrorCode: "https://ai.google.dev/errors/tool", ErrorMessage: "tool crashed"},
			&event.ErrorInfo{Message: "https://ai.google.dev/errors/tool: tool crashed"}},
		{"message only", fakegemini.InteractionState{ErrorMessage: "tool crashed"}, &event.ErrorInfo{Message: "tool crashed"}},
		{"no errors", fakegemini.InteractionState{}, nil},
		// The live API can leave errors[] empty and put the failure in a
		// model_output step (GEMINI.md §10).
		{"step error only", fakegemini.InteractionState{StepError: &fakegemini.StepError{Code: 13, Message: "model crashed"}},
			&event.ErrorInfo{Code: 13, Message: "model crashed"}},
		{"errors[] wins over a step error", fakegemini.InteractionState{ErrorCode: "429", ErrorMessage: "quota",
			StepError: &fakegemini.StepError{Code: 13, Message: "model crashed"}}, &event.ErrorInfo{Code: 429, Message: "quota"}},
		{"step error, message only", fakegemini.InteractionState{OutputText: "partial", StepError: &fakegemini.StepError{Message: "stopped"}},
			&event.ErrorInfo{Message: "stopped"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := fmt.Sprintf("f%d", i)
			st := c.state
			st.Status, st.Updated = "failed", t0
			h.fake.SetInteraction(id, st)
			ev := h.fetch(t, opname.KindInteraction, "interactions/"+id)
			if ev.State != lifecycle.Failed || !reflect.DeepEqual(ev.Error, c.want) || ev.GeminiStatus != "failed" {
				t.Errorf("event %+v (error %+v), want FAILED with %+v", ev, ev.Error, c.want)
			}
		})
	}
}

// TestBatchStats: Gemini's batchStats (int64 as strings; proto3 JSON omits
// zeros), which the SDK drops in Gemini mode, reach the event's output as
// integers for every terminal batch, from the one GET that reads the
// state. A running batch carries none (its counts would be stale
// by the time it settles).
func TestBatchStats(t *testing.T) {
	h := newHarness(t)
	stats := &fakegemini.BatchStats{RequestCount: "10", SuccessfulRequestCount: "7", FailedRequestCount: "3"}
	h.fake.SetBatch("partial", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: t0, ResponsesFile: "files/o", Stats: stats})
	h.fake.SetBatch("failed", fakegemini.BatchState{State: "BATCH_STATE_FAILED", UpdateTime: t0, ErrorCode: 3, ErrorMessage: "bad",
		Stats: &fakegemini.BatchStats{RequestCount: "4", FailedRequestCount: "4"}})
	h.fake.SetBatch("running", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: t0,
		Stats: &fakegemini.BatchStats{RequestCount: "10", SuccessfulRequestCount: "2", PendingRequestCount: "8"}})
	h.fake.SetBatch("nostats", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: t0, ResponsesFile: "files/n"})

	ev := h.fetch(t, opname.KindBatch, "batches/partial")
	want := map[string]any{"request_count": int64(10), "successful_request_count": int64(7), "failed_request_count": int64(3), "pending_request_count": int64(0)}
	if ev.State != lifecycle.Succeeded || !reflect.DeepEqual(ev.Output["batch_stats"], want) || ev.Output["responses_file"] != "files/o" || ev.Error != nil {
		t.Errorf("partially failed batch: %+v, want batch_stats %v", ev.Output, want)
	}
	if n := h.fake.Calls("/v1beta/batches/partial"); n != 1 {
		t.Errorf("terminal batch: %d calls, want one GET", n)
	}
	ev = h.fetch(t, opname.KindBatch, "batches/failed")
	want = map[string]any{"request_count": int64(4), "successful_request_count": int64(0), "failed_request_count": int64(4), "pending_request_count": int64(0)}
	if ev.State != lifecycle.Failed || !reflect.DeepEqual(ev.Output["batch_stats"], want) || ev.Error == nil || *ev.Error != (event.ErrorInfo{Code: 3, Message: "bad"}) {
		t.Errorf("failed batch: output %+v error %+v", ev.Output, ev.Error)
	}
	if n := h.fake.Calls("/v1beta/batches/failed"); n != 1 {
		t.Errorf("failed batch: %d calls, want 1 (state, error and statistics from one answer)", n)
	}
	if ev := h.fetch(t, opname.KindBatch, "batches/running"); ev.Output["batch_stats"] != nil || h.fake.Calls("/v1beta/batches/running") != 1 {
		t.Errorf("running batch: output %v, %d calls", ev.Output, h.fake.Calls("/v1beta/batches/running"))
	}
	if ev := h.fetch(t, opname.KindBatch, "batches/nostats"); ev.Output["batch_stats"] != nil || ev.Output["responses_file"] != "files/n" {
		t.Errorf("batch without statistics: output %v", ev.Output)
	}
}

// TestSucceededWithoutOutput: a batch that says SUCCEEDED but names no
// output yet is reported RUNNING (gemini_status still JOB_STATE_SUCCEEDED)
// until OutputWait after Gemini's update time; once its output shows it is
// SUCCEEDED with it; one that never shows one settles after the wait,
// without output, with one WARNING. The listing (adoption) does the same.
func TestSucceededWithoutOutput(t *testing.T) {
	now := t0.Add(5 * time.Minute)
	logs := &testutil.SyncBuffer{}
	h := newHarness(t, func(o *gemini.Options) {
		o.Now = func() time.Time { return now }
		o.Log = logging.New(logs, slog.LevelInfo, "")
	})
	h.fake.SetBatch("b", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: t0})

	ev := h.fetch(t, opname.KindBatch, "batches/b")
	if ev.State != lifecycle.Running || ev.GeminiStatus != string(genai.JobStateSucceeded) || ev.Output != nil {
		t.Errorf("before the output: %+v, want RUNNING", ev)
	}
	evs, _, err := h.f.ListBatches(t.Context(), 10, "")
	if err != nil || len(evs) != 1 || evs[0].State != lifecycle.Running {
		t.Errorf("listing before the output: %+v %v", evs, err)
	}
	if n := logs.CountLines(`"message":"gemini: SUCCEEDED batch names no output yet: reported RUNNING until it does"`); n != 2 ||
		logs.CountLines(`"settles_without_output_after":"2026-03-01T12:10:00Z"`) != 2 {
		t.Errorf("%d INFO lines: %s", n, logs.String())
	}

	// The output shows, same update time.
	h.fake.SetBatch("b", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: t0, ResponsesFile: fakegemini.ResponsesFile("b")})
	ev = h.fetch(t, opname.KindBatch, "batches/b")
	if ev.State != lifecycle.Succeeded || ev.Output["responses_file"] != "files/batch-b" {
		t.Errorf("with the output: %+v", ev)
	}

	// Inlined responses are an output too.
	h.fake.SetBatch("inl", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: t0, InlinedResponses: 2})
	if ev := h.fetch(t, opname.KindBatch, "batches/inl"); ev.State != lifecycle.Succeeded {
		t.Errorf("inlined: %+v", ev)
	}

	// Never an output: settles once the wait is over, with a WARNING.
	h.fake.SetBatch("never", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: t0})
	now = t0.Add(gemini.DefaultOutputWait)
	ev = h.fetch(t, opname.KindBatch, "batches/never")
	if ev.State != lifecycle.Succeeded || ev.Output["responses_file"] != nil {
		t.Errorf("after the wait: %+v", ev)
	}
	if n := logs.CountLines(`"severity":"WARNING","message":"gemini: SUCCEEDED batch settles without an output reference","operation":"batches/never"`); n != 1 {
		t.Errorf("%d WARNING lines: %s", n, logs.String())
	}

	// No time at all to wait from: settles at once (with the WARNING).
	h.fake.SetBatch("notime", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED"})
	now = t0
	if ev := h.fetch(t, opname.KindBatch, "batches/notime"); ev.State != lifecycle.Succeeded {
		t.Errorf("no time: %+v", ev)
	}
	// The end time stands in for a missing update time.
	h.fake.SetBatch("endonly", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", EndTime: t0})
	if ev := h.fetch(t, opname.KindBatch, "batches/endonly"); ev.State != lifecycle.Running {
		t.Errorf("end time only: %+v", ev)
	}
}

// TestIntentEchoed: a batch's GET and listing and an interaction's GET
// carry the intent key their echoed webhook config names (Event.Intent),
// and nothing of the rest of that metadata; the listing also says what
// adoption matches an intent on when none is echoed.
func TestIntentEchoed(t *testing.T) {
	h := newHarness(t)
	meta := map[string]any{"lrosink_intent": "int_0123", "job_id": json.Number("12345678901234567890123")}
	h.fake.SetBatch("echo", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: t0, CreateTime: t0,
		DisplayName: "lrosink-int_0123", Model: "models/gemini-2.5-flash", Webhook: &fakegemini.WebhookConfig{UserMetadata: meta}})
	h.fake.SetBatch("plain", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: t0, CreateTime: t0.Add(-time.Hour),
		DisplayName: "nightly", Model: "models/gemini-2.5-pro"})
	h.fake.SetInteraction("v1_echo", fakegemini.InteractionState{Status: "in_progress", Updated: t0, Webhook: &fakegemini.WebhookConfig{UserMetadata: meta}})

	for _, c := range []struct {
		kind opname.Kind
		name string
		want string
	}{{opname.KindBatch, "batches/echo", "int_0123"}, {opname.KindBatch, "batches/plain", ""}, {opname.KindInteraction, "interactions/v1_echo", "int_0123"}} {
		if ev := h.fetch(t, c.kind, c.name); ev.Intent != c.want || ev.UserMetadata != nil {
			t.Errorf("fetch %s: intent %q, metadata %v; want intent %q and no metadata", c.name, ev.Intent, ev.UserMetadata, c.want)
		}
	}
	listed, _, err := h.f.ListBatches(t.Context(), 10, "")
	if err != nil || len(listed) != 2 {
		t.Fatalf("ListBatches: %+v %v", listed, err)
	}
	got := map[string]event.ListedBatch{}
	for _, lb := range listed {
		got[lb.Name] = lb
	}
	if e := got["batches/echo"]; e.Intent != "int_0123" || e.DisplayName != "lrosink-int_0123" || e.Model != "models/gemini-2.5-flash" || !e.CreateTime.Equal(t0) {
		t.Errorf("listed echo: %+v", e)
	}
	if p := got["batches/plain"]; p.Intent != "" || p.DisplayName != "nightly" || p.Model != "models/gemini-2.5-pro" || !p.CreateTime.Equal(t0.Add(-time.Hour)) {
		t.Errorf("listed plain: %+v", p)
	}
}

// TestListedTerminalBatchCarriesItsStats: the listing holds each job's raw
// Operation, so a terminal listed job carries its metadata.batchStats as
// output.batch_stats (adoption may be what settles a known batch, and its
// message must say them); a running one carries none. Found by the
// simulator once adoption ran beside registered batches.
func TestListedTerminalBatchCarriesItsStats(t *testing.T) {
	h := newHarness(t)
	stats := &fakegemini.BatchStats{RequestCount: "3", SuccessfulRequestCount: "2", FailedRequestCount: "1"}
	h.fake.SetBatch("run", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: t0, Stats: stats})
	h.fake.SetBatch("ok", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: t0, ResponsesFile: "files/o", Stats: stats})
	evs, _, err := h.f.ListBatches(t.Context(), 10, "")
	if err != nil || len(evs) != 2 {
		t.Fatalf("ListBatches: %d events, %v", len(evs), err)
	}
	want := map[string]any{"request_count": int64(3), "successful_request_count": int64(2), "failed_request_count": int64(1), "pending_request_count": int64(0)}
	if evs[0].Name != "batches/ok" || fmt.Sprint(evs[0].Output["batch_stats"]) != fmt.Sprint(want) {
		t.Errorf("succeeded job: %+v, want batch_stats %v", evs[0].Output, want)
	}
	if _, ok := evs[1].Output["batch_stats"]; evs[1].Name != "batches/run" || ok {
		t.Errorf("running job: %+v, want no batch_stats", evs[1].Output)
	}
}

// TestFindListedBatch: the search lists newest first, returns the first
// job match accepts as the listing gives it (state, echoed intent), and
// reads no further than jobs created before since.
func TestFindListedBatch(t *testing.T) {
	h := newHarness(t)
	for i, id := range []string{"old", "mid", "new"} {
		at := t0.Add(time.Duration(i) * time.Hour)
		st := fakegemini.BatchState{State: "BATCH_STATE_RUNNING", CreateTime: at, UpdateTime: at}
		if id == "mid" {
			st.State, st.Webhook = "BATCH_STATE_SUCCEEDED", &fakegemini.WebhookConfig{UserMetadata: map[string]any{"lrosink_intent": "k"}}
		}
		h.fake.SetBatch(id, st)
	}
	lb, ok, err := h.f.FindListedBatch(t.Context(), t0, func(lb event.ListedBatch) bool { return lb.Intent == "k" })
	if err != nil || !ok || lb.Name != "batches/mid" || lb.State != lifecycle.Succeeded {
		t.Fatalf("found %+v, %v, %v: want batches/mid SUCCEEDED", lb, ok, err)
	}
	if _, ok, err := h.f.FindListedBatch(t.Context(), t0.Add(30*time.Minute), func(lb event.ListedBatch) bool { return lb.Name == "batches/old" }); ok || err != nil {
		t.Fatalf("found a job created before since (%v, %v)", ok, err)
	}
}
