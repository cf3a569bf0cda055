package reconcile_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestGeminiPushbackNarrowsTheWindow: checks Gemini answers 429 (after the
// client's own retries) narrow the pass's window of calls in flight down
// to one, which the pass line reports as its "concurrency"; the next pass,
// unhindered, starts full again and settles everything.
func TestGeminiPushbackNarrowsTheWindow(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 0)
	const n = 6
	for i := range n {
		id := fmt.Sprintf("quota%d", i)
		w.register("batches/" + id)
		w.fake.SetBatch(id, succeeded(id))
		w.fake.FailNext("/v1beta/batches/"+id, http.StatusTooManyRequests, -1)
	}
	w.clock.Advance(2 * time.Minute)
	if s := w.pass(); s.Errors != n || s.Settled != 0 {
		t.Fatalf("summary under pushback %+v, want %d errors", s, n)
	}
	w.fake.ClearFaults()
	w.clock.Advance(time.Hour)
	if s := w.pass(); s.Settled != n {
		t.Fatalf("summary after pushback %+v, want %d settled", s, n)
	}
	var got []int
	for line := range strings.Lines(w.logs.String()) {
		var l struct {
			Message     string `json:"message"`
			Concurrency *int   `json:"concurrency"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Message != "reconcile pass" {
			continue
		}
		if l.Concurrency == nil {
			t.Fatalf("a pass line without concurrency: %s", line)
		}
		got = append(got, *l.Concurrency)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 8 {
		t.Fatalf("pass lines' concurrency %v, want [1 8]: halved to 1 under pushback, full (8) again after", got)
	}
}
