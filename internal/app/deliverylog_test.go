package app_test

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// hookServer is an App behind a real HTTP server, with a signing secret.
type hookServer struct {
	t      *testing.T
	a      *app.App
	url    string
	secret string
	clk    *testutil.Clock
}

func newHookServer(t *testing.T, withKey bool) *hookServer {
	t.Helper()
	clk := testutil.NewClock(now)
	fake := fakegemini.New(fakegemini.WithClock(clk.Now))
	secret := webhooktest.NewSecret()
	cfg := testConfig(t, fake.Start(t).URL, func(c *config.Config) {
		c.WebhookSecrets = []string{secret}
		if withKey {
			c.GeminiAPIKey = fakegemini.DefaultAPIKey
		}
	})
	a := newApp(t, cfg, nil, io.Discard, clk.Now)
	srv := httptest.NewServer(a.Mux())
	t.Cleanup(srv.Close)
	return &hookServer{t: t, a: a, url: srv.URL, secret: secret, clk: clk}
}

// deliver sends one signed webhook delivery and returns the answer's status.
func (h *hookServer) deliver(id, body, secret string) int {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+"/Webhook", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header = webhooktest.Headers(id, h.clk.Now(), []byte(body), secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func (h *hookServer) get(path string) (int, string) {
	h.t.Helper()
	resp, err := http.Get(h.url + path)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func (h *hookServer) post(path, body string) string {
	h.t.Helper()
	resp, err := http.Post(h.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		h.t.Fatalf("%s answered %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// flush waits until the delivery log holds every delivery answered so far.
func (h *hookServer) flush() {
	h.t.Helper()
	if err := h.a.Deliveries.Recorder.Flush(h.t.Context()); err != nil {
		h.t.Fatal(err)
	}
}

func docID(t *testing.T, name string) string {
	t.Helper()
	n, err := opname.Normalize(name, opname.KindUnknown)
	if err != nil {
		t.Fatal(err)
	}
	id, err := opname.DocID(n.Key())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestDeliveryTimelineShowsDroppedDeliveries: a completion, a duplicate of
// it and a late interaction.requires_action each appear in the operation's
// delivery timeline on its console page, with their outcome, reason,
// webhook-id and answer; a badly signed delivery appears only on the
// Health page, with its webhook-id and reason.
func TestDeliveryTimelineShowsDroppedDeliveries(t *testing.T) {
	h := newHookServer(t, false)
	const name = "interactions/tl1"
	done := `{"type":"interaction.completed","version":"v1","data":{"id":"` + name + `"}}`
	late := `{"type":"interaction.requires_action","version":"v1","data":{"id":"` + name + `"}}`
	for _, d := range []struct{ id, body string }{{"msg_done", done}, {"msg_dup", done}, {"msg_late", late}} {
		if code := h.deliver(d.id, d.body, h.secret); code != http.StatusOK {
			t.Fatalf("%s answered %d", d.id, code)
		}
	}
	if code := h.deliver("msg_forged", done, webhooktest.NewSecret()); code != http.StatusUnauthorized {
		t.Fatalf("badly signed delivery answered %d", code)
	}
	h.flush()

	code, page := h.get("/ui/operations/" + url.PathEscape(docID(t, name)))
	if code != http.StatusOK {
		t.Fatalf("operation page answered %d", code)
	}
	table := section(t, page, `<table class="ops cards" id="deliveries">`, `</table>`)
	rows := strings.Split(table, "<tr")[2:] // header row first
	if len(rows) != 3 {
		t.Fatalf("%d delivery rows, want 3:\n%s", len(rows), table)
	}
	// Newest first.
	for i, want := range [][]string{
		{"msg_late", "interaction.requires_action", "v1", "dropped", "regress-from-terminal", "200"},
		{"msg_dup", "interaction.completed", "v1", "duplicate", "200"},
		{"msg_done", "interaction.completed", "v1", "completed", "200"},
	} {
		for _, w := range want {
			if !strings.Contains(rows[i], ">"+w+"<") {
				t.Errorf("delivery row %d lacks %q:\n%s", i, w, rows[i])
			}
		}
	}
	if strings.Contains(page, "msg_forged") {
		t.Error("a delivery refused before verification is on the operation's page")
	}

	_, health := h.get("/ui/health")
	traffic := section(t, health, `id="traffic"`, `</table>`)
	for _, w := range []string{"3", "completed 1", "duplicate 1", "dropped 1", "no-matching-signature 1"} {
		if !strings.Contains(html.UnescapeString(traffic), w) {
			t.Errorf("health traffic lacks %q:\n%s", w, traffic)
		}
	}
	rejected := section(t, health, `id="rejected"`, `</table>`)
	if !strings.Contains(rejected, "msg_forged") || !strings.Contains(rejected, "no-matching-signature") || !strings.Contains(rejected, "401") {
		t.Errorf("last rejected deliveries lack msg_forged/no-matching-signature/401:\n%s", rejected)
	}
	if strings.Contains(rejected, "interactions/") {
		t.Errorf("a rejected delivery's (unverified) body is shown:\n%s", rejected)
	}
	fams := scrape(t, h.url+"/metrics")
	if got := sum(t, fams, "lrosink_webhook_rejections_total", map[string]string{"reason": "no-matching-signature"}); got != 1 {
		t.Errorf("lrosink_webhook_rejections_total{reason=no-matching-signature} = %v, want 1", got)
	}
}

// section returns page from the first start to the next end after it.
func section(t *testing.T, page, start, end string) string {
	t.Helper()
	i := strings.Index(page, start)
	if i < 0 {
		t.Fatalf("page lacks %q:\n%s", start, page)
	}
	j := strings.Index(page[i:], end)
	if j < 0 {
		t.Fatalf("page lacks %q after %q", end, start)
	}
	return page[i : i+j]
}

// TestDeliveryFloodStaysBounded: 1,000 duplicates of one delivery keep the
// operation's delivery log at its bound, the newest entries.
func TestDeliveryFloodStaysBounded(t *testing.T) {
	h := newHookServer(t, false)
	const name = "batches/flood"
	body := `{"type":"batch.succeeded","version":"v1","data":{"id":"` + name + `"}}`
	if code := h.deliver("msg_first", body, h.secret); code != http.StatusOK {
		t.Fatalf("first delivery answered %d", code)
	}
	for i := range 1000 {
		if code := h.deliver("msg_again", body, h.secret); code != http.StatusOK {
			t.Fatalf("duplicate %d answered %d", i, code)
		}
	}
	h.flush()
	log, err := h.a.DeliveryStore.ListDeliveries(t.Context(), docID(t, name))
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != deliverylog.DefaultKeep {
		t.Fatalf("the log holds %d entries after 1,001 deliveries, want %d", len(log), deliverylog.DefaultKeep)
	}
	for i, e := range log {
		if e.DeliveryID != "msg_again" || e.Outcome != "duplicate" || e.Answer != http.StatusOK {
			t.Fatalf("entry %d = %+v, want a duplicate msg_again answered 200", i, e)
		}
	}
	if d := h.a.Deliveries.Recorder.Dropped(); d != 0 {
		t.Errorf("%d entries dropped from the queue", d)
	}
}

// TestPendingCountsAreTheLedgers: 12 registered pending operations are
// counted 12 by lrosink_operations_pending, the Reconcile answer's
// still_pending and the Health page, with and without GEMINI_API_KEY; once
// their grace has run out, lrosink_operations_due counts them too.
func TestPendingCountsAreTheLedgers(t *testing.T) {
	for _, withKey := range []bool{false, true} {
		t.Run(fmt.Sprintf("gemini_api_key=%v", withKey), func(t *testing.T) {
			h := newHookServer(t, withKey)
			for i := range 12 {
				h.post("/Register", fmt.Sprintf(`{"name":"batches/p%02d","kind":"batch"}`, i))
			}
			// One settled operation that must not count.
			h.deliver("msg_s", `{"type":"batch.succeeded","version":"v1","data":{"id":"batches/settled"}}`, h.secret)

			var sum struct {
				StillPending *int `json:"still_pending"`
			}
			if err := json.Unmarshal([]byte(h.post("/Reconcile", "")), &sum); err != nil || sum.StillPending == nil {
				t.Fatalf("reconcile answer: %v", err)
			}
			if *sum.StillPending != 12 {
				t.Errorf("still_pending = %d, want 12", *sum.StillPending)
			}
			fams := scrape(t, h.url+"/metrics")
			if got := sumOf(t, fams, "lrosink_operations_pending"); got != 12 {
				t.Errorf("lrosink_operations_pending = %v, want 12", got)
			}
			if got := sumOf(t, fams, "lrosink_operations_due"); got != 0 {
				t.Errorf("lrosink_operations_due = %v within the grace, want 0", got)
			}
			_, health := h.get("/ui/health")
			if m := regexp.MustCompile(`<td id="pending">([^<]*)</td>`).FindStringSubmatch(health); m == nil || m[1] != "12" {
				t.Errorf("health page pending = %v, want 12", m)
			}
			if !withKey {
				h.clk.Advance(2 * time.Minute) // past LROSINK_GRACE (1m in testConfig)
				if got := sumOf(t, scrape(t, h.url+"/metrics"), "lrosink_operations_due"); got != 12 {
					t.Errorf("lrosink_operations_due = %v after the grace, want 12", got)
				}
			}
		})
	}
}

func sumOf(t *testing.T, fams map[string]*dto.MetricFamily, metric string) float64 {
	t.Helper()
	return sum(t, fams, metric, nil)
}

// TestReconcileChecksAreLogged: a reconcile check is in the operation's
// delivery log (source reconcile, Gemini's status, outcome) by the time the
// pass has answered, without waiting for the writer.
func TestReconcileChecksAreLogged(t *testing.T) {
	clk := testutil.NewClock(now)
	fake := fakegemini.New(fakegemini.WithClock(clk.Now))
	fake.SetBatch("rc1", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: now})
	cfg := testConfig(t, fake.Start(t).URL, func(c *config.Config) { c.GeminiAPIKey = fakegemini.DefaultAPIKey })
	a := newApp(t, cfg, nil, io.Discard, clk.Now)
	srv := httptest.NewServer(a.Mux())
	t.Cleanup(srv.Close)
	h := &hookServer{t: t, a: a, url: srv.URL, clk: clk}
	h.post("/Register", `{"name":"batches/rc1","kind":"batch"}`)
	clk.Advance(2 * time.Minute)
	h.post("/Reconcile", "")
	log, err := a.DeliveryStore.ListDeliveries(t.Context(), docID(t, "batches/rc1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].Source != deliverylog.SourceReconcile || !strings.Contains(log[0].Status, "RUNNING") ||
		log[0].Outcome != "applied" || log[0].Answer != 0 || log[0].DeliveryID != "" {
		t.Fatalf("delivery log after one check = %+v, want one reconcile entry, RUNNING, applied", log)
	}
}

// TestDeliveryLogTakesTheBatchPath: the store serve's Recorder writes to
// (SQLite, opened as serve opens it) appends a recorder's batch of
// operations in one write transaction, not one per operation, and the
// recorder's drops and the ledger's failed checkpoints are exposed on
// /metrics.
func TestDeliveryLogTakesTheBatchPath(t *testing.T) {
	const n = 300
	h := newHookServer(t, false)
	if _, ok := h.a.DeliveryStore.(deliverylog.BatchStore); !ok {
		t.Fatalf("the delivery store %T appends one operation at a time", h.a.DeliveryStore)
	}
	st, ok := h.a.Ledger.(interface{ Stats() sqliteledger.Stats })
	if !ok {
		t.Fatalf("the ledger %T is not SQLite's", h.a.Ledger)
	}
	var batch []deliverylog.Append
	for i := range n {
		batch = append(batch, deliverylog.Append{OpID: fmt.Sprint("op", i),
			Entries: []deliverylog.Entry{{At: now, Source: deliverylog.SourceWebhook, Outcome: "applied"}}})
	}
	before := st.Stats()
	if lost, err := deliverylog.AppendBatch(t.Context(), h.a.DeliveryStore, batch, deliverylog.Retention{}); err != nil || lost != 0 {
		t.Fatalf("AppendBatch: %d lost, %v", lost, err)
	}
	if tx := st.Stats().Transactions - before.Transactions; tx != 1 {
		t.Errorf("%d operations' appends took %d write transactions, want 1", n, tx)
	}
	if got, err := h.a.DeliveryStore.ListDeliveries(t.Context(), fmt.Sprint("op", n-1)); err != nil || len(got) != 1 {
		t.Errorf("the last operation's log: %+v, %v", got, err)
	}
	fams := scrape(t, h.url+"/metrics")
	if got := sumOf(t, fams, "lrosink_delivery_log_dropped_total"); got != 0 {
		t.Errorf("lrosink_delivery_log_dropped_total = %v, want 0", got)
	}
	if got := sumOf(t, fams, "lrosink_sqlite_checkpoint_failures_total"); got != 0 {
		t.Errorf("lrosink_sqlite_checkpoint_failures_total = %v, want 0", got)
	}
}
