package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
)

// maxOperationBody bounds the raw GET's answer; a batch Operation with
// inlined responses can be large, but its error sits at the top.
const maxOperationBody = 64 << 20

func (f *Fetcher) fetchBatch(ctx context.Context, name string) (event.Event, error) {
	var job *genai.BatchJob
	err := f.call(ctx, name, func(ctx context.Context) (err error) {
		job, err = f.client.Batches.Get(ctx, name, &genai.GetBatchJobConfig{HTTPOptions: noSDKRetries()})
		return err
	})
	if err != nil {
		return event.Event{}, err
	}
	ev := batchEvent(job, name)
	f.holdUntilOutput(ctx, &ev, job)
	if err := f.addBatchDetail(ctx, &ev, true); err != nil {
		return event.Event{}, err
	}
	return ev, nil
}

// batchEvent maps a BatchJob. UpdateTime stays zero when the API sent none:
// the reducer then treats the event as older than anything stored.
func batchEvent(job *genai.BatchJob, fallbackName string) event.Event {
	ev := event.Event{
		Name:         job.Name,
		Kind:         opname.KindBatch,
		State:        batchState(job.State),
		GeminiStatus: string(job.State),
		Source:       event.SourceReconcile,
	}
	if ev.Name == "" {
		ev.Name = fallbackName
	}
	if !job.UpdateTime.IsZero() {
		ev.UpdateTime = job.UpdateTime.UTC()
	}
	if d := job.Dest; d != nil {
		out := map[string]any{}
		if d.FileName != "" {
			out["responses_file"] = d.FileName
		}
		if n := len(d.InlinedResponses) + len(d.InlinedEmbedContentResponses); n > 0 {
			out["inlined_response_count"] = n
		}
		if len(out) > 0 {
			ev.Output = out
		}
	}
	return ev
}

// holdUntilOutput reports a SUCCEEDED batch that names no output yet (no
// responsesFile, no inlined responses) as RUNNING until OutputWait after
// Gemini's update time (its end or create time when it sent none): a batch
// has been seen to say SUCCEEDED before its output is visible (GEMINI.md
// §10), and settling then would publish a message without the output and
// drop the complete answer later as a duplicate. The rank rise RUNNING →
// SUCCEEDED applies the complete answer whatever its update time. After
// the wait (or at once without any time to wait from) the batch settles as
// it is, with a WARNING: a batch whose output never shows must not stay
// pending for ever. GeminiStatus stays JOB_STATE_SUCCEEDED, so
// `ops show` tells what Gemini said.
func (f *Fetcher) holdUntilOutput(ctx context.Context, ev *event.Event, job *genai.BatchJob) {
	if ev.State != lifecycle.Succeeded || ev.Output["responses_file"] != nil || ev.Output["inlined_response_count"] != nil {
		return
	}
	since := job.UpdateTime
	for _, t := range []time.Time{job.EndTime, job.CreateTime} {
		if since.IsZero() {
			since = t
		}
	}
	until := since.Add(f.outputWait)
	if f.outputWait > 0 && !since.IsZero() && f.now().Before(until) {
		ev.State = lifecycle.Running
		f.log.InfoContext(ctx, "gemini: SUCCEEDED batch names no output yet: reported RUNNING until it does",
			"operation", ev.Name, "settles_without_output_after", until.UTC().Format(time.RFC3339))
		return
	}
	f.log.WarnContext(ctx, "gemini: SUCCEEDED batch settles without an output reference",
		"operation", ev.Name, "output_wait", f.outputWait.String(), "since", since.UTC().Format(time.RFC3339))
}

// batchState maps genai.JobState (and raw BATCH_STATE_* in case the SDK ever
// stops translating them). Every other value, including the Vertex-only
// states, stays an unknown state that the reducer drops: a terminal state is
// never guessed.
func batchState(s genai.JobState) lifecycle.State {
	switch s {
	case genai.JobStatePending, genai.JobStateQueued, "BATCH_STATE_PENDING":
		return lifecycle.Pending
	case genai.JobStateRunning, "BATCH_STATE_RUNNING":
		return lifecycle.Running
	case genai.JobStateSucceeded, "BATCH_STATE_SUCCEEDED":
		return lifecycle.Succeeded
	case genai.JobStateFailed, "BATCH_STATE_FAILED":
		return lifecycle.Failed
	case genai.JobStateCancelled, "BATCH_STATE_CANCELLED":
		return lifecycle.Cancelled
	case genai.JobStateExpired, "BATCH_STATE_EXPIRED":
		return lifecycle.Expired
	case "":
		// A missing state is the proto default, not a blank to log.
		return lifecycle.State(genai.JobStateUnspecified)
	default:
		return lifecycle.State(s)
	}
}

