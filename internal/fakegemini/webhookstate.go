package fakegemini

import "encoding/json"

// AddWebhook stores an enabled project webhook, as POST /v1beta/webhooks
// would, and returns its id: a test that reads webhook health needs one
// without going through the management API.
func (s *Server) AddWebhook(name, uri string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, _ := json.Marshal(map[string]any{"name": name, "uri": uri, "subscribed_events": []string{"batch.succeeded"}})
	s.createWebhook(body)
	return s.webhookOrder[len(s.webhookOrder)-1]
}

// SetWebhookState switches a webhook to enabled, disabled or
// disabled_due_to_failed_deliveries, as Gemini does on its own when
// deliveries keep failing. It reports false for an unknown id or state.
func (s *Server) SetWebhookState(id, state string) bool {
	switch state {
	case WebhookEnabled, WebhookDisabled, WebhookDisabledDueToFailedDeliveries:
	default:
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.webhooks[id]
	if !ok {
		return false
	}
	w.state = state
	w.updated = s.now()
	return true
}
