package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/testutil"
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
