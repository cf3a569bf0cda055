package gemini

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"google.golang.org/genai"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
)

func (f *Fetcher) fetchVideo(ctx context.Context, name string) (event.Event, error) {
	var op *genai.GenerateVideosOperation
	err := f.call(ctx, name, func(ctx context.Context) (err error) {
		op, err = f.client.Operations.GetVideosOperation(ctx, &genai.GenerateVideosOperation{Name: name},
			&genai.GetOperationConfig{HTTPOptions: noSDKRetries()})
		return err
	})
	if err != nil {
		return event.Event{}, err
	}
	return videoEvent(op, name), nil
}

// videoEvent maps a Veo long-running operation. A google.longrunning
// Operation carries no update time, so UpdateTime is always zero: within a
// rank the event never beats a stored time, and the rank change
// RUNNING → terminal is what settles it. There is no PENDING: an operation
// not done is RUNNING.
//
// An error is FAILED, whatever its google.rpc code and whichever of its
// fields are missing, even when done is missing too (an Operation with an
// error is over). done without one is SUCCEEDED, because a done Operation
// has exactly one of error and response (a response may list no videos when
// all were RAI-filtered).
func videoEvent(op *genai.GenerateVideosOperation, fallbackName string) event.Event {
	ev := event.Event{Name: op.Name, Kind: opname.KindVideo, Source: event.SourceReconcile}
	if ev.Name == "" {
		ev.Name = fallbackName
	}
	// An Operation has no status string, only its done flag.
	ev.GeminiStatus = "not_done"
	if op.Done {
		ev.GeminiStatus = "done"
	}
	switch {
	case op.Error != nil:
		ev.State = lifecycle.Failed
		ev.Error = rpcError(op.Error)
	case !op.Done:
		ev.State = lifecycle.Running
	default:
		ev.State = lifecycle.Succeeded
		uris := []string{}
		out := map[string]any{}
		if r := op.Response; r != nil {
			for _, v := range r.GeneratedVideos {
				if v != nil && v.Video != nil && v.Video.URI != "" {
					uris = append(uris, v.Video.URI)
				}
			}
			if r.RAIMediaFilteredCount > 0 {
				out["rai_media_filtered_count"] = int(r.RAIMediaFilteredCount)
			}
			if len(r.RAIMediaFilteredReasons) > 0 {
				out["rai_media_filtered_reasons"] = append([]string(nil), r.RAIMediaFilteredReasons...)
			}
		}
		out["video_uris"] = uris
		ev.Output = out
	}
	return ev
}

// rpcError reads a google.rpc.Status decoded into a map. The code may come
// as a number, a numeric string or a name ("INVALID_ARGUMENT"); a name, or
// the REST form's "status" when there is no code, goes in front of the
// message, because ErrorInfo's code is a number.
func rpcError(m map[string]any) *event.ErrorInfo {
	msg, _ := m["message"].(string)
	code := mapInt(m["code"])
	name, _ := m["code"].(string)
	if n, err := strconv.Atoi(strings.TrimSpace(name)); err == nil {
		code, name = n, ""
	}
	if code == 0 && name == "" {
		name, _ = m["status"].(string)
	}
	return &event.ErrorInfo{Code: code, Message: results.ErrorMessage(name, msg)}
}

// mapInt reads a JSON number out of a decoded map.
func mapInt(v any) int {
	switch n := v.(type) {
	case float64:
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			return int(n)
		}
	case int:
		return n
	case int32:
		return int(n)
	case int64:
		return int(n)
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return int(i)
		}
	}
	return 0
}
