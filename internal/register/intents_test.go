package register_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/register"
	"github.com/lrosink/lrosink/internal/testutil"
)

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// intents is register.Intents over s, on a clock the test moves.
func intents(t *testing.T, s ledger.Ledger) (*register.Intents, *testutil.Clock) {
	t.Helper()
	c := testutil.NewClock(t0)
	door, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: &testutil.Recorder{}, Log: logging.Discard(), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	in, err := register.NewIntents(door, s, c.Now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return in, c
}

func meta() map[string]any {
	return map[string]any{"campaign": json.Number("12345678901234567890123"), "nested": map[string]any{"a": []any{json.Number("1.50")}}}
}

func batch(key string) register.Intent {
	return register.Intent{Key: key, Kind: "batch", Model: "models/gemini-2.5-flash", DisplayName: "lrosink-" + key, Metadata: meta()}
}

func reason(err error) string {
	var inv *event.InvalidError
	if errors.As(err, &inv) {
		return inv.Reason
	}
	return ""
}

// TestRecord: a new key is recorded unbound (created), the same fields
// again answer it as it is, other fields are intent-mismatch naming the
// field; bad keys, kinds and metadata are refused; nothing refused is
// written.
func TestRecord(t *testing.T) {
	s := testutil.MemLedger(t)
	in, c := intents(t, s)
	st, created, err := in.Record(t.Context(), batch("nightly-1"))
	if err != nil || !created {
		t.Fatalf("record: %+v %v %v", st, created, err)
	}
	if st.State != register.StateUnbound || !st.CreatedAt.Equal(t0) || !st.GraceUntil.Equal(t0.Add(time.Hour)) || st.Name != "" {
		t.Fatalf("status %+v", st)
	}
	c.Advance(time.Minute)
	again, created, err := in.Record(t.Context(), batch("nightly-1"))
	if err != nil || created || !reflect.DeepEqual(again, st) {
		t.Fatalf("record again: %+v %v %v; want the first status, not created", again, created, err)
	}
	if !reflect.DeepEqual(again.Metadata, meta()) {
		t.Fatalf("metadata %v, want it exactly", again.Metadata)
	}
	_, w0, _ := s.Counts().Snapshot()
	for field, edit := range map[string]func(*register.Intent){
		"kind":         func(i *register.Intent) { i.Kind = "video" },
		"model":        func(i *register.Intent) { i.Model = "models/other" },
		"display_name": func(i *register.Intent) { i.DisplayName = "x" },
		"metadata":     func(i *register.Intent) { i.Metadata["campaign"] = json.Number("12345678901234567890124") },
	} {
		other := batch("nightly-1")
		edit(&other)
		_, _, err := in.Record(t.Context(), other)
		if reason(err) != event.ReasonIntentMismatch || !strings.Contains(err.Error(), "another "+field) {
			t.Errorf("other %s: %v, want intent-mismatch naming %s", field, err, field)
		}
	}
	for _, c := range []struct {
		edit   func(*register.Intent)
		reason string
	}{
		{func(i *register.Intent) { i.Key = "" }, event.ReasonInvalidIntent},
		{func(i *register.Intent) { i.Key = strings.Repeat("k", 129) }, event.ReasonInvalidIntent},
		{func(i *register.Intent) { i.Key = "a/b" }, event.ReasonInvalidIntent},
		{func(i *register.Intent) { i.Kind = "" }, event.ReasonInvalidKind},
		{func(i *register.Intent) { i.Kind = "spaceship" }, event.ReasonInvalidKind},
		{func(i *register.Intent) { i.Metadata = map[string]any{"lrosink_intent": "x"} }, event.ReasonInvalidMetadata},
		{func(i *register.Intent) {
			i.Metadata = map[string]any{"big": strings.Repeat("x", ledger.MaxMetadataBytes)}
		}, event.ReasonInvalidMetadata},
		{func(i *register.Intent) { i.Model = strings.Repeat("m", register.MaxFieldLen+1) }, event.ReasonInvalidIntent},
	} {
		bad := batch("fresh")
		c.edit(&bad)
		if _, _, err := in.Record(t.Context(), bad); reason(err) != c.reason {
			t.Errorf("%+.60v: %v, want %s", bad, err, c.reason)
		}
	}
	if _, w, _ := s.Counts().Snapshot(); w != w0 {
		t.Fatalf("refused records wrote %d documents", w-w0)
	}
}

// TestConcurrentRecordsCreateOnce (every store): of concurrent records of
// one key, exactly one is told it created the intent.
func TestConcurrentRecordsCreateOnce(t *testing.T) {
	t.Parallel()
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		in, _ := intents(t, s)
		var wg sync.WaitGroup
		var mu sync.Mutex
		created := 0
		for range 8 {
			wg.Go(func() {
				_, c, err := in.Record(t.Context(), batch("race"))
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if c {
					created++
				}
			})
		}
		wg.Wait()
		if created != 1 {
			t.Fatalf("%d records created the intent, want 1", created)
		}
	})
}

// TestBind: the bind registers the operation from the intent (metadata
// exactly) and marks it bound by submit; binding again to the same
// operation is known; the refusals are the protocol's.
func TestBind(t *testing.T) {
	s := testutil.MemLedger(t)
	in, c := intents(t, s)
	if _, _, err := in.Record(t.Context(), batch("k1")); err != nil {
		t.Fatal(err)
	}
	c.Advance(5 * time.Second)
	st, res, err := in.Bind(t.Context(), "k1", "batches/b1")
	if err != nil || !res.Created || st.State != register.StateBound || st.Name != "batches/b1" || st.APIName != "batches/b1" ||
		st.BoundBy != "submit" || !st.BoundAt.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("bind: %+v %+v %v", st, res, err)
	}
	op, err := s.GetOperation(t.Context(), "gemini:batches%2Fb1")
	if err != nil || op.Intent != "k1" || !reflect.DeepEqual(op.UserMetadata, meta()) || !op.SubmittedAt.Equal(t0) {
		t.Fatalf("operation %+v %v", op, err)
	}
	if st, res, err := in.Bind(t.Context(), "k1", "batches/b1"); err != nil || res.Created || st.Name != "batches/b1" {
		t.Fatalf("bind again: %+v %+v %v", st, res, err)
	}
	if st, _, err := in.Record(t.Context(), batch("k1")); err != nil || st.State != register.StateBound {
		t.Fatalf("record of a bound key: %+v %v", st, err)
	}
	video := register.Intent{Key: "v1", Kind: "video", Model: "models/veo-3.0-generate-001"}
	if _, _, err := in.Record(t.Context(), video); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ key, name, reason string }{
		{"nobody", "batches/b2", event.ReasonIntentUnknown},
		{"k1", "batches/b2", event.ReasonIntentBoundElsewhere},
		{"v1", "batches/b3", event.ReasonInvalidName},
		{"v1", "abc", event.ReasonInvalidName},
		{"v1", "", event.ReasonInvalidName},
		{"bad key", "batches/b2", event.ReasonInvalidIntent},
	} {
		if _, _, err := in.Bind(t.Context(), c.key, c.name); reason(err) != c.reason {
			t.Errorf("bind %q to %q: %v, want %s", c.key, c.name, err, c.reason)
		}
	}
	// A video keeps its model path, as a registration does.
	if st, _, err := in.Bind(t.Context(), "v1", "models/veo-3.0-generate-001/operations/op9"); err != nil ||
		st.Name != "operations/op9" || st.APIName != "models/veo-3.0-generate-001/operations/op9" {
		t.Fatalf("bind a video: %+v %v", st, err)
	}
}
