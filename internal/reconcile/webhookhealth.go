package reconcile

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/lrosink/lrosink/internal/event"
)

// WebhookLister reads the project's webhooks (the Gemini adapter does,
// through the genai SDK's Webhooks.List).
type WebhookLister interface {
	ListWebhooks(ctx context.Context) ([]event.Webhook, error)
}

// DefaultWebhookCheckEvery paces the webhook health read: one list call per
// ten minutes at most, however often passes run.
const DefaultWebhookCheckEvery = 10 * time.Minute

// webhookHealth is what the reconciler knows about the project webhooks. It
// lives in memory: a new instance reads the list on its first pass and, if
// a webhook is still disabled then, raises the alert once more.
type webhookHealth struct {
	mu        sync.Mutex
	read      bool      // listed at least once
	readAt    time.Time // last attempt
	disabled  map[string]event.Webhook
	skipNoted bool
}

// checkWebhooks reads the webhook list when the last read is
// WebhookCheckEvery old, raises one ERROR line (alert webhook-disabled) for
// each webhook that became disabled and one INFO line for each that
// recovered, and reports whether any is disabled now: the pass then polls
// pending operations at BackoffMin, as no webhook is coming for them.
//
// quiet (a range pass) raises neither line: it learns only whether to poll
// faster, into its own record h, and leaves the alerts to the shared pass.
func (r *Reconciler) checkWebhooks(ctx context.Context, now time.Time, t *tally, h *webhookHealth, quiet bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() { n := len(h.disabled); t.add(func(s *Summary) { s.WebhooksDisabled = n }) }()
	if r.cfg.Webhooks == nil {
		if !h.skipNoted {
			h.skipNoted = true
			r.cfg.Log.WarnContext(ctx, "reconcile: webhook health is not checked: GEMINI_API_KEY is not set")
		}
		return false
	}
	if h.read && now.Sub(h.readAt) < r.cfg.WebhookCheckEvery {
		return len(h.disabled) > 0
	}
	prev := h.readAt
	h.readAt = now
	hooks, err := r.cfg.Webhooks.ListWebhooks(ctx)
	if err != nil && cut(ctx) {
		// The pass's work time ran out first (claim retries can take all
		// of it): not read, no error, and the next pass reads.
		h.readAt = prev
		return len(h.disabled) > 0
	}
	if err != nil {
		// What was known stays in force until a read succeeds.
		t.add(func(s *Summary) { s.Errors++ })
		r.cfg.Log.WarnContext(ctx, "reconcile: could not read the project webhooks; webhook health unchanged",
			"error", err.Error(), "webhooks_disabled", len(h.disabled))
		return len(h.disabled) > 0
	}
	h.read = true
	current := map[string]event.Webhook{}
	for _, w := range hooks {
		if w.Disabled {
			current[w.ID] = w
		}
	}
	if quiet {
		h.disabled = current
		return len(h.disabled) > 0
	}
	for _, id := range slices.Sorted(maps.Keys(current)) {
		if _, known := h.disabled[id]; !known {
			w := current[id]
			r.cfg.Log.ErrorContext(ctx, "project webhook disabled by Gemini: completions arrive only by polling",
				webhookAttrs("alert", w)...)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(h.disabled)) {
		if _, still := current[id]; still {
			continue
		}
		w, state := h.disabled[id], "deleted"
		for _, x := range hooks {
			if x.ID == id {
				w, state = x, x.State
			}
		}
		w.State = state
		r.cfg.Log.InfoContext(ctx, "project webhook no longer disabled", webhookAttrs("resolved_alert", w)...)
	}
	h.disabled = current
	return len(h.disabled) > 0
}

func webhookAttrs(key string, w event.Webhook) []any {
	return []any{slog.String(key, "webhook-disabled"), slog.String("webhook_id", w.ID),
		slog.String("webhook_name", w.Name), slog.String("webhook_uri", w.URI), slog.String("webhook_state", w.State)}
}
