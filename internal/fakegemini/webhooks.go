package fakegemini

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// The webhook states the management API knows (lowercase on the wire).
const (
	WebhookEnabled                       = "enabled"
	WebhookDisabled                      = "disabled"
	WebhookDisabledDueToFailedDeliveries = "disabled_due_to_failed_deliveries"
)

// The revocation behaviours of :rotateSigningSecret.
const (
	RevokeAfter24h     = "revoke_previous_secrets_after_h24"
	RevokeImmediately  = "revoke_previous_secrets_immediately"
	secretGracePeriod  = 24 * time.Hour
	secretPrefix       = "whsec_"
	truncatedSecretLen = 4
)

// SubscribableEvents are the seven event types the live API accepts in
// subscribed_events (GEMINI.md §10): the nine documented ones less both
// *.cancelled, which a create or update naming them is refused for.
func SubscribableEvents() []string {
	return []string{
		"batch.succeeded", "batch.failed", "batch.expired",
		"interaction.requires_action", "interaction.completed", "interaction.failed",
		"video.generated",
	}
}

// checkEvents refuses what the live API refuses: any value outside
// SubscribableEvents, in the shape of Google's JSON enum errors (the exact
// wording of the live message is unconfirmed).
func checkEvents(events []string) *response {
	for i, ev := range events {
		if !slices.Contains(SubscribableEvents(), ev) {
			r := badRequest(fmt.Sprintf("Invalid value at 'webhook.subscribed_events[%d]' "+
				"(type.googleapis.com/google.ai.generativelanguage.v1beta.Webhook.SubscribedEvent), %q", i, ev))
			return &r
		}
	}
	return nil
}

type signingSecret struct {
	value  string
	expire time.Time // zero: no expiry
}

type webhook struct {
	id, name, uri string
	events        []string
	state         string
	secrets       []signingSecret // newest first
	pings         int
	created       time.Time
	updated       time.Time
}

// Webhook is a snapshot of a stored webhook for test assertions.
type Webhook struct {
	ID               string
	Name             string
	URI              string
	SubscribedEvents []string
	State            string
	// Secrets are the full signing secrets still valid, newest first, so a
	// test can sign deliveries the way Gemini would.
	Secrets []string
	Pings   int
}

// Webhook returns the stored webhook with the given id.
func (s *Server) Webhook(id string) (Webhook, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.webhooks[id]
	if !ok {
		return Webhook{}, false
	}
	return s.snapshot(w), true
}

// Webhooks returns every stored webhook in creation order.
func (s *Server) Webhooks() []Webhook {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Webhook, 0, len(s.webhookOrder))
	for _, id := range s.webhookOrder {
		out = append(out, s.snapshot(s.webhooks[id]))
	}
	return out
}

func (s *Server) snapshot(w *webhook) Webhook {
	out := Webhook{ID: w.id, Name: w.name, URI: w.uri, SubscribedEvents: slices.Clone(w.events), State: w.state, Pings: w.pings}
	for _, sec := range s.liveSecrets(w) {
		out.Secrets = append(out.Secrets, sec.value)
	}
	return out
}

// liveSecrets drops expired secrets. Called with s.mu held.
func (s *Server) liveSecrets(w *webhook) []signingSecret {
	now := s.now()
	w.secrets = slices.DeleteFunc(w.secrets, func(sec signingSecret) bool {
		return !sec.expire.IsZero() && !sec.expire.After(now)
	})
	return w.secrets
}

// newSecret returns a deterministic, distinct "whsec_" + base64(32 bytes).
// Called with s.mu held.
func (s *Server) newSecret() string {
	s.secretSeq++
	sum := sha256.Sum256(fmt.Appendf(nil, "fakegemini/secret/%d", s.secretSeq))
	return secretPrefix + base64.StdEncoding.EncodeToString(sum[:])
}

type signingSecretJSON struct {
	TruncatedSecret string `json:"truncated_secret"`
	ExpireTime      string `json:"expire_time,omitempty"`
}

type webhookJSON struct {
	ID               string              `json:"id"`
	Name             string              `json:"name,omitempty"`
	URI              string              `json:"uri"`
	SubscribedEvents []string            `json:"subscribed_events"`
	State            string              `json:"state"`
	SigningSecrets   []signingSecretJSON `json:"signing_secrets,omitempty"`
	NewSigningSecret string              `json:"new_signing_secret,omitempty"`
	CreateTime       string              `json:"create_time,omitempty"`
	UpdateTime       string              `json:"update_time,omitempty"`
}

func (s *Server) webhookBody(w *webhook) webhookJSON {
	out := webhookJSON{
		ID: w.id, Name: w.name, URI: w.uri, SubscribedEvents: slices.Clone(w.events), State: w.state,
		CreateTime: rfc3339(w.created), UpdateTime: rfc3339(w.updated),
	}
	if out.SubscribedEvents == nil {
		out.SubscribedEvents = []string{}
	}
	for _, sec := range s.liveSecrets(w) {
		out.SigningSecrets = append(out.SigningSecrets, signingSecretJSON{
			TruncatedSecret: secretPrefix + "..." + sec.value[len(sec.value)-truncatedSecretLen:],
			ExpireTime:      rfc3339(sec.expire),
		})
	}
	return out
}

