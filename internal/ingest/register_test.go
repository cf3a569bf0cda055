package ingest_test

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/testutil"
)

// storeDoor is a door on any ledger, with a test clock.
func storeDoor(t *testing.T, s ingest.Store, sink ingest.Sink, c *clock) *ingest.Door {
	t.Helper()
	d, err := ingest.New(ingest.Config{Store: s, Sink: sink, Log: logging.Discard(), Now: c.Now,
		Lease: 10 * time.Minute, Grace: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func register(name string, md map[string]any) event.Event {
	return event.Event{Name: name, State: lifecycle.Pending, Source: event.SourceRegister, UserMetadata: md}
}

func created(r ingest.Result) bool {
	return r.Outcome == ingest.OutcomeApplied && r.Reason == string(lifecycle.ReasonFirstSighting)
}

// TestConcurrentRegistrationsKeepEveryCallersMetadata: concurrent first
// registrations of one name, each with its own metadata key and a shared
// one: exactly one is told it created the operation (the 201), and the
// stored metadata holds every caller's own key; on the shared key the first
// writer (the creator) wins.
func TestConcurrentRegistrationsKeepEveryCallersMetadata(t *testing.T) {
	t.Parallel()
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		t.Parallel()
		d := storeDoor(t, claims.New(s), &testutil.Recorder{}, newClock())
		const n = 8
		res, errs := make([]ingest.Result, n), make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res[i], errs[i] = d.Ingest(t.Context(), register("batches/reg-race",
					map[string]any{fmt.Sprintf("k%d", i): "v", "shared": fmt.Sprint(i)}))
			}()
		}
		close(start)
		wg.Wait()
		creator := -1
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("register %d: %v", i, errs[i])
			}
			if created(res[i]) {
				if creator >= 0 {
					t.Errorf("registers %d and %d were both told they created the operation", creator, i)
				}
				creator = i
			}
		}
		if creator < 0 {
			t.Fatalf("no register was told it created the operation: %+v", res)
		}
		op := mustOp(t, s, "gemini:batches%2Freg-race")
		for i := range n {
			if op.UserMetadata[fmt.Sprintf("k%d", i)] != "v" {
				t.Errorf("caller %d's metadata key is missing: %v", i, op.UserMetadata)
			}
		}
		if op.UserMetadata["shared"] != fmt.Sprint(creator) {
			t.Errorf("shared key = %v, want the creator's %d", op.UserMetadata["shared"], creator)
		}
		if op.State != lifecycle.Pending || len(op.History) != 1 {
			t.Errorf("state %s with %d history entries, want PENDING with 1", op.State, len(op.History))
		}
	})
}

// TestRegisterMergesMetadataWhateverTheState: a register after a webhook's
// first sighting, and after the operation settled, adds the metadata keys
// the operation lacks and changes nothing else; one that adds nothing does
// not write; the published message is never changed by a later register.
func TestRegisterMergesMetadataWhateverTheState(t *testing.T) {
	t.Parallel()
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		t.Parallel()
		rec := &testutil.Recorder{}
		d := storeDoor(t, claims.New(s), rec, newClock())
		const name, id = "batches/reg-late", "gemini:batches%2Freg-late"
		mustIngest(t, d, event.Event{Name: name, State: lifecycle.Running, UpdateTime: tRun, Source: event.SourceWebhook,
			UserMetadata: map[string]any{"job": "from-webhook"}})
		before := mustOp(t, s, id)

		r := mustIngest(t, d, register(name, map[string]any{"job": "from-register", "team": "t1"}))
		if created(r) || r.State != lifecycle.Running {
			t.Fatalf("register after the webhook: %+v", r)
		}
		after := mustOp(t, s, id)
		if want := map[string]any{"job": "from-webhook", "team": "t1"}; !reflect.DeepEqual(after.UserMetadata, want) {
			t.Fatalf("metadata %v, want %v (missing keys added, echoed ones kept)", after.UserMetadata, want)
		}
		if after.Rev.Version != before.Rev.Version+1 {
			t.Fatalf("version %d → %d, want one write", before.Rev.Version, after.Rev.Version)
		}
		same := after
		same.Rev, same.UserMetadata = before.Rev, before.UserMetadata
		if !reflect.DeepEqual(same, before) {
			t.Fatalf("the merge changed more than the metadata:\nbefore %+v\nafter  %+v", before, after)
		}

		// Registers that add nothing cost no write.
		mustIngest(t, d, register(name, map[string]any{"job": "x", "team": "y"}))
		mustIngest(t, d, register(name, nil))
		if again := mustOp(t, s, id); again.Rev != after.Rev {
			t.Fatalf("a register adding no key wrote: %+v → %+v", after.Rev, again.Rev)
		}

		// The completion carries the merged metadata.
		mustIngest(t, d, event.Event{Name: name, State: lifecycle.Succeeded, UpdateTime: tDone, Source: event.SourceWebhook,
			UserMetadata: map[string]any{"job": "from-webhook"}})
		msgs := rec.All()
		if len(msgs) != 1 || msgs[0].UserMetadata["team"] != "t1" || msgs[0].UserMetadata["job"] != "from-webhook" {
			t.Fatalf("messages %+v, want one carrying the registered team", msgs)
		}
		settled := mustOp(t, s, id)

		// After the terminal: merged into the operation; the message stays.
		r = mustIngest(t, d, register(name, map[string]any{"late": "l", "team": "t2"}))
		if created(r) || r.State != lifecycle.Succeeded || r.Published {
			t.Fatalf("register after the terminal: %+v", r)
		}
		op := mustOp(t, s, id)
		if op.UserMetadata["late"] != "l" || op.UserMetadata["team"] != "t1" || op.State != lifecycle.Succeeded ||
			op.Rev.Version != settled.Rev.Version+1 || op.Effect != settled.Effect || !op.SettledAt.Equal(settled.SettledAt) {
			t.Fatalf("operation after a late register: %+v", op)
		}
		c := mustClaim(t, s, id)
		if _, ok := c.Message.UserMetadata["late"]; ok || c.Status != ledger.ClaimDone {
			t.Fatalf("claim after a late register: %+v", c)
		}
		if n := len(rec.All()); n != 1 {
			t.Fatalf("%d messages, want 1", n)
		}
	})
}
