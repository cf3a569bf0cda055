package console_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/console"
	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
)

// "Webhook traffic, last hour" is counted in the delivery log: a console
// over the ledger reopened (a restarted serve, whose own in-memory Traffic
// starts empty) shows the deliveries recorded before, and only the hour's.
func TestTrafficSurvivesARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	before, err := sqliteledger.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	hook := func(ago time.Duration, outcome string) deliverylog.Entry {
		return deliverylog.Entry{At: now.Add(-ago), Source: deliverylog.SourceWebhook, DeliveryID: "msg", Outcome: outcome, Answer: 200}
	}
	// In time order, as the Recorder appends them.
	for _, a := range []struct {
		op      string
		entries []deliverylog.Entry
	}{
		{"a", []deliverylog.Entry{hook(2*time.Hour, "completed"), hook(40*time.Minute, "completed"), hook(30*time.Minute, "duplicate")}},
		{"b", []deliverylog.Entry{hook(5*time.Minute, "completed"), {At: now.Add(-time.Minute), Source: deliverylog.SourceReconcile, Outcome: "unchanged"}}},
	} {
		if err := before.AppendDeliveries(t.Context(), a.op, a.entries, deliverylog.Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := before.Close(); err != nil {
		t.Fatal(err)
	}

	after, err := sqliteledger.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = after.Close() })
	srv := newConsole(t, after, func(c *console.Config) {
		c.TrafficLog, c.Traffic = after, deliverylog.NewTraffic(func() time.Time { return now })
	})
	body, _ := get(t, srv.URL+"/ui/health", http.StatusOK)
	for _, want := range []string{
		`<td id="deliveries-total">3 · completed 2 · duplicate 1</td>`,
		`<td id="last-delivery">` + now.Add(-5*time.Minute).Format("2006-01-02 15:04:05Z") + ` (5m ago)</td>`,
		"Rejected (400, 401, 413), this process",
		"Counted in the delivery log",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("health page after a restart lacks %q", want)
		}
	}
	// Without the log, the in-process count of the restarted process is
	// what the page had before: nothing.
	srv = newConsole(t, after, func(c *console.Config) { c.Traffic = deliverylog.NewTraffic(func() time.Time { return now }) })
	if body, _ := get(t, srv.URL+"/ui/health", http.StatusOK); !strings.Contains(body, `<td id="deliveries-total">0</td>`) {
		t.Errorf("the in-process count is not empty after a restart (the test proves nothing)")
	}
}
