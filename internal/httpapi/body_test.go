package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// rawAnswer is what a server answered to a request written by hand.
type rawAnswer struct {
	status int
	header http.Header
	a      httpapi.Answer
}

// sendRaw writes raw, a request the Go client would refuse to send
// (broken chunked framing), to srv on a connection of its own and reads
// the answer.
func sendRaw(t *testing.T, srv *httptest.Server, raw string) rawAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	return readRawAnswer(t, conn)
}

// readRawAnswer reads one answer from conn. The read deadline only bounds
// the wait, so that a server that never answers fails the test instead of
// hanging it; it is not a timing assertion.
func readRawAnswer(t *testing.T, conn net.Conn) rawAnswer {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	got := rawAnswer{status: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(raw, &got.a); err != nil {
		t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, raw)
	}
	return got
}

// bodyRig is a Webhook function over a real door and memory ledger, its
// log lines and its delivery log's traffic kept for the test.
type bodyRig struct {
	srv     *httptest.Server
	store   *memledger.Store
	logs    *testutil.SyncBuffer
	traffic *deliverylog.Traffic
	secret  string
}

func newBodyRig(t *testing.T, maxBody int64, opts ...httpapi.WebhookOption) *bodyRig {
	t.Helper()
	clock := func() time.Time { return now }
	r := &bodyRig{store: testutil.MemLedger(t), logs: &testutil.SyncBuffer{}, traffic: deliverylog.NewTraffic(clock),
		secret: webhooktest.NewSecret()}
	log := logging.New(r.logs, slog.LevelDebug, "")
	door, err := ingest.New(ingest.Config{Store: claims.New(r.store), Sink: &testutil.Recorder{}, Log: log, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	v, err := webhook.NewVerifier(webhook.Config{Secrets: []string{r.secret}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, httpapi.WithDeliveryLog(&deliverylog.Log{Traffic: r.traffic}, clock))
	r.srv = httptest.NewServer(httpapi.Webhook(door, v, log, maxBody, opts...))
	t.Cleanup(r.srv.Close)
	return r
}

// rejections are the delivery log's rejected deliveries, as "status
// reason" by webhook-id. The delivery log is told after the answer: it
// first waits for every handler, closing the server.
func (r *bodyRig) rejections() map[string]string {
	r.srv.Close()
	got := map[string]string{}
	for _, x := range r.traffic.LastHour().Recent {
		got[x.DeliveryID] = fmt.Sprintf("%d %s", x.Status, x.Reason)
	}
	return got
}

// partialBody is the head of a signed POST whose Content-Length promises
// far more body than is ever sent: the first bytes of an envelope.
func (r *bodyRig) partialBody(id string) string {
	body := envelope("batch.succeeded", "batches/partial")
	var b strings.Builder
	b.WriteString("POST / HTTP/1.1\r\nHost: lrosink\r\nContent-Type: application/json\r\n")
	fmt.Fprintf(&b, "Content-Length: %d\r\n", 16<<10)
	for k, vs := range hmacHeaders(r.secret, id, now, body) {
		fmt.Fprintf(&b, "%s: %s\r\n", k, vs[0])
	}
	b.WriteString("\r\n")
	b.Write(body[:10])
	return b.String()
}

// brokenChunks is a POST whose chunked framing is broken ("zz" is no chunk
// size): the server cannot read its body. body is put in the one chunk.
func brokenChunks(deliveryID, body string) string {
	return "POST / HTTP/1.1\r\nHost: lrosink\r\nwebhook-id: " + deliveryID +
		"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + body + "\r\n0\r\n\r\n"
}

// TestUnreadableBodyIsExplained: a body the server cannot read is answered
// 400 unreadable-body with a detail, as every 400 is (CONTRACT.md §3), by
// the Webhook and Register functions alike; the detail never quotes the
// body.
func TestUnreadableBodyIsExplained(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	_, register := registerServer(t, testutil.MemLedger(t))
	const body = `{"name":"batches/secret-looking-body"}`
	for name, srv := range map[string]*httptest.Server{"webhook": r.srv, "register": register} {
		got := sendRaw(t, srv, brokenChunks("msg_unreadable", body))
		if got.status != http.StatusBadRequest || got.a.Reason != "unreadable-body" || got.a.Outcome != "rejected" {
			t.Errorf("%s: %d %+v, want 400 rejected unreadable-body", name, got.status, got.a)
		}
		if got.a.Detail == "" || strings.Contains(got.a.Detail, "secret-looking-body") {
			t.Errorf("%s: detail %q: want words saying what is wrong, never the body", name, got.a.Detail)
		}
	}
}

// TestEveryWebhookAnswerIsLogged: the answers given before the body is
// verified (405, 413, 400 unreadable-body) are logged as every other is,
// one "webhook answer" line with status, reason and webhook-id; a 405
// keeps its Allow header. Deliveries refused before they were trusted,
// 413 included (a real delivery over LROSINK_MAX_BODY that Gemini retries
// for 24 h, then loses), reach the delivery log's rejections (the Health
// page, lrosink_webhook_rejections_total); a 405 is no delivery and does
// not.
func TestEveryWebhookAnswerIsLogged(t *testing.T) {
	t.Parallel()
	const maxBody = 1024
	r := newBodyRig(t, maxBody)
	srv, logs, secret := r.srv, r.logs, r.secret

	big := bytes.Repeat([]byte("a"), 2*maxBody)
	post := func(id string, method string, body io.Reader) *http.Response {
		req, err := http.NewRequest(method, srv.URL, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = webhooktest.Headers(id, now, big, secret)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	for _, c := range []struct {
		id     string
		status int
		reason string
		send   func(id string) int
	}{
		{"msg_big", 413, "body-too-large", func(id string) int { return post(id, http.MethodPost, bytes.NewReader(big)).StatusCode }},
		// Unknown length: cut by the reader's bound, not Content-Length.
		{"msg_big_chunked", 413, "body-too-large", func(id string) int {
			return post(id, http.MethodPost, io.MultiReader(bytes.NewReader(big))).StatusCode
		}},
		{"msg_unreadable", 400, "unreadable-body", func(id string) int { return sendRaw(t, srv, brokenChunks(id, "{}")).status }},
		{"msg_forged", 401, "no-matching-signature", func(id string) int { return post(id, http.MethodPost, strings.NewReader("{}")).StatusCode }},
		{"msg_get", 405, "method-not-allowed", func(id string) int {
			resp := post(id, http.MethodGet, nil)
			if got := resp.Header.Get("Allow"); got != http.MethodPost {
				t.Errorf("405 with Allow %q, want POST", got)
			}
			return resp.StatusCode
		}},
	} {
		if got := c.send(c.id); got != c.status {
			t.Errorf("%s: answered %d, want %d", c.id, got, c.status)
		}
		if n := countLines(logs.String(), `"message":"webhook answer"`, `"severity":"WARNING"`, fmt.Sprintf(`"status":%d`, c.status),
			`"reason":"`+c.reason+`"`, `"delivery_id":"`+c.id+`"`); n != 1 {
			t.Errorf("%s: %d webhook answer lines with status %d, reason %s, want 1:\n%s", c.id, n, c.status, c.reason, logs)
		}
	}
	got := r.rejections()
	want := map[string]string{"msg_big": "413 body-too-large", "msg_big_chunked": "413 body-too-large",
		"msg_unreadable": "400 unreadable-body", "msg_forged": "401 no-matching-signature"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rejections in the delivery log: %v, want %v", got, want)
	}
	if strings.Contains(logs.String(), string(big[:64])) {
		t.Error("a refused body was logged")
	}
}

// TestSlowBodyIsCutByTheDeadline: the webhook deadline bounds the body's
// arrival too (the servers set no ReadTimeout). A sender that sends its
// headers and then stalls, or trickles its body, is answered 503
// deadline-exceeded with Retry-After, a retryable answer (a slow but real
// sender must not get a 4xx it would not retry), and holds no handler
// beyond the deadline. Nothing reaches the door.
func TestSlowBodyIsCutByTheDeadline(t *testing.T) {
	t.Parallel()
	r := newBodyRig(t, 32<<10, httpapi.WithDeadline(200*time.Millisecond))
	for _, c := range []struct {
		name string
		// send writes more of the body to conn until stop is closed or
		// the server hangs up.
		send func(conn net.Conn, stop <-chan struct{})
	}{
		{"stalls", func(net.Conn, <-chan struct{}) {}},
		{"trickles", func(conn net.Conn, stop <-chan struct{}) {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := conn.Write([]byte{' '}); err != nil {
					return
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", r.srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			id := "msg_" + c.name
			if _, err := io.WriteString(conn, r.partialBody(id)); err != nil {
				t.Fatal(err)
			}
			stop, sent := make(chan struct{}), make(chan struct{})
			go func() { defer close(sent); c.send(conn, stop) }()
			got := readRawAnswer(t, conn)
			close(stop)
			<-sent
			if got.status != http.StatusServiceUnavailable || got.a.Reason != "deadline-exceeded" || got.a.Outcome != "error" ||
				got.header.Get("Retry-After") == "" {
				t.Fatalf("%d %+v Retry-After %q, want 503 deadline-exceeded with Retry-After", got.status, got.a, got.header.Get("Retry-After"))
			}
			if n := countLines(r.logs.String(), `"message":"webhook answer"`, `"status":503`, `"reason":"deadline-exceeded"`,
				`"delivery_id":"`+id+`"`, `"detail":"body not received within`); n != 1 {
				t.Errorf("%d webhook answer lines saying the body did not arrive in time, want 1:\n%s", n, r.logs)
			}
		})
	}
	if ops, err := r.store.ListOperations(t.Context(), "", 10); err != nil || len(ops) != 0 {
		t.Fatalf("a body that never arrived reached the ledger: %d operations (%v)", len(ops), err)
	}
}

// TestSenderGoneMidBody: a sender that stops sending before its body is
// complete (here it half-closes its connection, so that the answer can
// still be read) is sender-gone, as one that hangs up while the door works:
// logged at WARNING, not a 400 unreadable-body counted among the
// rejections, which are refusals of what a sender did send.
func TestSenderGoneMidBody(t *testing.T) {
	t.Parallel()
	r := newBodyRig(t, 32<<10)
	conn, err := net.Dial("tcp", r.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, r.partialBody("msg_half")); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got := readRawAnswer(t, conn)
	if got.status != 499 || got.a.Reason != "sender-gone" {
		t.Errorf("%d %+v, want 499 sender-gone", got.status, got.a)
	}
	if n := countLines(r.logs.String(), `"message":"webhook answer"`, `"severity":"WARNING"`, `"status":499`,
		`"reason":"sender-gone"`, `"delivery_id":"msg_half"`); n != 1 {
		t.Errorf("%d WARNING webhook answer lines 499 sender-gone, want 1:\n%s", n, r.logs)
	}
	if got := r.rejections(); len(got) != 0 {
		t.Errorf("counted as rejections: %v", got)
	}
}
