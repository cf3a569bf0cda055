package gemini

import (
	"bytes"
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

// maxOperationBody bounds a raw GET's answer; a batch Operation with
// inlined responses can be large.
const maxOperationBody = 64 << 20

// fetchBatch reads a batch with one GET of its Operation, parsed in full:
// the SDK's Batches.Get would drop the error and metadata.batchStats
// (GEMINI.md §8), which then cost a second GET of the same resource.
// The state, times and output are mapped as the SDK maps them
// (batchJobFromMldev), so the event is the same either way.
func (f *Fetcher) fetchBatch(ctx context.Context, name string) (event.Event, error) {
	var op batchOperation
	err := f.call(ctx, name, func(ctx context.Context) (err error) {
		op, err = f.rawBatch(ctx, name)
		return err
	})
	if err != nil {
		return event.Event{}, err
	}
	job, d := op.view(), op.detail
	ev := batchEvent(job, name)
	ev.Intent = event.IntentOf(op.userMetadata)
	f.holdUntilOutput(ctx, &ev, job)
	addDetail(&ev, d, true)
	return ev, nil
}

// batchView is what the mapping reads of a batch job: its raw Operation,
// fetched or listed.
type batchView struct {
	Name                            string
	State                           genai.JobState
	CreateTime, UpdateTime, EndTime time.Time
	ResponsesFile                   string
	InlinedResponses, InlinedEmbeds int
	Output                          bool // metadata.output was present (the SDK's Dest)
}

// batchEvent maps a batch job. UpdateTime stays zero when the API sent
// none: the reducer then treats the event as older than anything stored.
func batchEvent(job batchView, fallbackName string) event.Event {
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
	if job.Output {
		out := map[string]any{}
		if job.ResponsesFile != "" {
			out["responses_file"] = job.ResponsesFile
		}
		if n := job.InlinedResponses + job.InlinedEmbeds; n > 0 {
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
func (f *Fetcher) holdUntilOutput(ctx context.Context, ev *event.Event, job batchView) {
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

// addListedDetail fills what the SDK's listing drops in Gemini mode for a
// FAILED job, read with one raw GET of its Operation: its "error" and
// metadata.batchStats. Other jobs get no extra call: a listing runs every
// pass over the same recent jobs, and one GET per listed job would cost a
// call per job per pass, far more than the statistics of a rare adopted
// orphan are worth (its first check reads them anyway).
//
// The detail is best effort: Gemini already said the state, and
// withholding it because the second GET failed would lose every job on
// the page. So a GET that fails for good, or still fails when the retries
// run out, leaves the event without the detail and is logged. Only the
// end of the caller's context is returned: nothing will apply this answer
// then, and the next check can still read the detail.
func (f *Fetcher) addListedDetail(ctx context.Context, ev *event.Event) error {
	if ev.State != lifecycle.Failed {
		return nil
	}
	var op batchOperation
	err := f.call(ctx, ev.Name, func(ctx context.Context) (err error) {
		op, err = f.rawBatch(ctx, ev.Name)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("raw GET for the error detail: %w", err)
		}
		f.log.WarnContext(ctx, "gemini: FAILED batch without its error detail: the detail GET failed",
			"operation", ev.Name, "error", scrub(fmt.Errorf("raw GET for the error detail: %w", err), f.apiKey).Error())
		return nil
	}
	addDetail(ev, op.detail, false)
	return nil
}

// addDetail puts what the raw Operation says beyond the SDK's mapping on
// ev: the error of a FAILED batch, and metadata.batchStats of a terminal
// one (any terminal state: a SUCCEEDED batch can hold failed requests;
// with terminalToo false, of a FAILED one only). A running batch gets no
// statistics: its counts would be stale by the time it settles, and the
// first stored output is kept.
func addDetail(ev *event.Event, d operationDetail, terminalToo bool) {
	if ev.State != lifecycle.Failed && (!terminalToo || !ev.State.Terminal()) {
		return
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
}

// operationDetail is what the raw Operation says that the SDK's mapping
// drops.
type operationDetail struct {
	err   *event.ErrorInfo // the Operation's google.rpc.Status, or nil
	stats map[string]any   // metadata.batchStats as integers, or nil
}

// batchOperation is a batch's raw Operation, decoded.
type batchOperation struct {
	name               string
	displayName, model string
	metadata           batchMetadata
	detail             operationDetail
	// userMetadata is the echoed webhook config's, numbers as
	// json.Number; nil when not echoed.
	userMetadata map[string]any
}

// batchMetadata is the Operation's metadata (GenerateContentBatch) as the
// SDK reads it (batchJobFromMldev), times parsed.
type batchMetadata struct {
	State                           string
	CreateTime, UpdateTime, EndTime time.Time
	Output                          *struct {
		ResponsesFile    string `json:"responsesFile"`
		InlinedResponses *struct {
			InlinedResponses []json.RawMessage `json:"inlinedResponses"`
		} `json:"inlinedResponses"`
		InlinedEmbedContentResponses *struct {
			InlinedResponses []json.RawMessage `json:"inlinedResponses"`
		} `json:"inlinedEmbedContentResponses"`
	}
}

// view maps the Operation as the SDK's Batches.Get would: BATCH_STATE_*
// become JOB_STATE_* (its tJobState, other values pass), and the inlined
// responses under metadata.output are counted.
func (op batchOperation) view() batchView {
	m := op.metadata
	v := batchView{Name: op.name, State: jobState(m.State), CreateTime: m.CreateTime, UpdateTime: m.UpdateTime, EndTime: m.EndTime}
	if o := m.Output; o != nil {
		v.Output, v.ResponsesFile = true, o.ResponsesFile
		if o.InlinedResponses != nil {
			v.InlinedResponses = len(o.InlinedResponses.InlinedResponses)
		}
		if o.InlinedEmbedContentResponses != nil {
			v.InlinedEmbeds = len(o.InlinedEmbedContentResponses.InlinedResponses)
		}
	}
	return v
}

// jobState is the SDK's translation of a batch state (transformer.go
// tJobState): the seven BATCH_STATE_* values become JOB_STATE_*, anything
// else is kept as sent.
func jobState(s string) genai.JobState {
	switch s {
	case "BATCH_STATE_UNSPECIFIED", "BATCH_STATE_PENDING", "BATCH_STATE_RUNNING", "BATCH_STATE_SUCCEEDED",
		"BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED":
		return genai.JobState("JOB_STATE_" + strings.TrimPrefix(s, "BATCH_STATE_"))
	}
	return genai.JobState(s)
}

// rawBatch is one GET of {BaseURL}/{version}/{name}, decoded in full.
func (f *Fetcher) rawBatch(ctx context.Context, name string) (batchOperation, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.apiRoot.JoinPath(name).String(), nil)
	if err != nil {
		return batchOperation{}, fmt.Errorf("build request: %w", err)
	}
	for k, v := range f.headers {
		req.Header[k] = append([]string(nil), v...)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("x-goog-api-key", f.apiKey)
	resp, err := f.raw.Do(req)
	if err != nil {
		return batchOperation{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOperationBody))
	if err != nil {
		return batchOperation{}, fmt.Errorf("read operation: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		he := newHTTPError(resp.StatusCode, body)
		he.RetryAfter = resp.Header.Get("Retry-After")
		return batchOperation{}, he
	}
	return decodeBatchOperation(body)
}

// decodeBatchOperation reads a batch's Operation as a GET answers it (and
// as a listing holds each): state, times, output, error, statistics, and
// the display name, model and the intent key its echoed webhook config's
// user_metadata names (GEMINI.md §13: whether live echoes it is
// unconfirmed).
func decodeBatchOperation(body []byte) (batchOperation, error) {
	var raw struct {
		Name     string         `json:"name"`
		Error    map[string]any `json:"error"`
		Metadata struct {
			State                           string `json:"state"`
			DisplayName                     string `json:"displayName"`
			Model                           string `json:"model"`
			CreateTime, UpdateTime, EndTime string
			Output                          json.RawMessage            `json:"output"`
			BatchStats                      map[string]json.RawMessage `json:"batchStats"`
			Webhook                         *struct {
				UserMetadata      json.RawMessage `json:"user_metadata"`
				UserMetadataCamel json.RawMessage `json:"userMetadata"`
			} `json:"webhookConfig"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return batchOperation{}, fmt.Errorf("decode operation: %w", err)
	}
	op := batchOperation{name: raw.Name, displayName: raw.Metadata.DisplayName, model: raw.Metadata.Model,
		metadata: batchMetadata{State: raw.Metadata.State}}
	for _, t := range []struct {
		field, value string
		into         *time.Time
	}{
		{"createTime", raw.Metadata.CreateTime, &op.metadata.CreateTime},
		{"updateTime", raw.Metadata.UpdateTime, &op.metadata.UpdateTime},
		{"endTime", raw.Metadata.EndTime, &op.metadata.EndTime},
	} {
		if t.value == "" {
			continue
		}
		// The SDK decodes the times as time.Time, which fails the whole
		// answer on a bad one; so does this.
		var err error
		if *t.into, err = time.Parse(time.RFC3339Nano, t.value); err != nil {
			return batchOperation{}, fmt.Errorf("decode operation: metadata.%s: %w", t.field, err)
		}
	}
	if len(raw.Metadata.Output) > 0 && string(raw.Metadata.Output) != "null" {
		if err := json.Unmarshal(raw.Metadata.Output, &op.metadata.Output); err != nil {
			return batchOperation{}, fmt.Errorf("decode operation: metadata.output: %w", err)
		}
	}
	if raw.Error != nil {
		op.detail.err = rpcError(raw.Error)
	}
	if raw.Metadata.BatchStats != nil {
		var err error
		if op.detail.stats, err = batchStats(raw.Metadata.BatchStats); err != nil {
			return batchOperation{}, fmt.Errorf("decode metadata.batchStats: %w", err)
		}
	}
	if w := raw.Metadata.Webhook; w != nil {
		for _, m := range []json.RawMessage{w.UserMetadata, w.UserMetadataCamel} {
			if op.userMetadata == nil && len(m) > 0 {
				// Metadata that does not decode names no intent: the job is
				// still matched on its display name.
				op.userMetadata, _ = decodeObject(m)
			}
		}
	}
	return op, nil
}

// decodeObject decodes a JSON object keeping numbers as json.Number.
func decodeObject(b []byte) (map[string]any, error) {
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
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
