package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestLargeIntegersInMetadataRoundTrip: metadata registered through
// POST /Register with an integer float64 cannot hold comes back exactly in
// the results message, in `ops show` and on the console; so does metadata
// a webhook carries.
func TestLargeIntegersInMetadataRoundTrip(t *testing.T) {
	bin := build(t, "")
	dir, secret := t.TempDir(), webhooktest.NewSecret()
	p := serve(t, bin, dir, []string{"LROSINK_WEBHOOK_SECRETS=" + secret})
	const big = `1234567890123456789`
	resp, err := http.Post(p.base+"/Register", "application/json",
		strings.NewReader(`{"name":"batches/meta_big","metadata":{"job_id":`+big+`,"ratio":0.1000000000000000055511151231257827}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("register: %d %s", resp.StatusCode, b)
	}
	mustDeliver(t, p.base, secret, "meta_big", "msg_m1", "completed")
	line := <-p.stdout
	if !strings.Contains(line, `"job_id":`+big) || !strings.Contains(line, `"ratio":0.1000000000000000055511151231257827`) {
		t.Errorf("results message does not carry the registered numbers exactly:\n%s", line)
	}
	// Metadata Gemini echoes in a webhook keeps its numbers too.
	wb := []byte(`{"type":"batch.succeeded","version":"v1","timestamp":"` + time.Now().UTC().Format(time.RFC3339Nano) +
		`","data":{"id":"meta_hook"},"user_metadata":{"job_id":` + big + `}}`)
	if code, outcome, err := deliver(t, p.base, secret, "msg_m2", wb); err != nil || code != http.StatusOK || outcome != "completed" {
		t.Fatalf("webhook with metadata: %d %s %v", code, outcome, err)
	}
	if line := <-p.stdout; !strings.Contains(line, `"user_metadata":{"job_id":`+big+`}`) {
		t.Errorf("webhook user_metadata changed in the results message:\n%s", line)
	}
	id, err := opname.DocID("gemini:batches/meta_big")
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(p.base + "/ui/operations/" + url.PathEscape(id))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), big) {
		t.Errorf("console page (%d) lacks %s:\n%s", resp.StatusCode, big, page)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	for _, args := range [][]string{{"ops", "show", "batches/meta_big", "--json"}, {"ops", "show", "batches/meta_big"}} {
		out, errOut, code := runCLI(t, bin, dir, args...)
		if code != 0 || !strings.Contains(out, big) {
			t.Errorf("%v: exit %d, lacks %s:\n%s%s", args, code, big, out, errOut)
		}
	}
}
