package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// newV1ARig is newHintRig whose verifier also trusts key for v1a.
func newV1ARig(t *testing.T, confirm bool, key *webhooktest.Ed25519Key) *hintRig {
	t.Helper()
	return newHintRigWith(t, confirm, func(c *webhook.Config) { c.PublicKeys = []string{key.PublicKey()} })
}

func (h *hintRig) deliverV1A(t *testing.T, key *webhooktest.Ed25519Key, id, body string) v1aAnswer {
	t.Helper()
	status, a := h.do(t, request{name: body, method: http.MethodPost, body: []byte(body),
		header: webhooktest.V1AHeaders(id, h.clk.Now(), []byte(body), key)})
	return v1aAnswer{status, a.Outcome, a.Reason}
}

// countLines counts the lines of logs holding every one of subs.
func countLines(logs string, subs ...string) int {
	n := 0
	for _, l := range strings.Split(logs, "\n") {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(l, s)
		}
		if all {
			n++
		}
	}
	return n
}

type v1aAnswer struct {
	status          int
	outcome, reason string
}

// TestV1ADeliveriesAreHints: a v1a delivery is authentic from Google but
// the key is shared by every Gemini project, so it takes the JWT hint path:
// its terminal is confirmed with Gemini and Gemini's data is what is
// applied; an operation Gemini does not know (another project's, replayed
// here) stores and publishes nothing; without a confirmer
// nothing terminal is applied. The answer's log line says auth v1a.
func TestV1ADeliveriesAreHints(t *testing.T) {
	t.Parallel()
	key := webhooktest.NewEd25519Key()
	h := newV1ARig(t, true, key)
	upd := now.Add(-time.Minute)
	h.fake.SetBatch("b-ok", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: upd, ResponsesFile: "files/real-out"})

	for i, want := range []string{"completed", "duplicate"} {
		if got := h.deliverV1A(t, key, "msg_ok", forged("batch.succeeded", "batches/b-ok")); got.status != http.StatusOK || got.outcome != want {
			t.Fatalf("delivery %d: %+v, want 200 %s", i, got, want)
		}
	}
	msgs := h.rec.All()
	if len(msgs) != 1 || msgs[0].State != string(lifecycle.Succeeded) || !msgs[0].UpdateTime.Equal(upd) ||
		msgs[0].Output["responses_file"] != "files/real-out" || msgs[0].UserMetadata["who"] != nil {
		t.Fatalf("messages %+v, want one SUCCEEDED with Gemini's data", msgs)
	}

	// Inside ingest.NotFoundWindow a 404 may be Gemini not knowing its own
	// operation yet: 503; after it, dropped (internal/app's
	// TestNotFoundAfterTheWindowIsDropped).
	if got := h.deliverV1A(t, key, "msg_ghost", forged("batch.failed", "batches/ghost")); got != (v1aAnswer{503, "error", "not-found-yet"}) {
		t.Fatalf("replayed foreign delivery: %+v, want 503 error not-found-yet", got)
	}
	if _, ok := h.operation(t, "batches/ghost"); ok {
		t.Fatal("an operation Gemini does not know was stored")
	}
	if len(h.rec.All()) != 1 {
		t.Fatalf("%d messages after the replay, want 1", len(h.rec.All()))
	}
	if n := countLines(h.logs.String(), `"message":"webhook answer"`, `"auth":"v1a"`); n != 3 {
		t.Fatalf("%d webhook answers logged with auth v1a, want 3:\n%s", n, h.logs)
	}

	// An HMAC delivery is ours alone: applied as delivered, logged auth v1.
	body := []byte(forged("batch.failed", "batches/h1"))
	if status, a := h.do(t, request{name: "hmac", method: http.MethodPost, body: body, header: hmacHeaders(h.secret, "msg_h1", now, body)}); status != http.StatusOK || a.Outcome != "completed" {
		t.Fatalf("HMAC delivery: %d %+v", status, a)
	}
	if n := countLines(h.logs.String(), `"message":"webhook answer"`, `"auth":"v1"`); n != 1 {
		t.Fatalf("%d webhook answers logged with auth v1, want 1:\n%s", n, h.logs)
	}

	// A refusal's log line says what was checked, never the signature.
	stranger := webhooktest.NewEd25519Key()
	forgedBody := forged("batch.failed", "batches/b-ok")
	if got := h.deliverV1A(t, stranger, "msg_x", forgedBody); got != (v1aAnswer{401, "rejected", "no-matching-signature"}) {
		t.Fatalf("a key not trusted: %+v", got)
	}
	sig := strings.TrimPrefix(stranger.Signature("msg_x", now, []byte(forgedBody)), "v1a,")
	if n := countLines(h.logs.String(), `"status":401`, `"detail":"webhook: no-matching-signature: 0 v1 signature(s) checked against 1 secret(s), 1 of 1 v1a signature(s) checked"`); n != 1 ||
		strings.Contains(h.logs.String(), sig[:24]) {
		t.Fatalf("refusal log line (found %d) lacks the detail or shows the signature:\n%s", n, h.logs)
	}

	noKey := newV1ARig(t, false, key)
	if got := noKey.deliverV1A(t, key, "msg_nk", forged("batch.failed", "batches/b-nk")); got != (v1aAnswer{200, "unconfirmed", "no-gemini-api-key"}) {
		t.Fatalf("without a confirmer: %+v, want 200 unconfirmed no-gemini-api-key", got)
	}
	if len(noKey.rec.All()) != 0 {
		t.Fatal("an unconfirmed v1a terminal was published")
	}
}
