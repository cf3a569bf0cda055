package gemini

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai/interactions/models/interactions"
	"google.golang.org/genai/interactions/models/operations"
	"google.golang.org/genai/interactions/retry"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
)

// unknownInteractionPrefix marks interaction statuses lrosink has no state
// for; the prefix keeps them apart from batch job states in logs.
const unknownInteractionPrefix = "interaction:"

func (f *Fetcher) fetchInteraction(ctx context.Context, name string) (event.Event, error) {
	id := strings.TrimPrefix(name, "interactions/")
	var it *interactions.Interaction
	err := f.call(ctx, name, func(ctx context.Context) error {
		// The Interactions client retries 408/409/429/5xx on its own by
		// default (up to 4 retries, 30s); turned off so the Fetcher's loop is
		// the only one and its Backoff/Sleep/MaxAttempts hold.
		resp, err := f.client.Interactions.Get(ctx, operations.GetInteractionByIDRequest{ID: id},
			operations.WithRetries(retry.Config{Strategy: "none"}))
		if err != nil {
			return describeInteractionError(err)
		}
		if resp == nil || resp.Interaction == nil {
			return errors.New("answer holds no interaction")
		}
		it = resp.Interaction
		return nil
	})
	if err != nil {
		return event.Event{}, err
	}
	return interactionEvent(it, name), nil
}

// interactionEvent maps an Interaction. UpdateTime comes from "updated"; a
// missing or unparsable value gives the zero time (the event then loses
// every tie in the reducer) rather than an error, because the status is
// still worth recording.
func interactionEvent(it *interactions.Interaction, fallbackName string) event.Event {
	ev := event.Event{
		Name:         fallbackName,
		Kind:         opname.KindInteraction,
		State:        interactionState(it.Status),
		GeminiStatus: string(it.Status),
		Source:       event.SourceReconcile,
	}
	if it.ID != nil && *it.ID != "" {
		ev.Name = "interactions/" + *it.ID
	}
	if it.Updated != nil {
		if t, err := time.Parse(time.RFC3339Nano, *it.Updated); err == nil {
			ev.UpdateTime = t.UTC()
		}
	}
	if ev.State == lifecycle.Failed {
		ev.Error = failure(it)
	}
	if it.OutputText != nil && *it.OutputText != "" {
		ev.Output = map[string]any{"output_text": *it.OutputText}
	}
	// The intent the create named (GEMINI.md §13: the interaction echoes its
	// webhook config). Only the key: the SDK decodes the metadata's numbers
	// as floats, which would round a big integer.
	if w := it.WebhookConfig; w != nil {
		ev.Intent = event.IntentOf(w.UserMetadata)
	}
	return ev
}

func interactionState(s interactions.InteractionStatus) lifecycle.State {
	switch s {
	case interactions.InteractionStatusQueued:
		return lifecycle.Pending
	case interactions.InteractionStatusInProgress, interactions.InteractionStatusRequiresContinuation:
		// requires_continuation is a pause a background interaction
		// continues server-side: still running.
		return lifecycle.Running
	case interactions.InteractionStatusRequiresAction:
		return lifecycle.RequiresAction
	case interactions.InteractionStatusCompleted:
		return lifecycle.Succeeded
	case interactions.InteractionStatusFailed:
		return lifecycle.Failed
	case interactions.InteractionStatusCancelled:
		return lifecycle.Cancelled
	case interactions.InteractionStatusIncomplete, interactions.InteractionStatusBudgetExceeded:
		// Ended without finishing (max_output_tokens, budget). No webhook
		// event exists for these: only this fetch ever sees them.
		return lifecycle.Incomplete
	default:
		// New values: never a guessed state.
		return lifecycle.State(unknownInteractionPrefix + string(s))
	}
}

// failure is why a failed interaction failed: the first of its top-level
// errors[], else the last model_output step's error (a google.rpc.Status),
// where the live API can put it with errors[] empty (GEMINI.md §10); nil
// when neither says.
func failure(it *interactions.Interaction) *event.ErrorInfo {
	if len(it.Errors) > 0 {
		return interactionError(it.Errors[0])
	}
	for i := len(it.Steps) - 1; i >= 0; i-- {
		mo := it.Steps[i].ModelOutputStep
		if mo == nil || mo.Error == nil {
			continue
		}
		e := &event.ErrorInfo{}
		if mo.Error.Code != nil {
			e.Code = *mo.Error.Code
		}
		if mo.Error.Message != nil {
			e.Message = *mo.Error.Message
		}
		return e
	}
	return nil
}

// interactionError maps an Interactions error, whose code is a string (a
// URI naming the error type) where ErrorInfo wants a number: a numeric code
// is kept, any other goes in front of the message so it is not lost.
func interactionError(e interactions.Error) *event.ErrorInfo {
	var code, msg string
	if e.Code != nil {
		code = *e.Code
	}
	if e.Message != nil {
		msg = *e.Message
	}
	if n, err := strconv.Atoi(strings.TrimSpace(code)); err == nil {
		return &event.ErrorInfo{Code: n, Message: msg}
	}
	return &event.ErrorInfo{Message: results.ErrorMessage(code, msg)}
}
