package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook"
)

// hintRig is the Webhook function with a real genai-SDK fetcher against the
// fake Gemini as the door's confirmer (or none), a recording sink and logs.
type hintRig struct {
	*rig
	fake *fakegemini.Server
	rec  *testutil.Recorder
	logs *testutil.SyncBuffer
	// clk is the door's and the verifier's clock: moving it past
	// ingest.RecheckEvery makes the door ask Gemini again.
	clk *testutil.Clock
}

func newHintRig(t *testing.T, confirm bool) *hintRig { return newHintRigWith(t, confirm, nil) }

// newHintRigWith is newHintRig with the verifier's configuration edited
// (its clock is the rig's).
func newHintRigWith(t *testing.T, confirm bool, verifierCfg func(*webhook.Config)) *hintRig {
	t.Helper()
	h := &hintRig{fake: fakegemini.New(), rec: &testutil.Recorder{}, logs: &testutil.SyncBuffer{}, clk: testutil.NewClock(now)}
	srv := h.fake.Start(t)
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: srv.URL, HTTPClient: srv.Client(),
		MaxAttempts: 2, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	h.rig = newRigWith(t, func(c *webhook.Config) {
		c.Now = h.clk.Now
		if verifierCfg != nil {
			verifierCfg(c)
		}
	}, func(c *ingest.Config) {
		c.Sink, c.Now = h.rec, h.clk.Now
		if confirm {
			c.Confirmer = f
		}
	}, logging.New(h.logs, slog.LevelDebug, ""))
	return h
}

// deliver posts a JWT-authenticated delivery attempt, its token issued at
// the rig's time (a new attempt, as Gemini's retries are).
func (h *hintRig) deliver(t *testing.T, body string) (int, string, string) {
	t.Helper()
	tok := h.token(t, func(c *jwt.Claims, _ *string) {
		c.IssuedAt, c.Expiry = jwt.NewNumericDate(h.clk.Now()), jwt.NewNumericDate(h.clk.Now().Add(5*time.Minute))
	})
	status, a := h.do(t, request{name: body, method: http.MethodPost, body: []byte(body), header: jwtHeaders(tok)})
	return status, a.Outcome, a.Reason
}

func (h *hintRig) operation(t *testing.T, name string) (ledger.Operation, bool) {
	t.Helper()
	n, err := opname.Normalize(name, opname.KindUnknown)
	if err != nil {
		t.Fatal(err)
	}
	id, err := opname.DocID(n.Key())
	if err != nil {
		t.Fatal(err)
	}
	op, err := h.store.GetOperation(t.Context(), id)
	if errors.Is(err, ledger.ErrNotFound) {
		return op, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return op, true
}

// forged is a delivery body that states a terminal and carries data a
// forger would want in the results message.
func forged(typ, id string) string {
	return fmt.Sprintf(`{"type":%q,"version":"v1","timestamp":"2026-12-29T09:20:00Z","data":{"id":%q,`+
		`"output_file_uri":"gs://forged/out","error_code":13,"error_message":"forged failure"},"user_metadata":{"who":"forger"}}`, typ, id)
}

// TestJWTTerminalIsConfirmedWithGemini: (a) a JWT delivery saying
// batch.failed for a batch Gemini reports RUNNING does not settle it and
// publishes nothing; Gemini's RUNNING is what is applied. Gemini is asked
// at most once per ingest.RecheckEvery: a delivery sooner is answered from
// the door's memory, with no call.
func TestJWTTerminalIsConfirmedWithGemini(t *testing.T) {
	t.Parallel()
	h := newHintRig(t, true)
	upd := now.Add(-time.Minute)
	h.fake.SetBatch("b-run", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: upd})

	for i, want := range []struct {
		after  time.Duration
		reason string
		calls  int
	}{
		{0, "first-sighting", 1},
		{ingest.RecheckEvery - time.Second, "answered-from-memory", 1},
		{ingest.RecheckEvery, "stale-or-equal-update-time", 2},
	} {
		h.clk.Set(now.Add(want.after))
		status, outcome, reason := h.deliver(t, forged("batch.failed", "batches/b-run"))
		if status != http.StatusOK || reason != want.reason {
			t.Fatalf("delivery %d: %d %s %s, want 200 %s", i, status, outcome, reason, want.reason)
		}
		if n := h.fake.Calls("/v1beta/batches/b-run"); n != want.calls {
			t.Fatalf("delivery %d: Gemini was asked %d times, want %d", i, n, want.calls)
		}
	}
	op, ok := h.operation(t, "batches/b-run")
	if !ok || op.State != lifecycle.Running || !op.UpdateTime.Equal(upd) {
		t.Fatalf("operation %+v (found %v), want RUNNING at Gemini's update time", op, ok)
	}
	if op.Error != nil || op.Output != nil || op.UserMetadata != nil || !op.SettledAt.IsZero() {
		t.Fatalf("the delivered body leaked into the operation: %+v", op)
	}
	if got := h.rec.All(); len(got) != 0 {
		t.Fatalf("published %d message(s) for a forged FAILED", len(got))
	}
	if len(op.History) == 0 || !strings.Contains(op.History[0].Reason, "confirmed-by-gemini") || op.History[0].Source != "webhook" {
		t.Fatalf("history does not show the confirmation: %+v", op.History)
	}
	if n := h.logs.CountLines(`"confirmed_by":"gemini"`); n != 3 {
		t.Fatalf("%d ingest decisions say confirmed_by gemini, want 3:\n%s", n, h.logs)
	}
	if n := h.logs.CountLines(`"recalled":"state"`); n != 1 {
		t.Fatalf("%d ingest decisions say recalled state, want 1:\n%s", n, h.logs)
	}
}

