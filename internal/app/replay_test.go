package app_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// hintServer is an App behind a real HTTP server that takes v1a deliveries
// signed with a test Ed25519 key (LROSINK_WEBHOOK_PUBLIC_KEYS) and confirms
// them with the genai SDK against the fake Gemini; the App, its verifier
// and the fake share one clock the test moves.
type hintServer struct {
	t      *testing.T
	a      *app.App
	url    string
	key    *webhooktest.Ed25519Key
	fake   *fakegemini.Server
	clk    *testutil.Clock
	stdout *testutil.SyncBuffer
}

func newHintServer(t *testing.T, edit func(*config.Config)) *hintServer {
	t.Helper()
	h := &hintServer{t: t, key: webhooktest.NewEd25519Key(), clk: testutil.NewClock(now), stdout: &testutil.SyncBuffer{}}
	h.fake = fakegemini.New(fakegemini.WithClock(h.clk.Now))
	cfg := testConfig(t, h.fake.Start(t).URL, func(c *config.Config) {
		c.GeminiAPIKey, c.WebhookPublicKeys = fakegemini.DefaultAPIKey, []string{h.key.PublicKey()}
		if edit != nil {
			edit(c)
		}
	})
	h.a = newApp(t, cfg, nil, h.stdout, h.clk.Now)
	srv := httptest.NewServer(h.a.Mux())
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

// answer is what a delivery was answered.
type answer struct {
	Status     int
	RetryAfter string
	Outcome    string `json:"outcome"`
	Reason     string `json:"reason"`
}

func (a answer) String() string {
	return fmt.Sprintf("%d %s/%s (Retry-After %q)", a.Status, a.Outcome, a.Reason, a.RetryAfter)
}

// post sends body with the headers h, exactly as given (a replay sends the
// same ones again).
func (h *hintServer) post(hdr http.Header, body string) answer {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), http.MethodPost, h.url+"/Webhook", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header = hdr.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	a := answer{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	if err := json.Unmarshal(b, &a); err != nil {
		h.t.Fatalf("answer %q: %v", b, err)
	}
	return a
}

// signed is a v1a delivery attempt of msgID signed now.
func (h *hintServer) signed(msgID, body string) http.Header {
	return webhooktest.V1AHeaders(msgID, h.clk.Now(), []byte(body), h.key)
}

func (h *hintServer) messages() []map[string]any { return messages(h.t, h.stdout.String()) }

// deliveryReasons is the operation's delivery log, oldest first, as
// "status reason" per entry.
func (h *hintServer) deliveryReasons(name string) []string {
	h.t.Helper()
	if err := h.a.Deliveries.Recorder.Flush(h.t.Context()); err != nil {
		h.t.Fatal(err)
	}
	entries, err := h.a.DeliveryStore.ListDeliveries(h.t.Context(), docID(h.t, name))
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for i := len(entries) - 1; i >= 0; i-- {
		out = append(out, fmt.Sprintf("%d %s", entries[i].Answer, entries[i].Reason))
	}
	return out
}

func batchEnvelope(typ, id, extra string) string {
	return `{"type":"` + typ + `","version":"v1","timestamp":"2026-12-29T09:20:00Z","data":{"id":"` + id + `"` + extra + `}}`
}

// TestReplaysCostOneGET (issue 47 item 4): an authentic v1a delivery (the
// key is Google's, shared by every project) replayed within the ±5 min
// tolerance is answered from memory: 20 replays cost one Gemini GET,
// publish one message, and each replay is answered 200 with the reason
// answered-from-memory. Other deliveries about the same operation (new
// webhook-ids, bodies varied as a captured JWT's can be) cost nothing
// either; nor do replays of a delivery about an operation Gemini does not
// know (another project's), past the 15 s a 404 is trusted for.
func TestReplaysCostOneGET(t *testing.T) {
	h := newHintServer(t, nil)
	h.fake.SetBatch("ours", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: now.Add(-time.Minute), ResponsesFile: "files/ours-out"})
	body := batchEnvelope("batch.succeeded", "batches/ours", "")
	captured := h.signed("msg_ours", body)
	if a := h.post(captured, body); a.Status != http.StatusOK || a.Outcome != "completed" {
		t.Fatalf("the delivery: %s, want 200 completed", a)
	}
	for i := range 20 {
		h.clk.Advance(14 * time.Second) // 20 × 14 s: inside the tolerance
		if a := h.post(captured, body); a.Status != http.StatusOK || a.Outcome != "duplicate" || a.Reason != "answered-from-memory" {
			t.Fatalf("replay %d: %s, want 200 duplicate/answered-from-memory", i+1, a)
		}
	}
	for i := range 5 {
		varied := batchEnvelope("batch.failed", "batches/ours", fmt.Sprintf(`,"error_message":"forged %d"`, i))
		if a := h.post(h.signed(fmt.Sprintf("msg_varied_%d", i), varied), varied); a.Status != http.StatusOK || a.Reason != "answered-from-memory" {
			t.Fatalf("varied delivery %d: %s, want 200 answered-from-memory", i, a)
		}
	}
	if n, all := h.fake.Calls("/v1beta/batches/ours"), h.fake.TotalCalls(); n != 1 || all != 1 {
		t.Fatalf("Gemini saw %d GETs of the batch (%d requests in all), want 1", n, all)
	}
	if msgs := h.messages(); len(msgs) != 1 || msgs[0]["state"] != "SUCCEEDED" {
		t.Fatalf("messages %v, want one SUCCEEDED", msgs)
	}

	// Another project's operation: the same captured delivery, replayed.
	foreign := batchEnvelope("batch.succeeded", "batches/theirs", "")
	replayed := h.signed("msg_theirs", foreign)
	for i := range 20 {
		if a := h.post(replayed, foreign); a.Status != http.StatusServiceUnavailable || a.RetryAfter == "" {
			t.Fatalf("foreign replay %d: %s, want 503 with Retry-After (inside the not-found window)", i, a)
		}
		h.clk.Advance(14 * time.Second)
	}
	if n := h.fake.Calls("/v1beta/batches/theirs"); n != 1 {
		t.Fatalf("20 replays of a foreign delivery cost %d GETs, want 1", n)
	}
	if _, err := h.a.Ledger.GetOperation(t.Context(), docID(t, "batches/theirs")); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the foreign operation is in the ledger (err %v)", err)
	}
}

