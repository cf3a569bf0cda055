package fakegemini_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai/interactions/models/apierrors"
	"google.golang.org/genai/interactions/models/operations"
	"google.golang.org/genai/interactions/models/webhooks"

	"github.com/lrosink/lrosink/internal/fakegemini"
)

func interactionReq(id string) operations.GetInteractionByIDRequest {
	return operations.GetInteractionByIDRequest{ID: id}
}

func createReq(uri string) operations.CreateWebhookRequest {
	name := "hook"
	return operations.CreateWebhookRequest{Body: webhooks.WebhookInput{
		Name: &name, URI: uri,
		SubscribedEvents: []webhooks.WebhookSubscribedEvent{"batch.succeeded", "video.generated"},
	}}
}

func TestWebhookLifecycleThroughSDK(t *testing.T) {
	now := t0
	fake, client, _ := setup(t, fakegemini.WithClock(func() time.Time { return now }))
	ctx := t.Context()
	wh := client.Webhooks

	created, err := wh.Create(ctx, createReq("https://example.com/hook"))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	w := created.Webhook
	if w == nil || w.ID == nil || w.NewSigningSecret == nil {
		t.Fatalf("created = %+v", w)
	}
	id, secret := *w.ID, *w.NewSigningSecret
	if n := len(decodeSecret(t, secret)); n != 32 {
		t.Errorf("secret has %d random bytes, want 32", n)
	}
	if w.URI != "https://example.com/hook" || *w.State != webhooks.WebhookStateEnabled ||
		!slices.Equal(w.SubscribedEvents, []webhooks.WebhookSubscribedEvent{"batch.succeeded", "video.generated"}) {
		t.Errorf("created = %+v", w)
	}
	if len(w.SigningSecrets) != 1 || *w.SigningSecrets[0].TruncatedSecret != "whsec_..."+secret[len(secret)-4:] {
		t.Errorf("signing secrets = %+v", w.SigningSecrets)
	}
	if w.CreateTime == nil || !w.CreateTime.Equal(t0) {
		t.Errorf("create time = %v", w.CreateTime)
	}

	got, err := wh.Get(ctx, operations.GetWebhookRequest{ID: id})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Webhook.NewSigningSecret != nil {
		t.Error("the secret must be shown only on create")
	}

	// Update: the body decides; update_mask is only recorded.
	disabled := webhooks.WebhookUpdateStateDisabled
	mask := "state"
	upd, err := wh.Update(ctx, operations.UpdateWebhookRequest{ID: id, UpdateMask: &mask, Body: webhooks.WebhookUpdate{State: &disabled}})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if *upd.Webhook.State != webhooks.WebhookStateDisabled || upd.Webhook.URI != "https://example.com/hook" {
		t.Errorf("updated = %+v", upd.Webhook)
	}

	if _, err := wh.Ping(ctx, operations.PingWebhookRequest{ID: id}); err != nil {
		t.Fatalf("ping: %v", err)
	}

	// Rotate with the 24h grace period: both secrets stay valid.
	now = t0.Add(time.Hour)
	after24 := webhooks.RevocationBehaviorRevokePreviousSecretsAfterH24
	rot, err := wh.RotateSigningSecret(ctx, operations.RotateSigningSecretRequest{ID: id,
		Body: webhooks.RotateSigningSecretRequest{RevocationBehavior: &after24}})
	if err != nil {
		t.Fatalf("rotate: %v", err)
	}
	secret2 := *rot.WebhookRotateSigningSecretResponse.Secret
	decodeSecret(t, secret2)
	snap, ok := fake.Webhook(id)
	if !ok || !slices.Equal(snap.Secrets, []string{secret2, secret}) || snap.Pings != 1 || snap.State != "disabled" {
		t.Errorf("after rotate = %+v", snap)
	}
	got, err = wh.Get(ctx, operations.GetWebhookRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if ss := got.Webhook.SigningSecrets; len(ss) != 2 || ss[0].ExpireTime != nil || ss[1].ExpireTime == nil ||
		!ss[1].ExpireTime.Equal(now.Add(24*time.Hour)) {
		t.Errorf("signing secrets after rotate = %+v", ss)
	}

	// The old secret expires after 24h.
	now = now.Add(24 * time.Hour)
	if snap, _ := fake.Webhook(id); !slices.Equal(snap.Secrets, []string{secret2}) {
		t.Errorf("after expiry = %q", snap.Secrets)
	}

	// Immediate revocation.
	immediately := webhooks.RevocationBehaviorRevokePreviousSecretsImmediately
	rot, err = wh.RotateSigningSecret(ctx, operations.RotateSigningSecretRequest{ID: id,
		Body: webhooks.RotateSigningSecretRequest{RevocationBehavior: &immediately}})
	if err != nil {
		t.Fatalf("rotate immediately: %v", err)
	}
	if snap, _ := fake.Webhook(id); !slices.Equal(snap.Secrets, []string{*rot.WebhookRotateSigningSecretResponse.Secret}) {
		t.Errorf("after immediate rotate = %q", snap.Secrets)
	}

	if _, err := wh.Delete(ctx, operations.DeleteWebhookRequest{ID: id}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = wh.Get(ctx, operations.GetWebhookRequest{ID: id})
	var ae *apierrors.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound {
		t.Errorf("get after delete: %v", err)
	}

	// Every request is recorded with method, path, query and body.
	type rec struct{ method, path, query string }
	var recs []rec
	for _, r := range fake.Requests() {
		recs = append(recs, rec{r.Method, r.Path, r.Query.Encode()})
	}
	want := []rec{
		{"POST", "/v1beta/webhooks", ""},
		{"GET", "/v1beta/webhooks/" + id, ""},
		{"PATCH", "/v1beta/webhooks/" + id, "update_mask=state"},
		{"POST", "/v1beta/webhooks/" + id + ":ping", ""},
		{"POST", "/v1beta/webhooks/" + id + ":rotateSigningSecret", ""},
		{"GET", "/v1beta/webhooks/" + id, ""},
		{"POST", "/v1beta/webhooks/" + id + ":rotateSigningSecret", ""},
		{"DELETE", "/v1beta/webhooks/" + id, ""},
		{"GET", "/v1beta/webhooks/" + id, ""},
	}
	if !slices.Equal(recs, want) {
		t.Errorf("requests:\n got %v\nwant %v", recs, want)
	}
	reqs := fake.Requests()
	var body map[string]any
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil || body["uri"] != "https://example.com/hook" {
		t.Errorf("create body %s (%v)", reqs[0].Body, err)
	}
	if string(reqs[4].Body) != `{"revocation_behavior":"revoke_previous_secrets_after_h24"}` {
		t.Errorf("rotate body %s", reqs[4].Body)
	}
	if !strings.Contains(string(reqs[2].Body), `"state":"disabled"`) {
		t.Errorf("patch body %s", reqs[2].Body)
	}
}

func TestWebhookListPaging(t *testing.T) {
	fake, client, _ := setup(t)
	ctx := t.Context()
	var ids []string
	for range 3 {
		resp, err := client.Webhooks.Create(ctx, createReq("https://example.com/h"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, *resp.Webhook.ID)
	}
	size := 2
	var got []string
	var token *string
	for range 3 {
		resp, err := client.Webhooks.List(ctx, operations.ListWebhooksRequest{PageSize: &size, PageToken: token})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		for _, w := range resp.WebhookListResponse.Webhooks {
			got = append(got, *w.ID)
			if w.NewSigningSecret != nil {
				t.Error("list shows a full secret")
			}
		}
		token = resp.WebhookListResponse.NextPageToken
		if token == nil {
			break
		}
	}
	if !slices.Equal(got, ids) || token != nil {
		t.Errorf("listed %v (token %v), want %v", got, token, ids)
	}
	if n := len(fake.Webhooks()); n != 3 {
		t.Errorf("Webhooks() has %d", n)
	}
}

func TestWebhookValidation(t *testing.T) {
	_, client, _ := setup(t)
	ctx := t.Context()
	if _, err := client.Webhooks.Create(ctx, createReq("")); err == nil {
		t.Error("create without uri: no error")
	}
	resp, err := client.Webhooks.Create(ctx, createReq("https://example.com/h"))
	if err != nil {
		t.Fatal(err)
	}
	// Both *.cancelled are refused, on create and on update, as live
	// (GEMINI.md §10); the seven others are accepted.
	for _, ev := range []string{"batch.cancelled", "interaction.cancelled", "batch.completed"} {
		req := createReq("https://example.com/c")
		req.Body.SubscribedEvents = []webhooks.WebhookSubscribedEvent{"batch.succeeded", webhooks.WebhookSubscribedEvent(ev)}
		_, err := client.Webhooks.Create(ctx, req)
		if err == nil || !strings.Contains(err.Error(), `Invalid value at 'webhook.subscribed_events[1]'`) || !strings.Contains(err.Error(), "400") {
			t.Errorf("create with %s: %v", ev, err)
		}
		_, err = client.Webhooks.Update(ctx, operations.UpdateWebhookRequest{ID: *resp.Webhook.ID,
			Body: webhooks.WebhookUpdate{SubscribedEvents: []webhooks.WebhookUpdateSubscribedEvent{webhooks.WebhookUpdateSubscribedEvent(ev)}}})
		if err == nil {
			t.Errorf("update with %s: no error", ev)
		}
	}
	all := createReq("https://example.com/all")
	all.Body.SubscribedEvents = nil
	for _, ev := range fakegemini.SubscribableEvents() {
		all.Body.SubscribedEvents = append(all.Body.SubscribedEvents, webhooks.WebhookSubscribedEvent(ev))
	}
	if _, err := client.Webhooks.Create(ctx, all); err != nil || len(all.Body.SubscribedEvents) != 7 {
		t.Errorf("create with the seven: %v", err)
	}
	bogus := webhooks.RevocationBehavior("sometime")
	if _, err := client.Webhooks.RotateSigningSecret(ctx, operations.RotateSigningSecretRequest{ID: *resp.Webhook.ID,
		Body: webhooks.RotateSigningSecretRequest{RevocationBehavior: &bogus}}); err == nil {
		t.Error("rotate with an unknown behaviour: no error")
	}
}
