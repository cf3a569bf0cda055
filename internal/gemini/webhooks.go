package gemini

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genai/interactions/models/operations"
	"google.golang.org/genai/interactions/retry"

	"github.com/lrosink/lrosink/internal/event"
)

// disabled reports whether Gemini delivers nothing to a webhook in state
// (the API's states: "enabled", "disabled",
// "disabled_due_to_failed_deliveries").
func disabled(state string) bool {
	return state == "disabled" || state == "disabled_due_to_failed_deliveries"
}

// Paging bounds of ListWebhooks.
const (
	webhookPageSize = 100
	maxWebhookPages = 100
)

// ListWebhooks reads every webhook of the API key's project through the
// genai SDK (Webhooks.List, all pages), as the reconciler's health check
// sees them (reconcile.WebhookLister). The SDK's own retries are off: the
// caller reads again on its next pass, and a pass must not spend 30 s of
// retries on a health check.
func (f *Fetcher) ListWebhooks(ctx context.Context) ([]event.Webhook, error) {
	if f.client.Webhooks == nil {
		return nil, errors.New("gemini: the genai client has no Webhooks service")
	}
	var out []event.Webhook
	token := ""
	for page := 1; page <= maxWebhookPages; page++ {
		size := webhookPageSize
		req := operations.ListWebhooksRequest{PageSize: &size}
		if token != "" {
			req.PageToken = &token
		}
		resp, err := f.client.Webhooks.List(ctx, req, operations.WithRetries(retry.Config{Strategy: "none"}))
		if err != nil {
			if kerr, ok := asKeyError(fmt.Sprintf("list webhooks (page %d)", page), err); ok {
				return nil, scrub(kerr, f.apiKey)
			}
			return nil, fmt.Errorf("gemini: list webhooks (page %d): %w", page, scrub(describeInteractionError(err), f.apiKey))
		}
		body := resp.GetWebhookListResponse()
		for _, w := range body.GetWebhooks() {
			wh := event.Webhook{URI: w.URI}
			if w.ID != nil {
				wh.ID = *w.ID
			}
			if w.Name != nil {
				wh.Name = *w.Name
			}
			if w.State != nil {
				wh.State = string(*w.State)
			}
			wh.Disabled = disabled(wh.State)
			out = append(out, wh)
		}
		next := body.GetNextPageToken()
		if next == nil || *next == "" || *next == token {
			return out, nil
		}
		token = *next
	}
	return nil, fmt.Errorf("gemini: list webhooks: more than %d pages", maxWebhookPages)
}