// TestEarlyNotFoundWaits (issue 47 item 5): Gemini answers 404 for a
// genuine interaction for 3 minutes after its first delivery. Its
// redeliveries (Gemini's schedule: at once, 5 s, then minutes) are answered
// 503 with Retry-After, asking Gemini at most once every 15 s, until Gemini
// knows it: then it is applied and published once. Every step is in the
// operation's delivery log.
func TestEarlyNotFoundWaits(t *testing.T) {
	h := newHintServer(t, nil)
	h.fake.SetInteraction("early", fakegemini.InteractionState{Status: "completed", Created: now, Updated: now.Add(time.Second),
		OutputText: "done", NotFoundUntil: now.Add(3 * time.Minute)})
	body := `{"type":"interaction.completed","version":"v1","timestamp":"2026-12-29T09:20:00Z","data":{"id":"early"}}`
	for _, step := range []struct {
		after  time.Duration
		status int
		reason string
		gets   int
	}{
		{0, http.StatusServiceUnavailable, "not-found-yet", 1},
		{5 * time.Second, http.StatusServiceUnavailable, "answered-from-memory", 1},
		{2 * time.Minute, http.StatusServiceUnavailable, "not-found-yet", 2},
		{3 * time.Minute, http.StatusOK, "first-sighting", 3},
	} {
		h.clk.Set(now.Add(step.after))
		a := h.post(h.signed("msg_early", body), body)
		if a.Status != step.status || a.Reason != step.reason || (a.Status == http.StatusServiceUnavailable) != (a.RetryAfter != "") {
			t.Fatalf("at +%v: %s, want %d %s", step.after, a, step.status, step.reason)
		}
		if n := h.fake.Calls("/v1beta/interactions/early"); n != step.gets {
			t.Fatalf("at +%v: Gemini asked %d times, want %d", step.after, n, step.gets)
		}
	}
	msgs := h.messages()
	if len(msgs) != 1 || msgs[0]["state"] != "SUCCEEDED" || msgs[0]["operation"] != "interactions/early" {
		t.Fatalf("messages %v, want exactly one SUCCEEDED for interactions/early", msgs)
	}
	want := []string{"503 not-found-yet", "503 answered-from-memory", "503 not-found-yet", "200 first-sighting"}
	if got := h.deliveryReasons("interactions/early"); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("delivery log %q, want %q", got, want)
	}
}

