package reconcile_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/testutil"
)

// recordIntent writes an unbound intent, recorded at at, into s.
func recordIntent(t *testing.T, s ledger.Ledger, key, kind string, at time.Time) {
	t.Helper()
	in := ledger.Intent{Key: key, Kind: opname.Kind(kind), Model: "models/gemini-2.5-flash", DisplayName: "lrosink-" + key,
		Metadata: map[string]any{"campaign": json.Number("12345678901234567890123"), "secret_plan": "do-not-log"}, CreatedAt: at}
	if _, err := s.Apply(t.Context(), ledger.PutIntent(in)); err != nil {
		t.Fatal(err)
	}
}

func getIntent(t *testing.T, s ledger.Ledger, key string) ledger.Intent {
	t.Helper()
	in, err := s.GetIntent(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestIntentUnboundAlertSchedule (every store): an intent bound to no
// operation is alerted when its grace ends, then 1 h, 6 h, 24 h later and
// every 24 h, as a stuck operation is; never before its grace; the line
// names it (key, kind, model, display name, record time) and none of its
// metadata's values; each pass counts it in intents_unbound; once bound it
// is neither alerted nor counted.
func TestIntentUnboundAlertSchedule(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		w := newStoreWorld(t, s, func(c *reconcile.Config) { c.IntentGrace = time.Hour })
		start := w.clock.Now()
		recordIntent(t, s, "orphan-1", "video", start)
		var alertsAt []time.Duration
		for w.clock.Now().Sub(start) <= 56*time.Hour {
			before := w.logs.CountLines(`"alert":"intent-unbound"`)
			sum := w.pass()
			elapsed := w.clock.Now().Sub(start)
			if n := w.logs.CountLines(`"alert":"intent-unbound"`) - before; n > 0 {
				alertsAt = append(alertsAt, elapsed)
			}
			if want := elapsed >= time.Hour; (sum.IntentsUnbound == 1) != want {
				t.Fatalf("at +%v: intents_unbound %d, want counted=%v", elapsed, sum.IntentsUnbound, want)
			}
			w.clock.Advance(10 * time.Minute)
		}
		want := []time.Duration{time.Hour, 2 * time.Hour, 7 * time.Hour, 25 * time.Hour, 49 * time.Hour}
		if !reflect.DeepEqual(alertsAt, want) {
			t.Fatalf("intent-unbound alerts at %v, want %v", alertsAt, want)
		}
		var line string
		for _, l := range strings.Split(w.logs.String(), "\n") {
			if strings.Contains(l, `"alert":"intent-unbound"`) {
				line = l
				break
			}
		}
		for _, s := range []string{`"severity":"ERROR"`, `"intent":"orphan-1"`, `"kind":"video"`, `"model":"models/gemini-2.5-flash"`,
			`"display_name":"lrosink-orphan-1"`, `"created_at":"` + start.Format(time.RFC3339)} {
			if !strings.Contains(line, s) {
				t.Errorf("alert line %s lacks %s", line, s)
			}
		}
		if strings.Contains(w.logs.String(), "do-not-log") || strings.Contains(w.logs.String(), "12345678901234567890123") {
			t.Fatal("a metadata value reached the log")
		}
		// Bound: no longer counted nor alerted.
		in := getIntent(t, s, "orphan-1")
		in.Name, in.APIName, in.BoundAt, in.BoundBy = "operations/v1", "models/veo/operations/v1", w.clock.Now(), "webhook"
		if _, err := s.Apply(t.Context(), ledger.PutIntent(in)); err != nil {
			t.Fatal(err)
		}
		w.clock.Advance(48 * time.Hour)
		before := w.logs.CountLines(`"alert":"intent-unbound"`)
		if sum := w.pass(); sum.IntentsUnbound != 0 || w.logs.CountLines(`"alert":"intent-unbound"`) != before {
			t.Fatalf("a bound intent: %+v, alerted again %v", sum, w.logs.CountLines(`"alert":"intent-unbound"`) != before)
		}
	})
}

// TestOverlappingPassesAlertAnIntentOnce: two passes at once (a slow pass
// meeting the next tick) raise one intent-unbound line between them: the
// record is fenced, and only the pass whose record wins alerts.
func TestOverlappingPassesAlertAnIntentOnce(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		w := newStoreWorld(t, s, nil)
		recordIntent(t, s, "orphan-2", "interaction", w.clock.Now())
		w.clock.Advance(2 * time.Hour)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, err := w.rec.Pass(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := w.logs.CountLines(`"alert":"intent-unbound"`); n != 1 {
			t.Fatalf("%d intent-unbound lines from 4 overlapping passes, want 1", n)
		}
	})
}

