package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// newV1ARig is newHintRig whose verifier also trusts key for v1a.
func newV1ARig(t *testing.T, confirm bool, key *webhooktest.Ed25519Key) *hintRig {
	t.Helper()
	h := &hintRig{fake: fakegemini.New(), rec: &testutil.Recorder{}, logs: &testutil.SyncBuffer{}}
	srv := h.fake.Start(t)
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: srv.URL, HTTPClient: srv.Client(),
		MaxAttempts: 2, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	h.rig = newRigWith(t, func(c *webhook.Config) { c.PublicKeys = []string{key.PublicKey()} }, func(c *ingest.Config) {
		c.Sink = h.rec
		if confirm {
			c.Confirmer = f
		}
	}, logging.New(h.logs, slog.LevelDebug, ""))
	return h
}

func (h *hintRig) deliverV1A(t *testing.T, key *webhooktest.Ed25519Key, id, body string) v1aAnswer {
	t.Helper()
	status, a := h.do(t, request{name: body, method: http.MethodPost, body: []byte(body),
		header: webhooktest.V1AHeaders(id, now, []byte(body), key)})
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
// here) is dropped with nothing stored or published; without a confirmer
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

	if got := h.deliverV1A(t, key, "msg_ghost", forged("batch.failed", "batches/ghost")); got != (v1aAnswer{200, "dropped", "not-confirmed"}) {
		t.Fatalf("replayed foreign delivery: %+v, want 200 dropped not-confirmed", got)
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
