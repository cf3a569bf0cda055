package ingest_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/fsledger"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/testutil"
)

// testStore is a fresh ledger with a way to lose a claim (as the TTL
// policy or an operator would delete one).
type testStore struct {
	ingest.Store
	deleteClaim func(t *testing.T, id string)
}

// onBothStores runs f as a subtest against a fresh Firestore (emulator) and
// a fresh SQLite ledger: door behaviour that depends on the store must be
// the same on both.
func onBothStores(t *testing.T, f func(t *testing.T, s testStore)) {
	t.Run("firestore", func(t *testing.T) {
		t.Parallel()
		c := testutil.Firestore(t)
		f(t, testStore{Store: claims.New(fsledger.New(c, nil)), deleteClaim: func(t *testing.T, id string) {
			if _, err := c.Collection(fsledger.Claims).Doc(id).Delete(t.Context()); err != nil {
				t.Fatalf("delete claim: %v", err)
			}
		}})
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "ledger.db")
		s, err := sqliteledger.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		f(t, testStore{Store: claims.New(s), deleteClaim: func(t *testing.T, id string) {
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if res, err := db.Exec(`DELETE FROM claims WHERE id = ?`, id); err != nil {
				t.Fatalf("delete claim: %v", err)
			} else if n, _ := res.RowsAffected(); n != 1 {
				t.Fatalf("deleted %d claims", n)
			}
		}})
	})
}

