package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/webhook"
	"google.golang.org/genai/interactions/models/operations"
	"google.golang.org/genai/interactions/models/webhooks"
)

func createDoc() command.Doc {
	return command.Doc{
		Path: "webhooks create",
		Env:  envDoc,
		Args: "--uri URL [--events E1,E2,...] [--name NAME] [--secret projects/P/secrets/S]",
		Summary: `Register a webhook with Gemini for this API key's project. Gemini then POSTs the
subscribed events to URL, signed with a new signing secret that it shows only
this once:
  - with --secret, the secret becomes a new version of that Secret Manager secret
    (the value of LROSINK_WEBHOOK_SECRETS for lrosink's webhook service); only the
    version name and the truncated secret (whsec_...abcd) are printed;
  - without --secret, it is printed once on stdout as LROSINK_WEBHOOK_SECRETS=whsec_...

The default events are the seven the live API accepts: every event lrosink
handles except batch.cancelled and interaction.cancelled, which are documented
but rejected by the API (GEMINI.md §10). lrosink still accepts them if they are
ever delivered, and its reconcile pass settles cancelled operations by polling.`,
		Examples: []string{
			"lrosink webhooks create --uri https://lrosink-webhook-xyz.a.run.app/ --secret projects/my-proj/secrets/lrosink-webhook-secrets",
			"lrosink webhooks create --uri https://hooks.example.com/gemini --name lrosink-prod",
			"lrosink webhooks create --uri https://hooks.example.com/gemini --events batch.succeeded,batch.failed,batch.expired",
		},
	}
}

func runCreate(ctx context.Context, r *runner, args []string) error {
	fs := command.NewFlagSet("create")
	uri := fs.String("uri", "", "HTTPS `URL` Gemini delivers events to (required)")
	var events command.ListValue
	fs.Var(&events, "events", "`EVENTS` to subscribe to, comma-separated or repeated (default: the seven the API accepts: "+strings.Join(DefaultEvents(), ",")+")")
	name := fs.String("name", "", "display `NAME` of the webhook")
	secret := fs.String("secret", "", "store the signing secret as a new version of this Secret Manager `SECRET` (projects/P/secrets/S) instead of printing it")
	if _, err := createDoc().Parse(r.stdout, fs, args); err != nil {
		return err
	}
	if err := checkURI(*uri); err != nil {
		return err
	}
	known := webhook.EventTypes()
	if len(events) == 0 {
		events = DefaultEvents()
	}
	for _, ev := range events {
		switch {
		case !slices.Contains(known, ev):
			r.warnf("note: %q is not an event lrosink knows; subscribing to it anyway", ev)
		case !slices.Contains(DefaultEvents(), ev):
			r.warnf("note: the live API has rejected %q (GEMINI.md §10); subscribing to it anyway", ev)
		}
	}

	wh, err := r.webhooksClient(ctx)
	if err != nil {
		return err
	}
	target, release, err := r.secretTarget(ctx, *secret)
	if err != nil {
		return err
	}
	defer release()

	in := webhooks.WebhookInput{URI: *uri}
	for _, ev := range events {
		in.SubscribedEvents = append(in.SubscribedEvents, webhooks.WebhookSubscribedEvent(ev))
	}
	if *name != "" {
		in.Name = name
	}
	resp, err := wh.Create(ctx, operations.CreateWebhookRequest{Body: in}, noRetries())
	if err != nil {
		return createError(describe(err), events)
	}
	w := resp.GetWebhook()
	id := deref(w.GetID())
	newSecret := deref(w.GetNewSigningSecret())
	if id == "" {
		if newSecret != "" {
			// Unusable without an id, but still the only copy: keep it.
			r.addSensitive(newSecret)
		}
		return errors.New("the answer has no webhook id; check 'lrosink webhooks list' and delete or rotate what was created")
	}
	fmt.Fprintf(r.stdout, "Created webhook %s\n  uri:    %s\n  events: %s\n", id, w.GetURI(), joinEvents(w.GetSubscribedEvents()))
	if newSecret == "" {
		return fmt.Errorf("the answer has no signing secret for webhook %s; get one with 'lrosink webhooks rotate %s'", id, id)
	}
	_, err = r.deliverSecret(ctx, target, id, newSecret, false)
	return err
}

// DefaultEvents are the events `webhooks create` subscribes to by default:
// every type lrosink handles (webhook.EventTypes) except the two
// *.cancelled, which the live API rejects (GEMINI.md §10), so a create with
// the defaults works. The parser keeps accepting them: a delivery of one
// is still applied. A function, so no caller can change the list.
func DefaultEvents() []string {
	return slices.DeleteFunc(webhook.EventTypes(), func(ev string) bool { return strings.HasSuffix(ev, ".cancelled") })
}

// checkURI requires an absolute https URL: Gemini only delivers to https
// (GEMINI.md §1), so anything else would register a webhook that never
// fires.
func checkURI(raw string) error {
	if raw == "" {
		return command.Usagef("--uri is required")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return command.Usagef("--uri %q: want an absolute https:// URL (Gemini delivers only to https)", raw)
	}
	return nil
}

// createError explains a failed create. A 400 about events is most likely
// the *.cancelled conflict (GEMINI.md §3); a 5xx or a lost answer may have
// created a webhook (and a secret nobody saw).
func createError(err error, events []string) error {
	var ae *apiError
	if errors.As(err, &ae) && ae.Code == http.StatusBadRequest && strings.Contains(strings.ToLower(ae.Message), "event") {
		var cancelled, rest []string
		for _, ev := range events {
			if strings.HasSuffix(ev, ".cancelled") {
				cancelled = append(cancelled, ev)
			} else {
				rest = append(rest, ev)
			}
		}
		if len(cancelled) > 0 && len(rest) > 0 {
			return fmt.Errorf("the subscribed events were rejected: %w\n"+
				"The *.cancelled events (%s) are documented but the live API rejects them. "+
				"Drop them and retry with --events %s; lrosink's reconcile pass still settles cancelled operations by polling",
				err, strings.Join(cancelled, ","), strings.Join(rest, ","))
		}
		return fmt.Errorf("the subscribed events were rejected: %w", err)
	}
	if maybeApplied(err) {
		return fmt.Errorf("%w\nThe webhook may have been created anyway: check 'lrosink webhooks list'; "+
			"if it is there, its secret was never shown: rotate it ('lrosink webhooks rotate ID') or delete it", err)
	}
	return err
}

func joinEvents(evs []webhooks.WebhookSubscribedEvent) string {
	s := make([]string, len(evs))
	for i, ev := range evs {
		s[i] = string(ev)
	}
	return strings.Join(s, ",")
}
