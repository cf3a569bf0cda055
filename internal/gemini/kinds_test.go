package gemini_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/fetcherr"
)

// TestFetchErrorKinds: the Fetcher maps what the API answered (through the
// real genai SDK and the fake Gemini's fault injection) onto the fetch
// error kinds its consumers decide on: 404 is NotFound, 408/429/5xx and
// transport failures that outlast the retries, and a caller that gave up,
// are Transient, any other failure is Permanent.
func TestFetchErrorKinds(t *testing.T) {
	cases := []struct {
		name   string
		status int // FailNext status for every call; 0: none
		cancel bool
		absent bool // the operation does not exist
		want   fetcherr.Kind
	}{
		{name: "answered", want: fetcherr.OK},
		{name: "404", absent: true, want: fetcherr.NotFound},
		{name: "503", status: http.StatusServiceUnavailable, want: fetcherr.Transient},
		{name: "429", status: http.StatusTooManyRequests, want: fetcherr.Transient},
		{name: "408", status: http.StatusRequestTimeout, want: fetcherr.Transient},
		{name: "dropped connection", status: fakegemini.Drop, want: fetcherr.Transient},
		{name: "caller gone", cancel: true, want: fetcherr.Transient},
		{name: "400", status: http.StatusBadRequest, want: fetcherr.Permanent},
		{name: "403", status: http.StatusForbidden, want: fetcherr.Permanent},
	}
	for _, k := range kinds {
		for _, c := range cases {
			t.Run(string(k.kind)+"/"+c.name, func(t *testing.T) {
				h := newHarness(t)
				if !c.absent {
					k.set(h.fake)
				}
				if c.status != 0 {
					h.fake.FailNext(k.path, c.status, -1)
				}
				ctx, cancel := context.WithCancel(t.Context())
				if c.cancel {
					cancel()
				}
				defer cancel()
				_, err := h.f.Fetch(ctx, k.kind, k.name)
				if got := fetcherr.KindOf(err); got != c.want {
					t.Errorf("KindOf(%v) = %v, want %v", err, got, c.want)
				}
			})
		}
	}
}

// TestListBatchesErrorKind: the listing the reconciler adopts from maps its
// failures the same way.
func TestListBatchesErrorKind(t *testing.T) {
	h := newHarness(t)
	h.fake.FailNext("/v1beta/batches", http.StatusInternalServerError, -1)
	_, _, err := h.f.ListBatches(t.Context(), 10, "")
	if got := fetcherr.KindOf(err); got != fetcherr.Transient {
		t.Errorf("KindOf(%v) = %v, want transient", err, got)
	}
}

// TestListWebhooksMapsStates: the webhook list is read through the genai
// SDK into the reconciler's own type; the adapter decides which of
// Gemini's states mean that nothing is delivered.
func TestListWebhooksMapsStates(t *testing.T) {
	h := newHarness(t)
	states := map[string]bool{ // Gemini's state → Disabled
		fakegemini.WebhookEnabled:                       false,
		fakegemini.WebhookDisabled:                      true,
		fakegemini.WebhookDisabledDueToFailedDeliveries: true,
	}
	ids := map[string]string{} // id → state set
	for state := range states {
		id := h.fake.AddWebhook("hook-"+state, "https://example.com/"+state)
		if !h.fake.SetWebhookState(id, state) {
			t.Fatal("SetWebhookState")
		}
		ids[id] = state
	}
	var got []event.Webhook
	got, err := h.f.ListWebhooks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("listed %+v, want %d webhooks", got, len(ids))
	}
	for _, w := range got {
		state, ok := ids[w.ID]
		if !ok || w.State != state || w.Disabled != states[state] || w.Name != "hook-"+state || w.URI != "https://example.com/"+state {
			t.Errorf("webhook %+v; want state %q, disabled %v", w, state, states[state])
		}
	}
}