// addBatchDetail fills what the SDK drops in Gemini mode for a terminal
// batch, read with one raw GET of the same resource: the Operation's
// "error" (ev.Error, FAILED only) and metadata.batchStats
// (ev.Output["batch_stats"], any terminal state: a SUCCEEDED batch can hold
// failed requests). A running batch gets no extra call: its counts would
// be stale by the time it settles, and the first stored output is kept.
// A listing (terminalToo false) reads the detail of FAILED jobs only: it
// runs every pass over the same recent jobs, and one GET per listed
// SUCCEEDED job each pass would cost far more than the statistics of a
// rare adopted orphan are worth.
//
// The detail is best effort: Gemini already said the state, and
// withholding it because the second GET failed would leave the operation
// pending for as long as the GET keeps failing (and a listing page would
// lose every job on it). So a GET that fails for good, or still fails when
// the retries run out, leaves the event without the detail and is logged.
// Only the end of the caller's context is returned: nothing will apply
// this answer then, and the next check can still read the detail.
func (f *Fetcher) addBatchDetail(ctx context.Context, ev *event.Event, terminalToo bool) error {
	if ev.State != lifecycle.Failed && (!terminalToo || !ev.State.Terminal()) {
		return nil
	}
	d, err := f.operationDetail(ctx, ev.Name)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		msg := "gemini: batch without its statistics: the detail GET failed"
		if ev.State == lifecycle.Failed {
			msg = "gemini: FAILED batch without its error detail: the detail GET failed"
		}
		f.log.WarnContext(ctx, msg, "operation", ev.Name, "error", scrub(err, f.apiKey).Error())
		return nil
	}
	if ev.State == lifecycle.Failed {
		ev.Error = d.err
	}
	if d.stats != nil {
		if ev.Output == nil {
			ev.Output = map[string]any{}
		}
		ev.Output["batch_stats"] = d.stats
	}
	return nil
}

// operationDetail is what the raw GET reads.
type operationDetail struct {
	err   *event.ErrorInfo // the Operation's google.rpc.Status, or nil
	stats map[string]any   // metadata.batchStats as integers, or nil
}

// operationDetail reads the detail of the Operation behind name.
func (f *Fetcher) operationDetail(ctx context.Context, name string) (operationDetail, error) {
	var d operationDetail
	err := f.call(ctx, name, func(ctx context.Context) (err error) {
		d, err = f.rawOperationDetail(ctx, name)
		return err
	})
	if err != nil {
		return d, fmt.Errorf("raw GET for the error detail: %w", err)
	}
	return d, nil
}

// rawOperationDetail is one GET of {BaseURL}/{version}/{name}.
func (f *Fetcher) rawOperationDetail(ctx context.Context, name string) (operationDetail, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.apiRoot.JoinPath(name).String(), nil)
	if err != nil {
		return operationDetail{}, fmt.Errorf("build request: %w", err)
	}
	for k, v := range f.headers {
		req.Header[k] = append([]string(nil), v...)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("x-goog-api-key", f.apiKey)
	resp, err := f.raw.Do(req)
	if err != nil {
		return operationDetail{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOperationBody))
	if err != nil {
		return operationDetail{}, fmt.Errorf("read operation: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		he := newHTTPError(resp.StatusCode, body)
		he.RetryAfter = resp.Header.Get("Retry-After")
		return operationDetail{}, he
	}
	var op struct {
		Error    map[string]any `json:"error"`
		Metadata struct {
			BatchStats map[string]json.RawMessage `json:"batchStats"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &op); err != nil {
		return operationDetail{}, fmt.Errorf("decode operation: %w", err)
	}
	var d operationDetail
	if op.Error != nil {
		d.err = rpcError(op.Error)
	}
	if op.Metadata.BatchStats != nil {
		if d.stats, err = batchStats(op.Metadata.BatchStats); err != nil {
			return operationDetail{}, fmt.Errorf("decode metadata.batchStats: %w", err)
		}
	}
	return d, nil
}

// batchStatsFields maps GenerateContentBatch.batchStats to the results
// message's output.batch_stats.
var batchStatsFields = [...][2]string{
	{"requestCount", "request_count"},
	{"successfulRequestCount", "successful_request_count"},
	{"failedRequestCount", "failed_request_count"},
	{"pendingRequestCount", "pending_request_count"},
}

// batchStats reads the counts: int64 encoded as strings (numbers are
// accepted too); a missing count is 0, which proto3 JSON omits.
func batchStats(raw map[string]json.RawMessage) (map[string]any, error) {
	out := make(map[string]any, len(batchStatsFields))
	for _, f := range batchStatsFields {
		var n int64
		if v, ok := raw[f[0]]; ok && string(v) != "null" {
			s := strings.Trim(string(v), `"`)
			var err error
			if n, err = strconv.ParseInt(s, 10, 64); err != nil || n < 0 {
				return nil, fmt.Errorf("%s is not a count: %s", f[0], v)
			}
		}
		out[f[1]] = n
	}
	return out, nil
}