// TestJWTSucceededSettlesWithGeminiData: (b) a JWT batch.succeeded for a
// batch Gemini reports SUCCEEDED settles it once, with Gemini's data and
// none of the body's.
func TestJWTSucceededSettlesWithGeminiData(t *testing.T) {
	t.Parallel()
	h := newHintRig(t, true)
	upd := now.Add(-time.Minute)
	h.fake.SetBatch("b-ok", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: upd, ResponsesFile: "files/real-out"})

	want := []string{"completed", "duplicate"}
	for i, w := range want {
		status, outcome, reason := h.deliver(t, forged("batch.succeeded", "batches/b-ok"))
		if status != http.StatusOK || outcome != w {
			t.Fatalf("delivery %d: %d %s %s, want 200 %s", i, status, outcome, reason, w)
		}
	}
	msgs := h.rec.All()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.State != string(lifecycle.Succeeded) || !m.UpdateTime.Equal(upd) || m.SettledBy != "webhook" {
		t.Fatalf("message %+v, want SUCCEEDED at Gemini's update time, settled by webhook", m)
	}
	if m.Output["responses_file"] != "files/real-out" || m.Output["output_file_uri"] != nil || m.Error != nil || m.UserMetadata["who"] != nil {
		t.Fatalf("message data is not Gemini's: output %v error %v metadata %v", m.Output, m.Error, m.UserMetadata)
	}
}

// TestJWTTerminalGeminiNotFound: (c) Gemini answers 404 for an operation
// the ledger does not know: nothing is stored, and inside
// ingest.NotFoundWindow the answer is 503 not-found-yet (Gemini may not
// know its own operation yet; its redelivery asks again), a redelivery
// sooner than ingest.RecheckEvery answered from memory with no call.
// After the window it is dropped (internal/app's
// TestNotFoundAfterTheWindowIsDropped).
func TestJWTTerminalGeminiNotFound(t *testing.T) {
	t.Parallel()
	h := newHintRig(t, true)
	for i, want := range []string{"not-found-yet", "answered-from-memory"} {
		status, outcome, reason := h.deliver(t, forged("batch.failed", "batches/ghost"))
		if status != http.StatusServiceUnavailable || outcome != "error" || reason != want {
			t.Fatalf("delivery %d: %d %s %s, want 503 error %s", i, status, outcome, reason, want)
		}
	}
	if _, ok := h.operation(t, "batches/ghost"); ok {
		t.Fatal("an operation Gemini does not know was stored")
	}
	if _, w, _ := h.store.Counts().Snapshot(); w != 0 || len(h.rec.All()) != 0 {
		t.Fatalf("%d writes, %d messages", w, len(h.rec.All()))
	}
	if h.fake.Calls("/v1beta/batches/ghost") != 1 {
		t.Fatalf("Gemini calls %d, want 1", h.fake.Calls("/v1beta/batches/ghost"))
	}
	if n := h.logs.CountLines(`"severity":"ERROR"`); n != 0 {
		t.Fatalf("%d ERROR lines for a 404 Gemini's redelivery settles, want none:\n%s", n, h.logs)
	}
}

