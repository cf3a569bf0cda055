package webhook_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// FuzzParse: the envelope parser never panics, and what it accepts is a
// usable event (a name and a known state), whatever the bytes.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"type":"batch.succeeded","version":"v1","timestamp":"2026-01-22T12:00:00Z","data":{"id":"batch_123456","output_file_uri":"gs://b/r.jsonl"}}`,
		`{"type":"batch.failed","data":{"id":"batches/x","error_code":3,"error_message":"bad"}}`,
		`{"type":"video.generated","data":{"id":"models/veo/operations/x","video_uri":"gs://v","error_code":"INTERNAL"}}`,
		`{"type":"video.generated","data":{"id":"operations/x","error":{"code":3,"message":"m","status":"INVALID_ARGUMENT"}}}`,
		`{"type":"interaction.failed","data":{"id":"i","errors":[{"code":"429","message":"q"}],"error":"s"}}`,
		`{"type":"interaction.requires_action","data":{"id":"v1_abc","user_metadata":{"a":1}},"user_metadata":{"b":[1,2]}}`,
		`{"type":"x.y","data":{}}`, `[]`, `{}`, `{"type":1}`, `{"type":"batch.succeeded","data":{"id":7}}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := webhook.Parse(body, webhook.Verified{ID: "msg", Method: webhook.MethodHMAC})
		if err != nil {
			return
		}
		if ev.Name == "" || !ev.State.Known() || ev.State == lifecycle.Pending {
			t.Fatalf("accepted an unusable event %+v from %q", ev, body)
		}
		if _, err := opname.Normalize(ev.Name, ev.Kind); err == nil && ev.Kind == opname.KindUnknown {
			t.Fatalf("event without a kind hint: %+v", ev)
		}
	})
}

// FuzzSignatureHeader: the webhook-signature parser never panics and never
// accepts a header that does not contain the right signature.
func FuzzSignatureHeader(f *testing.F) {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	now := time.Unix(1767000000, 0)
	body := []byte(`{"type":"batch.succeeded","data":{"id":"batches/x"}}`)
	right := webhooktest.Signature(secret, "msg_1", now, body)
	for _, s := range []string{right, "v1,", "v1a,abc v1,xyz", ",,, ", "v1," + right[3:] + "=", "a.b.c", "eyJhbGciOiJub25lIn0.e30.", " " + right + " "} {
		f.Add(s)
	}
	v, err := webhook.NewVerifier(webhook.Config{Secrets: []string{secret}, Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, sig string) {
		h := webhooktest.Headers("msg_1", now, body, secret)
		h.Set("webhook-signature", sig)
		_, err := v.Verify(t.Context(), h, body)
		if err == nil && !containsToken(sig, right) {
			t.Fatalf("accepted signature header %q", sig)
		}
	})
}

// containsToken is the oracle: the header holds want as one entry, entries
// being separated by SP or HTAB only (the rule TestSignatureSeparators pins).
func containsToken(header, want string) bool {
	for _, f := range strings.FieldsFunc(header, func(r rune) bool { return r == ' ' || r == '\t' }) {
		if f == want {
			return true
		}
	}
	return false
}

// BenchmarkVerifyParseNormalize is the per-event CPU cost of the webhook
// edge: HMAC verification, envelope parsing and name normalization.
func BenchmarkVerifyParseNormalize(b *testing.B) {
	secret := webhooktest.NewSecret()
	now := time.Unix(1767000000, 0)
	body := []byte(`{"type":"batch.succeeded","version":"v1","timestamp":"2026-12-29T09:20:00Z","data":{"id":"batch_123456","output_file_uri":"gs://my-bucket/results.jsonl"}}`)
	h := webhooktest.Headers("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", now, body, secret)
	v, err := webhook.NewVerifier(webhook.Config{Secrets: []string{secret}, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		ver, err := v.Verify(ctx, h, body)
		if err != nil {
			b.Fatal(err)
		}
		ev, err := webhook.Parse(body, ver)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := opname.Normalize(ev.Name, ev.Kind); err != nil {
			b.Fatal(err)
		}
	}
}
