package reconcile_test

import (
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestWebhookDisabledPollsAtMinimumInterval: while Gemini has the project
// webhook disabled, one webhook-disabled alert is raised, the pass summary
// counts it, and a pending operation is polled every BackoffMin however far
// its backoff had grown; once re-enabled, the recovery is logged once and
// the operation is back on its backoff. The webhook list is read at most
// every 10 minutes, through the real genai SDK.
func TestWebhookDisabledPollsAtMinimumInterval(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		w := newStoreWorld(t, s, nil)
		hook := w.fake.AddWebhook("lrosink", "https://example.com/Webhook")
		w.fake.AddWebhook("other", "https://example.com/other")
		w.fake.SetBatch("slow", fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
		w.register("batches/slow")
		start := w.clock.Now()
		const getPath = "/v1beta/batches/slow"

		var checks []time.Duration // when the batch was asked for, since start
		passes := 0
		runUntil := func(until time.Duration, each func(reconcile.Summary)) {
			t.Helper()
			for w.clock.Now().Sub(start) < until {
				before := w.fake.Calls(getPath)
				sum := w.pass()
				passes++
				if w.fake.Calls(getPath) > before {
					checks = append(checks, w.clock.Now().Sub(start))
				}
				each(sum)
				w.clock.Advance(2 * time.Minute)
			}
		}
		intervals := func(from time.Duration) []time.Duration {
			var out []time.Duration
			for i := 1; i < len(checks); i++ {
				if checks[i-1] >= from {
					out = append(out, checks[i]-checks[i-1])
				}
			}
			return out
		}

		// Enabled: backoff grows to an hour.
		runUntil(3*time.Hour, func(sum reconcile.Summary) {
			if sum.WebhooksDisabled != 0 {
				t.Fatalf("webhooks disabled %d while enabled", sum.WebhooksDisabled)
			}
		})
		if iv := intervals(0); len(iv) < 3 || iv[len(iv)-1] != time.Hour {
			t.Fatalf("check intervals while enabled %v, want growing to 1h", iv)
		}
		lastEnabledCheck := checks[len(checks)-1]

		// Disabled by Gemini: alert once, poll every 2 minutes.
		if !w.fake.SetWebhookState(hook, fakegemini.WebhookDisabledDueToFailedDeliveries) {
			t.Fatal("SetWebhookState")
		}
		disabledAt := w.clock.Now().Sub(start)
		seen := false
		runUntil(5*time.Hour, func(sum reconcile.Summary) {
			if sum.WebhooksDisabled == 1 {
				seen = true
			} else if seen || w.clock.Now().Sub(start)-disabledAt >= 10*time.Minute {
				t.Fatalf("at +%v: webhooks disabled %d, want 1", w.clock.Now().Sub(start), sum.WebhooksDisabled)
			}
		})
		if n := w.logs.CountLines(`"alert":"webhook-disabled"`); n != 1 {
			t.Fatalf("%d webhook-disabled alert lines, want 1", n)
		}
		if w.logs.CountLines(`"webhook_id":"`+hook+`"`) == 0 || w.logs.CountLines(`"webhooks_disabled":1`) == 0 {
			t.Fatalf("the alert does not name the webhook, or no pass line counts it:\n%s", w.logs.String())
		}
		// The first check after the disable comes with the next webhook
		// read (within 10 minutes, passes 2 minutes apart) rather than at
		// the hour the backoff had reached; from then on every 2 minutes.
		first := len(checks)
		for i, c := range checks {
			if c >= disabledAt {
				first = i
				break
			}
		}
		if first == len(checks) || checks[first]-disabledAt > 10*time.Minute || checks[first]-lastEnabledCheck >= time.Hour {
			t.Fatalf("disabled at +%v after a check at +%v; checks since %v, want one within 10m", disabledAt, lastEnabledCheck, checks[first-1:])
		}
		iv := intervals(checks[first])
		if len(iv) < 30 {
			t.Fatalf("check intervals while disabled %v, want 2m throughout", iv)
		}
		for _, d := range iv {
			if d != 2*time.Minute {
				t.Fatalf("check intervals while disabled %v, want 2m", iv)
			}
		}

		// Re-enabled: the recovery is logged once, the backoff is back.
		w.fake.SetWebhookState(hook, fakegemini.WebhookEnabled)
		lastDisabledCheck := checks[len(checks)-1]
		runUntil(8*time.Hour, func(reconcile.Summary) {})
		if n := w.logs.CountLines(`"resolved_alert":"webhook-disabled"`); n != 1 {
			t.Fatalf("%d recovery lines, want 1", n)
		}
		if n := w.logs.CountLines(`"alert":"webhook-disabled"`); n != 1 {
			t.Fatalf("%d webhook-disabled alert lines after recovery, want still 1", n)
		}
		iv = intervals(lastDisabledCheck)
		if len(iv) < 2 || iv[len(iv)-1] != time.Hour {
			t.Fatalf("check intervals after re-enabling %v, want back to 1h", iv)
		}
		if lists, want := w.fake.Calls("/v1beta/webhooks"), (passes+4)/5; lists != want {
			t.Fatalf("webhook list read %d times in %d passes 2 minutes apart, want %d (every 10 minutes)", lists, passes, want)
		}
	})
}

// TestWebhookHealthSkippedWithoutAPIKey: without Gemini the health check
// and the polling are skipped, and each says so once, not on every pass.
func TestWebhookHealthSkippedWithoutAPIKey(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		w := newStoreWorld(t, s, func(c *reconcile.Config) { c.Gemini = nil })
		for range 3 {
			w.pass()
			w.clock.Advance(15 * time.Minute)
		}
		if n := w.logs.CountLines(`webhook health is not checked`); n != 1 {
			t.Fatalf("%d skip lines in 3 passes, want 1:\n%s", n, w.logs.String())
		}
		if n := w.logs.CountLines(`pending operations are not polled`); n != 1 {
			t.Fatalf("%d not-polled lines in 3 passes, want 1:\n%s", n, w.logs.String())
		}
		if w.fake.TotalCalls() != 0 {
			t.Fatalf("%d calls to Gemini without a key", w.fake.TotalCalls())
		}
	})
}