// TestAdoptionBindsABatchIntent: a listed batch an unbound batch intent
// matches (its echoed metadata names it, or its display name and model are
// the intent's) is adopted as the intent's registration: the operation
// carries the intent's metadata, the intent is bound by "reconcile", and
// the summary counts it; a job no intent matches is adopted as before and
// binds nothing.
func TestAdoptionBindsABatchIntent(t *testing.T) {
	w := newWorld(t, 50)
	now := w.clock.Now()
	recordIntent(t, w.store, "by-name", "batch", now.Add(-time.Minute))
	recordIntent(t, w.store, "by-echo", "batch", now.Add(-time.Minute))
	recordIntent(t, w.store, "no-job", "batch", now.Add(-time.Minute))
	w.fake.SetBatch("named", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", CreateTime: now, UpdateTime: now,
		DisplayName: "lrosink-by-name", Model: "models/gemini-2.5-flash"})
	w.fake.SetBatch("echoed", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", CreateTime: now, UpdateTime: now, ResponsesFile: "files/e",
		DisplayName: "my own name", Model: "models/gemini-2.5-flash",
		Webhook: &fakegemini.WebhookConfig{UserMetadata: map[string]any{"lrosink_intent": "by-echo"}}})
	w.fake.SetBatch("stranger", fakegemini.BatchState{State: "BATCH_STATE_RUNNING", CreateTime: now, UpdateTime: now,
		DisplayName: "lrosink-no-job", Model: "models/gemini-2.5-pro"})
	sum := w.pass()
	if sum.Adopted != 3 || sum.IntentsBound != 2 {
		t.Fatalf("summary %+v: want 3 adopted, 2 intents bound", sum)
	}
	for key, name := range map[string]string{"by-name": "batches/named", "by-echo": "batches/echoed"} {
		in := getIntent(t, w.store, key)
		if in.Name != name || in.BoundBy != "reconcile" {
			t.Errorf("intent %s: %+v, want bound to %s by reconcile", key, in, name)
		}
		op := w.op(name)
		if op.Intent != key || op.UserMetadata["campaign"] != json.Number("12345678901234567890123") {
			t.Errorf("%s: %+v, want the registration of %s with its metadata", name, op, key)
		}
	}
	if in := getIntent(t, w.store, "no-job"); in.Bound() {
		t.Fatalf("no-job bound to %s (a job of another model)", in.Name)
	}
	if op := w.op("batches/stranger"); op.Intent != "" {
		t.Fatalf("stranger bound to %s", op.Intent)
	}
	msgs := w.sink.All()
	if len(msgs) != 1 || msgs[0].UserMetadata["campaign"] != json.Number("12345678901234567890123") || msgs[0].UserMetadata["lrosink_intent"] != nil {
		t.Fatalf("messages %+v: want the echoed batch's, with the intent's metadata exactly", msgs)
	}
	if sum := w.pass(); sum.IntentsBound != 0 {
		t.Fatalf("second pass bound %d again", sum.IntentsBound)
	}
}

// TestUnboundBatchIntentFoundBeyondAdoption: a batch intent's job that
// adoption's bounded scan never reaches (more newer jobs than its pages
// hold) is looked for when the intent's grace ends, listing back to its
// record time: it is bound then, by reconcile, with the intent's metadata,
// and no intent-unbound alert is raised.
func TestUnboundBatchIntentFoundBeyondAdoption(t *testing.T) {
	s := testutil.MemLedger(t)
	w := newStoreWorld(t, s, func(c *reconcile.Config) { c.IntentGrace, c.AdoptPageSize, c.AdoptMaxPages = time.Hour, 2, 1 })
	start := w.clock.Now()
	recordIntent(t, s, "deep", "batch", start)
	w.fake.SetBatch("deep-job", fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", CreateTime: start, UpdateTime: start, ResponsesFile: "files/d",
		Model: "models/gemini-2.5-flash", Webhook: &fakegemini.WebhookConfig{UserMetadata: map[string]any{"lrosink_intent": "deep"}}})
	for i := range 5 {
		at := start.Add(time.Duration(i+1) * time.Second)
		w.fake.SetBatch(fmt.Sprintf("newer-%d", i), fakegemini.BatchState{State: "BATCH_STATE_RUNNING", CreateTime: at, UpdateTime: at})
	}
	for w.clock.Now().Sub(start) < time.Hour {
		if sum := w.pass(); sum.IntentsBound != 0 {
			t.Fatalf("at +%v adoption bound %d: the job was meant to be out of its reach", w.clock.Now().Sub(start), sum.IntentsBound)
		}
		w.clock.Advance(10 * time.Minute)
	}
	if in := getIntent(t, s, "deep"); in.Bound() {
		t.Fatalf("bound to %s before its grace ended: adoption reached it", in.Name)
	}
	sum := w.pass()
	in := getIntent(t, s, "deep")
	if sum.IntentsBound != 1 || in.Name != "batches/deep-job" || in.BoundBy != "reconcile" {
		t.Fatalf("summary %+v, intent %+v: want deep bound to batches/deep-job by reconcile", sum, in)
	}
	op, err := s.GetOperation(t.Context(), mustDocID(t, "batches/deep-job"))
	if err != nil || op.Intent != "deep" || op.UserMetadata["campaign"] != json.Number("12345678901234567890123") || !op.State.Terminal() {
		t.Fatalf("operation %+v (%v): want the intent's registration, settled", op, err)
	}
	if n := w.logs.CountLines(`"alert":"intent-unbound"`); n != 0 {
		t.Fatalf("%d intent-unbound lines for an intent whose job was found", n)
	}
}

func mustDocID(t *testing.T, name string) string {
	t.Helper()
	id, err := opname.DocID(opname.KeyPrefix + name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