// TestJWTTerminalGeminiUnavailable: (d) a transient Gemini failure answers
// 503 with Retry-After (checked by rig.do) and stores nothing; so does an
// error that is not transient (here 403, a bad key), with its own reason;
// a delivery sooner than ingest.RecheckEvery after either is answered so
// from memory, with no call; once Gemini answers, the redelivery settles.
func TestJWTTerminalGeminiUnavailable(t *testing.T) {
	t.Parallel()
	h := newHintRig(t, true)
	h.fake.SetBatch("b-busy", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: now.Add(-time.Minute)})
	h.fake.FailNext("/v1beta/batches/b-busy", http.StatusServiceUnavailable, -1)
	status, outcome, reason := h.deliver(t, forged("batch.succeeded", "batches/b-busy"))
	if status != http.StatusServiceUnavailable || reason != "gemini-unavailable" {
		t.Fatalf("transient: %d %s %s, want 503 gemini-unavailable", status, outcome, reason)
	}
	calls := h.fake.Calls("/v1beta/batches/b-busy")
	if status, outcome, reason = h.deliver(t, forged("batch.succeeded", "batches/b-busy")); status != http.StatusServiceUnavailable ||
		reason != "answered-from-memory" || h.fake.Calls("/v1beta/batches/b-busy") != calls {
		t.Fatalf("again at once: %d %s %s, %d calls (was %d); want 503 answered-from-memory, no call", status, outcome, reason,
			h.fake.Calls("/v1beta/batches/b-busy"), calls)
	}
	h.fake.ClearFaults()
	h.fake.FailNext("/v1beta/batches/b-busy", http.StatusForbidden, 1)
	h.clk.Advance(ingest.RecheckEvery)
	status, outcome, reason = h.deliver(t, forged("batch.succeeded", "batches/b-busy"))
	if status != http.StatusServiceUnavailable || reason != "gemini-error" {
		t.Fatalf("permanent: %d %s %s, want 503 gemini-error", status, outcome, reason)
	}
	if _, ok := h.operation(t, "batches/b-busy"); ok || len(h.rec.All()) != 0 {
		t.Fatal("an unconfirmed terminal was stored or published")
	}
	h.clk.Advance(ingest.RecheckEvery)
	status, outcome, reason = h.deliver(t, forged("batch.succeeded", "batches/b-busy"))
	if status != http.StatusOK || outcome != "completed" || len(h.rec.All()) != 1 {
		t.Fatalf("after recovery: %d %s %s, %d messages", status, outcome, reason, len(h.rec.All()))
	}
}

// TestHMACDeliveriesAreNotConfirmed: (e) HMAC-signed deliveries keep their
// path: applied as delivered, and Gemini is never asked.
func TestHMACDeliveriesAreNotConfirmed(t *testing.T) {
	t.Parallel()
	h := newHintRig(t, true)
	body := []byte(forged("batch.failed", "batches/h1"))
	status, a := h.do(t, request{name: "hmac", method: http.MethodPost, body: body, header: hmacHeaders(h.secret, "msg_h1", now, body)})
	if status != http.StatusOK || a.Outcome != "completed" {
		t.Fatalf("HMAC delivery: %d %+v", status, a)
	}
	msgs := h.rec.All()
	if len(msgs) != 1 || msgs[0].State != string(lifecycle.Failed) || msgs[0].Error == nil || msgs[0].Error.Code != 13 ||
		msgs[0].UserMetadata["who"] != "forger" {
		t.Fatalf("HMAC delivery not applied as delivered: %+v", msgs)
	}
	if n := h.fake.TotalCalls(); n != 0 {
		t.Fatalf("Gemini saw %d requests for an HMAC delivery, want 0", n)
	}
}