// loggingDoor is a door on s that publishes to a recorder and logs JSON
// lines (INFO and up) to a buffer.
func loggingDoor(t *testing.T, s ingest.Store, c *clock) (*ingest.Door, *testutil.Recorder, *testutil.SyncBuffer) {
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
	onBothStores(t, func(t *testing.T, s testStore) {
		d, rec, logs := loggingDoor(t, s, newClock())
		secret := "s3cr3t-value"
		e := ev("batches/huge", lifecycle.Running, tRun, event.SourceWebhook)
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
		fits := ev("batches/huge", lifecycle.RequiresAction, tRun.Add(time.Minute), event.SourceWebhook)
		fits.UserMetadata = map[string]any{"job": "j", "n": 1.0}
		mustIngest(t, d, fits)
		over := ev("batches/huge", lifecycle.Failed, tDone, event.SourceWebhook)
		over.UserMetadata = map[string]any{"more": strings.Repeat("z", ledger.MaxMetadataBytes-10)}
		over.Error = &event.ErrorInfo{Code: 3, Message: strings.Repeat("e", 2<<20)}
		if r := mustIngest(t, d, over); r.Outcome != ingest.OutcomeCompleted || !r.Published {
			t.Fatalf("terminal event: %+v", r)
		}
		op = mustOp(t, s, id)
		if op.State != lifecycle.Failed || len(op.UserMetadata) != 2 || op.UserMetadata["n"] != json.Number("1") ||
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

// TestClaimsExpireFromTheirLastAttempt: every release and seize by the door
// moves the claim's expiry to now + ClaimTTL, so a claim whose side effect
// keeps failing is never deleted by the TTL policy while it is retried.
func TestClaimsExpireFromTheirLastAttempt(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s testStore) {
		c := newClock()
		failing := &flakySink{inner: &testutil.Recorder{}}
		failing.fail.Store(2)
		d, err := ingest.New(ingest.Config{Store: s, Sink: failing, Log: logging.Discard(), Now: c.Now, Lease: 10 * time.Minute, ClaimTTL: 30 * 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		id := "gemini:batches%2Fttl"
		if _, err := d.Ingest(t.Context(), ev("batches/ttl", lifecycle.Succeeded, tDone, event.SourceWebhook)); !errors.Is(err, ingest.ErrSideEffect) {
			t.Fatalf("first attempt: %v", err)
		}
		c.Advance(29 * 24 * time.Hour) // nobody retried for 29 days
		if _, err := d.RetryClaim(t.Context(), id); !errors.Is(err, ingest.ErrSideEffect) {
			t.Fatalf("retry: %v", err)
		}
		if cl := mustClaim(t, s, id); cl.Status != ledger.ClaimReleased || !cl.ExpireAt.Equal(c.Now().Add(30*24*time.Hour)) {
			t.Fatalf("after a seize and a release on day 29: %s, expires %v, want %v", cl.Status, cl.ExpireAt, c.Now().Add(30*24*time.Hour))
		}
		c.Advance(2 * 24 * time.Hour) // past the claim's first expiry
		if r, err := d.RetryClaim(t.Context(), id); err != nil || !r.Published {
			t.Fatalf("retry on day 31: %+v %v", r, err)
		}
		if cl := mustClaim(t, s, id); cl.Status != ledger.ClaimDone || !cl.ExpireAt.Equal(c.Now().Add(30*24*time.Hour)) {
			t.Fatalf("after the last seize: %s, expires %v", cl.Status, cl.ExpireAt)
		}
	})
}

// TestOwedEffectWithoutClaimAlerts: a terminal operation whose mirror says
// its side effect is owed, but whose claim (which holds the message) is
// gone, is an error, answered 503 to a webhook, with one ERROR line
// "alert":"claim-missing"; nothing is published until the operator replays
// it, which publishes the message rebuilt from the operation and settles
// the mirror. A claim missing long after its expiry, with the mirror still
// saying CLAIMED, is the normal end of a completed claim (DONE is not
// mirrored) and raises nothing.
func TestOwedEffectWithoutClaimAlerts(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s testStore) {
		c := newClock()
		rec, logs := &testutil.Recorder{}, &testutil.SyncBuffer{}
		failing := &flakySink{inner: rec}
		newDoor := func(sink ingest.Sink, faults ingest.Faults) *ingest.Door {
			d, err := ingest.New(ingest.Config{Store: s, Sink: sink, Log: logging.New(logs, slog.LevelInfo, "p"), Now: c.Now,
				Lease: 10 * time.Minute, ClaimTTL: 30 * 24 * time.Hour, Faults: faults})
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		d := newDoor(rec, nil)
		ctx := t.Context()
		alerts := func() int { return logs.CountLines(`"alert":"claim-missing"`) }

		// Released (a publish failed), then the claim is lost.
		failing.fail.Store(1)
		if _, err := newDoor(failing, nil).Ingest(ctx, ev("batches/rel", lifecycle.Succeeded, tDone, event.SourceWebhook)); !errors.Is(err, ingest.ErrSideEffect) {
			t.Fatalf("failing publish: %v", err)
		}
		s.deleteClaim(t, "gemini:batches%2Frel")
		_, err := d.Ingest(ctx, ev("batches/rel", lifecycle.Succeeded, tDone, event.SourceWebhook))
		if !errors.Is(err, ingest.ErrClaimMissing) || alerts() != 1 || logs.CountLines(`"operation":"batches/rel"`) < 1 {
			t.Fatalf("redelivery with the claim gone: %v, %d alerts\n%s", err, alerts(), logs.String())
		}
		// Held by a process that died after the commit; lost within its TTL.
		if _, err := newDoor(rec, &crashOnce{point: ingest.FaultAfterCommit}).Ingest(ctx, ev("batches/held", lifecycle.Failed, tDone, event.SourceWebhook)); err == nil {
			t.Fatal("the crash was not injected")
		}
		s.deleteClaim(t, "gemini:batches%2Fheld")
		c.Advance(11 * time.Minute)
		if _, err := d.Ingest(ctx, ev("batches/held", lifecycle.Failed, tDone, event.SourceWebhook)); !errors.Is(err, ingest.ErrClaimMissing) || alerts() != 2 {
			t.Fatalf("redelivery after the lease with the claim gone: %v, %d alerts", err, alerts())
		}
		if _, err := d.RetryClaim(ctx, "gemini:batches%2Fheld"); !errors.Is(err, ingest.ErrClaimMissing) || alerts() != 3 {
			t.Fatalf("claim retry with the claim gone: %v, %d alerts", err, alerts())
		}
		if n := len(rec.All()); n != 0 {
			t.Fatalf("%d messages published without a claim", n)
		}

		// The operator replays: the message is rebuilt and the alert stops.
		id, err := d.Replay(ctx, "batches/rel", "")
		if err != nil {
			t.Fatalf("replay: %v", err)
		}
		if msgs := rec.All(); len(msgs) != 1 || msgs[0].ReplayID != id || msgs[0].State != "SUCCEEDED" || msgs[0].IdempotencyKey != "gemini:batches/rel" {
			t.Fatalf("replayed %+v", msgs)
		}
		if r, err := d.Ingest(ctx, ev("batches/rel", lifecycle.Succeeded, tDone, event.SourceWebhook)); err != nil || r.Published || alerts() != 3 {
			t.Fatalf("redelivery after the replay: %+v %v, %d alerts", r, err, alerts())
		}

		// Completed, then deleted by the TTL policy after its expiry: normal.
		mustIngest(t, d, ev("batches/old", lifecycle.Succeeded, tDone, event.SourceWebhook))
		c.Advance(31 * 24 * time.Hour)
		s.deleteClaim(t, "gemini:batches%2Fold")
		r, err := d.Ingest(ctx, event.Event{Name: "batches/old", State: lifecycle.Pending, Source: event.SourceRegister})
		if err != nil || r.Published || alerts() != 3 {
			t.Fatalf("late registration of an operation completed long ago: %+v %v, %d alerts", r, err, alerts())
		}
	})
}