// TestNotFoundAfterTheWindowIsDropped: an operation Gemini never knows is
// answered 503 for the window after its first delivery (10 minutes), then
// dropped as before: 200 dropped/not-confirmed, nothing stored; a delivery
// within 15 s of that 404 is dropped from memory, with no call.
func TestNotFoundAfterTheWindowIsDropped(t *testing.T) {
	h := newHintServer(t, nil)
	body := batchEnvelope("batch.succeeded", "batches/ghost", "")
	for _, step := range []struct {
		after           time.Duration
		status          int
		outcome, reason string
		gets            int
	}{
		{0, http.StatusServiceUnavailable, "error", "not-found-yet", 1},
		{5 * time.Minute, http.StatusServiceUnavailable, "error", "not-found-yet", 2},
		{9*time.Minute + 30*time.Second, http.StatusServiceUnavailable, "error", "not-found-yet", 3},
		{10 * time.Minute, http.StatusOK, "dropped", "not-confirmed", 4},
		{10*time.Minute + 5*time.Second, http.StatusOK, "dropped", "answered-from-memory", 4},
		{30 * time.Minute, http.StatusOK, "dropped", "not-confirmed", 5},
	} {
		h.clk.Set(now.Add(step.after))
		a := h.post(h.signed("msg_ghost", body), body)
		if a.Status != step.status || a.Outcome != step.outcome || a.Reason != step.reason {
			t.Fatalf("at +%v: %s, want %d %s/%s", step.after, a, step.status, step.outcome, step.reason)
		}
		if n := h.fake.Calls("/v1beta/batches/ghost"); n != step.gets {
			t.Fatalf("at +%v: Gemini asked %d times, want %d", step.after, n, step.gets)
		}
	}
	if _, err := h.a.Ledger.GetOperation(t.Context(), docID(t, "batches/ghost")); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("an operation Gemini does not know was stored (err %v)", err)
	}
	if msgs := h.messages(); len(msgs) != 0 {
		t.Fatalf("messages %v, want none", msgs)
	}
	want := []string{"503 not-found-yet", "503 not-found-yet", "503 not-found-yet", "200 not-confirmed", "200 answered-from-memory", "200 not-confirmed"}
	if got := h.deliveryReasons("batches/ghost"); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("delivery log %q, want %q", got, want)
	}
}

// TestHintWithTheBudgetSpent: hint confirmations draw from the reconciler's
// Gemini budget (LROSINK_GEMINI_QPS). With it spent, a hint is answered 503
// gemini-budget-spent with Retry-After at once, and Gemini is not called:
// no burst, no queue.
func TestHintWithTheBudgetSpent(t *testing.T) {
	h := newHintServer(t, func(c *config.Config) { c.GeminiQPS = 0.001 }) // one request per 1,000 s
	for _, id := range []string{"first", "second"} {
		h.fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: now.Add(-time.Minute), ResponsesFile: "files/" + id})
	}
	first := batchEnvelope("batch.succeeded", "batches/first", "")
	if a := h.post(h.signed("msg_first", first), first); a.Status != http.StatusOK || a.Outcome != "completed" {
		t.Fatalf("first hint: %s, want 200 completed (it takes the budget's one slot)", a)
	}
	second := batchEnvelope("batch.succeeded", "batches/second", "")
	for i := range 3 {
		a := h.post(h.signed(fmt.Sprintf("msg_second_%d", i), second), second)
		if a.Status != http.StatusServiceUnavailable || a.Reason != "gemini-budget-spent" || a.RetryAfter != "30" {
			t.Fatalf("hint %d with the budget spent: %s, want 503 gemini-budget-spent, Retry-After 30", i, a)
		}
	}
	if n, all := h.fake.Calls("/v1beta/batches/second"), h.fake.TotalCalls(); n != 0 || all != 1 {
		t.Fatalf("Gemini saw %d GETs of the second batch, %d requests in all; want 0 and 1", n, all)
	}
	if msgs := h.messages(); len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
}
