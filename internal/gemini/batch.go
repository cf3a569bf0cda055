package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"google.golang.org/genai"

	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
)

// maxOperationBody bounds the raw GET's answer; a batch Operation with
// inlined responses can be large, but its error sits at the top.
const maxOperationBody = 64 << 20

func (f *Fetcher) fetchBatch(ctx context.Context, name string) (ingest.Event, error) {
	var job *genai.BatchJob
	err := f.call(ctx, name, func(ctx context.Context) (err error) {
		job, err = f.client.Batches.Get(ctx, name, &genai.GetBatchJobConfig{HTTPOptions: noSDKRetries()})
		return err
	})
	if err != nil {
		return ingest.Event{}, err
	}
	ev := batchEvent(job, name)
	if err := f.addBatchError(ctx, &ev); err != nil {
		return ingest.Event{}, err
	}
	return ev, nil
}

// batchEvent maps a BatchJob. UpdateTime stays zero when the API sent none:
// the reducer then treats the event as older than anything stored.
func batchEvent(job *genai.BatchJob, fallbackName string) ingest.Event {
	ev := ingest.Event{
		Name:         job.Name,
		Kind:         opname.KindBatch,
		State:        batchState(job.State),
		GeminiStatus: string(job.State),
		Source:       ingest.SourceReconcile,
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

// addBatchError fills ev.Error for a FAILED batch. In Gemini mode the SDK
// never maps the Operation's "error" into BatchJob.Error, so it is read with
// one raw GET of the same resource.
//
// The detail is best effort: Gemini already said FAILED, and withholding
// that state because the second GET failed would leave the operation
// pending for as long as the GET keeps failing (and a listing page would
// lose every job on it). So a GET that fails for good, or still fails when
// the retries run out, leaves ev.Error nil and is logged. Only the end of
// the caller's context is returned: nothing will apply this answer then,
// and the next check can still read the detail.
func (f *Fetcher) addBatchError(ctx context.Context, ev *ingest.Event) error {
	if ev.State != lifecycle.Failed {
		return nil
	}
	info, err := f.operationError(ctx, ev.Name)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		f.log.WarnContext(ctx, "gemini: FAILED batch without its error detail: the detail GET failed",
			"operation", ev.Name, "error", scrub(err, f.apiKey).Error())
		return nil
	}
	ev.Error = info
	return nil
}

// operationError returns the google.rpc.Status "error" of the Operation
// behind name, or nil when it has none.
func (f *Fetcher) operationError(ctx context.Context, name string) (*ingest.ErrorInfo, error) {
	var info *ingest.ErrorInfo
	err := f.call(ctx, name, func(ctx context.Context) (err error) {
		info, err = f.rawOperationError(ctx, name)
		if err != nil {
			return fmt.Errorf("raw GET for the error detail: %w", err)
		}
		return nil
	})
	return info, err
}

// rawOperationError is one GET of {BaseURL}/{version}/{name}.
func (f *Fetcher) rawOperationError(ctx context.Context, name string) (*ingest.ErrorInfo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.apiRoot.JoinPath(name).String(), nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, v := range f.headers {
		req.Header[k] = append([]string(nil), v...)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("x-goog-api-key", f.apiKey)
	resp, err := f.raw.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOperationBody))
	if err != nil {
		return nil, fmt.Errorf("read operation: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, newHTTPError(resp.StatusCode, body)
	}
	var op struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &op); err != nil {
		return nil, fmt.Errorf("decode operation: %w", err)
	}
	if op.Error == nil {
		return nil, nil
	}
	return &ingest.ErrorInfo{Code: op.Error.Code, Message: op.Error.Message}, nil
}
