package testutil

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ExitSlack is what a stop-bound test allows past the documented bound
// (app.StopTimeout, counted from SIGTERM) for what comes after the stop's
// own deadline: the last lines written, os.Exit, the kernel reaping the
// process and the test's Wait returning, on a loaded machine under -race.
// Measured at 3–94 ms on a loaded 2-core machine (docs/OPERATIONS.md);
// Cloud Run's kill comes 2 s after the bound.
const ExitSlack = 250 * time.Millisecond

// Answer is how an HTTP request was answered: the status, the JSON body's
// reason and the Retry-After header, or the error that ended it.
type Answer struct {
	Status     int
	Reason     string
	RetryAfter string
	Err        error
}

// PostInHandler posts body to url with h and returns once the server's
// handler has it: "Expect: 100-continue" makes the client send the body only
// when the handler reads it, so the request is observably in flight. The
// answer arrives on the channel.
func PostInHandler(t testing.TB, url string, h http.Header, body []byte) <-chan Answer {
	t.Helper()
	sent := make(chan struct{})
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(sent) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	req.Header.Set("Expect", "100-continue")
	// A transport of its own: an idle keep-alive connection reused from
	// another test would be closed by the server's shutdown, not held.
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{ExpectContinueTimeout: 60 * time.Second}}
	answered := make(chan Answer, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			answered <- Answer{Err: err}
			return
		}
		defer resp.Body.Close()
		var a struct{ Reason string }
		_ = json.NewDecoder(resp.Body).Decode(&a)
		answered <- Answer{Status: resp.StatusCode, Reason: a.Reason, RetryAfter: resp.Header.Get("Retry-After")}
	}()
	select {
	case <-sent: // after the 100 Continue: the handler is reading the body
	case a := <-answered:
		t.Fatalf("POST %s answered before its body was sent: %+v", url, a)
	case <-time.After(30 * time.Second): // bounds a hang
		t.Fatalf("POST %s: the handler never read the body", url)
	}
	return answered
}

// Dribble sends a POST of path to addr with h announcing a body of n bytes
// and returns once the server's handler reads the body (its 100 Continue);
// it then sends one byte every 100 ms, never the last, until the server
// closes the connection or the test ends: a client on a slow link.
func Dribble(t testing.TB, addr, path string, h http.Header, n int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var head bytes.Buffer
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n", path, addr, n)
	for k, vs := range h {
		for _, v := range vs {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
	}
	head.WriteString("\r\n")
	if _, err := c.Write(head.Bytes()); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // bounds a hang
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 100 ") {
		t.Fatalf("POST %s with a slow body: got %q %v, want 100 Continue", path, status, err)
	}
	if blank, err := r.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("POST %s with a slow body: 100 Continue followed by %q %v", path, blank, err)
	}
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for range n - 1 {
			<-tick.C
			if _, err := c.Write([]byte{' '}); err != nil {
				return // closed, by the server or the test
			}
		}
	}()
}

// SIGTERMToExit sends SIGTERM to p and returns the wall time until exited
// is closed (the process has been waited for), failing after 30 s: a bound
// on a hang, far past any stop's.
func SIGTERMToExit(t testing.TB, p *os.Process, exited <-chan struct{}) time.Duration {
	t.Helper()
	start := time.Now()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		return time.Since(start)
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not exit within 30 s of SIGTERM")
		return 0
	}
}