// TestJWTNonTerminalHint: a non-terminal JWT delivery about a registered
// operation applies its state without asking Gemini, but none of the body's
// data (nor its time). About an unknown operation it is confirmed
// (TestNonTerminalHintAboutAnUnknownOperation).
func TestJWTNonTerminalHint(t *testing.T) {
	t.Parallel()
	h := newHintRig(t, true)
	newPeers(t, h).register(t, "interactions/i1")
	body := `{"type":"interaction.requires_action","data":{"id":"interactions/i1"},"user_metadata":{"who":"forger"}}`
	if status, outcome, reason := h.deliver(t, body); status != http.StatusOK || outcome != "applied" {
		t.Fatalf("%d %s %s", status, outcome, reason)
	}
	op, ok := h.operation(t, "interactions/i1")
	if !ok || op.State != lifecycle.RequiresAction || op.UserMetadata != nil {
		t.Fatalf("operation %+v (found %v), want REQUIRES_ACTION without the body's metadata", op, ok)
	}
	if n := h.fake.TotalCalls(); n != 0 {
		t.Fatalf("Gemini saw %d requests for a non-terminal hint", n)
	}
}

// TestJWTTerminalWithoutConfirmer: with no Gemini API key the terminal is
// not applied; a first sighting is recorded PENDING (so a reconciler with a
// key checks it), and the answer says why.
func TestJWTTerminalWithoutConfirmer(t *testing.T) {
	t.Parallel()
	h := newHintRig(t, false)
	for i := range 2 {
		status, outcome, reason := h.deliver(t, forged("batch.failed", "batches/nokey"))
		if status != http.StatusOK || outcome != "unconfirmed" || reason != "no-gemini-api-key" {
			t.Fatalf("delivery %d: %d %s %s, want 200 unconfirmed no-gemini-api-key", i, status, outcome, reason)
		}
	}
	op, ok := h.operation(t, "batches/nokey")
	if !ok || op.State != lifecycle.Pending || op.Error != nil || op.UserMetadata != nil || op.NextCheckAt.IsZero() {
		t.Fatalf("operation %+v (found %v), want PENDING, due for a check, without the body's data", op, ok)
	}
	if len(h.rec.All()) != 0 {
		t.Fatal("published without confirmation")
	}
	if n := h.logs.CountLines(`"severity":"WARNING"`); n < 2 || h.logs.CountLines("GEMINI_API_KEY") < 2 {
		t.Fatalf("want a WARNING naming GEMINI_API_KEY per unconfirmed delivery:\n%s", h.logs)
	}
}

// TestJWTClaimNamesLoggedOnce: (f) the token's claim names are logged once
// for two deliveries, never their values.
func TestJWTClaimNamesLoggedOnce(t *testing.T) {
	t.Parallel()
	h := newHintRig(t, true)
	h.fake.SetInteraction("i2", fakegemini.InteractionState{Status: "requires_action", Updated: now.Add(-time.Minute)})
	for i := range 2 {
		tok := h.token(t, func(c *jwt.Claims, _ *string) { c.Subject = "subject-value-" + fmt.Sprint(i) })
		body := []byte(`{"type":"interaction.requires_action","data":{"id":"interactions/i2"}}`)
		if status, a := h.do(t, request{name: "jwt", method: http.MethodPost, body: body, header: jwtHeaders(tok)}); status != http.StatusOK {
			t.Fatalf("delivery %d: %d %+v", i, status, a)
		}
	}
	if n := h.logs.CountLines("jwt claim names"); n != 1 {
		t.Fatalf("%d claim-name lines, want 1:\n%s", n, h.logs)
	}
	var line string
	for _, l := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(l, "jwt claim names") {
			line = l
		}
	}
	for _, name := range []string{`"aud"`, `"exp"`, `"iat"`, `"jti"`, `"sub"`} {
		if !strings.Contains(line, name) {
			t.Errorf("claim name %s missing: %s", name, line)
		}
	}
	for _, value := range []string{"hook.example", "tok-1", "subject-value", fmt.Sprint(now.Unix())} {
		if strings.Contains(line, value) {
			t.Errorf("claim value %q logged: %s", value, line)
		}
	}
}
