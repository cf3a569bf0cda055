package console_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/console"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
)

// The summary line above the list counts the operations by state, the
// stuck ones and the results messages owed, from count aggregations: its
// cost is the same whatever the page shows, and no document is read for it.
func TestSummaryLineCounts(t *testing.T) {
	s := memledger.New()
	c := claims.New(s)
	// Three settled: two published (DONE), one still owed (CLAIMED).
	for i := range 3 {
		op, cl := settled(fmt.Sprintf("s%d", i), now.Add(-time.Duration(i+1)*time.Minute))
		_, lease, err := c.CommitOperation(t.Context(), op, cl)
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if err := c.CompleteClaim(t.Context(), *lease, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One failed, owed too.
	failed, fc := settled("f", now.Add(-time.Hour))
	failed.State = lifecycle.Failed
	commit(t, s, failed, fc)
	// Two pending: one past the 6 h stuck threshold.
	for _, p := range []struct {
		name string
		age  time.Duration
	}{{"batches/young", time.Minute}, {"batches/old", 7 * time.Hour}} {
		op := named(t, p.name)
		op.SubmittedAt = now.Add(-p.age)
		commit(t, s, op, nil)
	}
	srv := newConsole(t, s, func(c *console.Config) { c.PageSize = 2 })
	before := s.Counts().Reads.Load()
	body, _ := get(t, srv.URL+"/ui/", http.StatusOK)
	reads := s.Counts().Reads.Load() - before
	m := regexp.MustCompile(`(?s)<p class="summary" id="summary">(.*?)</p>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no summary line:\n%s", body)
	}
	line := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[1], "")
	if want := "6 operations · PENDING 2 · SUCCEEDED 3 · FAILED 1 · 1 stuck · 2 messages owed"; line != want {
		t.Errorf("summary %q, want %q", line, want)
	}
	if !strings.Contains(m[1], `href="/ui/?state=SUCCEEDED"`) || !strings.Contains(m[1], `href="/ui/?stuck=1"`) || !strings.Contains(m[1], `href="/ui/stuck"`) {
		t.Errorf("the summary's figures do not link to their lists: %s", m[1])
	}
	// The page: 3 operations read (a page of 2 and one to see a next), 1
	// for the total; the summary: one read per aggregation.
	if want := int64(3 + 1 + len(lifecycle.States()) + 2); reads != want {
		t.Errorf("the list page cost %d reads, want %d", reads, want)
	}
	// A search is not the list: no summary.
	if body, _ := get(t, srv.URL+"/ui/?q=batches/o", http.StatusOK); strings.Contains(body, `id="summary"`) {
		t.Errorf("a search page shows the summary line")
	}
}
