package ingest_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	fsledger "github.com/lrosink/lrosink/internal/ledger/firestore"
	"github.com/lrosink/lrosink/internal/ledger/sqlite"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/testutil"
)

// onBothStores runs f as a subtest against a fresh Firestore (emulator) and
// a fresh SQLite ledger: door behaviour that depends on what a store can
// keep must be the same on both.
func onBothStores(t *testing.T, f func(t *testing.T, s ledger.Store)) {
	t.Run("firestore", func(t *testing.T) {
		t.Parallel()
		c, _ := emutest.Firestore(t)
		f(t, fsledger.New(c, nil))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		f(t, s)
	})
}

// loggingDoor is a door on s that publishes to a recorder and logs JSON
// lines (INFO and up) to a buffer.
func loggingDoor(t *testing.T, s ledger.Store, c *clock) (*ingest.Door, *testutil.Recorder, *testutil.SyncBuffer) {
	t.Helper()
	rec, buf := &testutil.Recorder{}, &testutil.SyncBuffer{}
	d, err := ingest.New(ingest.Config{Store: s, Sink: rec, Log: logging.New(buf, slog.LevelInfo, "p"), Now: c.Now,
		Lease: 10 * time.Minute, Grace: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return d, rec, buf
}

// TestWhatAStoreCannotKeepNeverFailsAnEvent: a webhook for an operation
// nobody registered carries metadata over the bound (far over Firestore's
// 1 MiB), an oversize output, a huge error message and a long delivery id.
// The terminal state is recorded and published; the metadata and output
// that cannot be kept are dropped with a WARN line that names the field
// and never the value; the error message and delivery id are cut to their
// bounds. A later event's metadata that fits is still merged, and one that
// would take the operation over the bound is dropped whole.
func TestWhatAStoreCannotKeepNeverFailsAnEvent(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s ledger.Store) {
		d, rec, logs := loggingDoor(t, s, newClock())
		secret := "s3cr3t-value"
		e := ev("batches/huge", lifecycle.Running, tRun, ingest.SourceWebhook)
		e.UserMetadata = map[string]any{"job": "j", "blob": secret + strings.Repeat("x", 1100<<10)}
		e.Output = map[string]any{"output_text": strings.Repeat("y", ledger.MaxOutputBytes)}
		e.DeliveryID = strings.Repeat("é", 600)
		mustIngest(t, d, e)
		id := "gemini:batches%2Fhuge"
		op := mustOp(t, s, id)
		if op.State != lifecycle.Running || op.UserMetadata != nil || op.Output != nil {
			t.Fatalf("after an oversize event: state %s metadata %d keys output %d keys", op.State, len(op.UserMetadata), len(op.Output))
		}
		if h := op.History[0].DeliveryID; len(h) > ledger.MaxDeliveryIDBytes || !strings.HasPrefix(e.DeliveryID, h) || h == "" {
			t.Fatalf("delivery id kept as %d bytes %q", len(h), h)
		}
		if n := logs.CountLines(`"field":"user_metadata"`); n != 1 || logs.CountLines(`"field":"output"`) != 1 {
			t.Fatalf("want one WARN line per dropped field:\n%s", logs.String())
		}
		if strings.Contains(logs.String(), secret) {
			t.Fatal("a dropped value was logged")
		}

		// Metadata that fits is merged; then one that would go over the bound is dropped whole.
		fits := ev("batches/huge", lifecycle.RequiresAction, tRun.Add(time.Minute), ingest.SourceWebhook)
		fits.UserMetadata = map[string]any{"job": "j", "n": 1.0}
		mustIngest(t, d, fits)
		over := ev("batches/huge", lifecycle.Failed, tDone, ingest.SourceWebhook)
		over.UserMetadata = map[string]any{"more": strings.Repeat("z", ledger.MaxMetadataBytes-10)}
		over.Error = &ingest.ErrorInfo{Code: 3, Message: strings.Repeat("e", 2<<20)}
		if r := mustIngest(t, d, over); r.Outcome != ingest.OutcomeCompleted || !r.Published {
			t.Fatalf("terminal event: %+v", r)
		}
		op = mustOp(t, s, id)
		if op.State != lifecycle.Failed || len(op.UserMetadata) != 2 || op.UserMetadata["n"] != 1.0 ||
			op.Error == nil || len(op.Error.Message) != ledger.MaxErrorMessageBytes {
			t.Fatalf("after the terminal event: %s metadata %v error %d bytes", op.State, op.UserMetadata, len(op.Error.Message))
		}
		msgs := rec.All()
		if len(msgs) != 1 || len(msgs[0].UserMetadata) != 2 || len(msgs[0].Error.Message) != ledger.MaxErrorMessageBytes {
			t.Fatalf("published %d messages", len(msgs))
		}
		if n := logs.CountLines(`"field":"user_metadata"`); n != 2 {
			t.Fatalf("want a second WARN line for the metadata over the bound:\n%.2000s", logs.String())
		}
	})
}