func (s *Server) listWebhooks(q url.Values) response {
	start, end, next, errResp := page(len(s.webhookOrder), q.Get("page_size"), q.Get("page_token"))
	if errResp != nil {
		return *errResp
	}
	hooks := make([]webhookJSON, 0, end-start)
	for _, id := range s.webhookOrder[start:end] {
		hooks = append(hooks, s.webhookBody(s.webhooks[id]))
	}
	return jsonResponse(http.StatusOK, struct {
		Webhooks      []webhookJSON `json:"webhooks"`
		NextPageToken string        `json:"next_page_token,omitempty"`
	}{hooks, next})
}

func (s *Server) createWebhook(body []byte) response {
	var in struct {
		Name             string   `json:"name"`
		URI              string   `json:"uri"`
		SubscribedEvents []string `json:"subscribed_events"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return badRequest("invalid webhook: " + err.Error())
	}
	if in.URI == "" {
		return badRequest("webhook uri is required")
	}
	if r := checkEvents(in.SubscribedEvents); r != nil {
		return *r
	}
	s.webhookSeq++
	now := s.now()
	w := &webhook{
		id: fmt.Sprintf("wh%06d", s.webhookSeq), name: in.Name, uri: in.URI,
		events: slices.Clone(in.SubscribedEvents), state: WebhookEnabled,
		created: now, updated: now,
	}
	secret := s.newSecret()
	w.secrets = []signingSecret{{value: secret}}
	s.webhooks[w.id] = w
	s.webhookOrder = append(s.webhookOrder, w.id)

	out := s.webhookBody(w)
	out.NewSigningSecret = secret // shown once, as the real API does
	return jsonResponse(http.StatusOK, out)
}

func (s *Server) webhookMethod(method, id, verb string, body []byte) response {
	w, ok := s.webhooks[id]
	if !ok {
		return notFound()
	}
	switch {
	case verb == "" && method == http.MethodGet:
		return jsonResponse(http.StatusOK, s.webhookBody(w))
	case verb == "" && method == http.MethodPatch:
		return s.updateWebhook(w, body)
	case verb == "" && method == http.MethodDelete:
		delete(s.webhooks, id)
		s.webhookOrder = slices.DeleteFunc(s.webhookOrder, func(x string) bool { return x == id })
		return jsonResponse(http.StatusOK, struct{}{})
	case verb == "ping" && method == http.MethodPost:
		w.pings++
		return jsonResponse(http.StatusOK, struct{}{})
	case verb == "rotateSigningSecret" && method == http.MethodPost:
		return s.rotateSecret(w, body)
	case verb == "" || verb == "ping" || verb == "rotateSigningSecret":
		return methodNotAllowed()
	}
	return notFound()
}

// updateWebhook applies every field present in the body. update_mask is
// ignored, as the live API is reported to do (GEMINI.md §5).
func (s *Server) updateWebhook(w *webhook, body []byte) response {
	var in struct {
		Name             *string  `json:"name"`
		URI              *string  `json:"uri"`
		State            *string  `json:"state"`
		SubscribedEvents []string `json:"subscribed_events"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return badRequest("invalid webhook update: " + err.Error())
	}
	if in.State != nil {
		switch *in.State {
		case WebhookEnabled, WebhookDisabled, WebhookDisabledDueToFailedDeliveries:
		default:
			return badRequest("invalid webhook state " + *in.State)
		}
	}
	if in.URI != nil && *in.URI == "" {
		return badRequest("webhook uri must not be empty")
	}
	if r := checkEvents(in.SubscribedEvents); r != nil {
		return *r
	}
	if in.Name != nil {
		w.name = *in.Name
	}
	if in.URI != nil {
		w.uri = *in.URI
	}
	if in.State != nil {
		w.state = *in.State
	}
	if in.SubscribedEvents != nil {
		w.events = slices.Clone(in.SubscribedEvents)
	}
	w.updated = s.now()
	return jsonResponse(http.StatusOK, s.webhookBody(w))
}

func (s *Server) rotateSecret(w *webhook, body []byte) response {
	var in struct {
		RevocationBehavior string `json:"revocation_behavior"`
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return badRequest("invalid rotate request: " + err.Error())
		}
	}
	now := s.now()
	old := s.liveSecrets(w)
	switch in.RevocationBehavior {
	case RevokeImmediately:
		old = nil
	case "", RevokeAfter24h:
		for i := range old {
			if old[i].expire.IsZero() || old[i].expire.After(now.Add(secretGracePeriod)) {
				old[i].expire = now.Add(secretGracePeriod)
			}
		}
	default:
		return badRequest("invalid revocation_behavior " + in.RevocationBehavior)
	}
	secret := s.newSecret()
	w.secrets = append([]signingSecret{{value: secret}}, old...)
	w.updated = now
	return jsonResponse(http.StatusOK, struct {
		Secret string `json:"secret"`
	}{secret})
}
