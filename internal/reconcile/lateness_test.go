package reconcile_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestFallingBehindIsVisible: a pass that can check only some of the due
// operations (MaxOperations) says how many it left due (due_backlog) and how
// late the earliest of them is (oldest_overdue_seconds), in its summary and
// its "reconcile pass" line; once it catches up both read zero.
func TestFallingBehindIsVisible(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		fake := fakegemini.New()
		srv := fake.Start(t)
		clk := testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
		logs := &testutil.SyncBuffer{}
		log := logging.New(logs, slog.LevelInfo, "")
		door, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: &testutil.Recorder{}, Log: log, Now: clk.Now, Grace: 90 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := reconcile.New(reconcile.Config{Ledger: claims.New(s), Door: door, Gemini: fakeFetcher(t, srv, log), Log: log,
			Now: clk.Now, StuckAfter: 6 * time.Hour, MaxOperations: 4, PageSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		// Registered a minute apart: the first due at 12:01:30, the last at 12:10:30.
		for i := range 10 {
			fake.SetBatch(fmt.Sprintf("p%d", i), fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
			mustRegister(t, door, fmt.Sprintf("batches/p%d", i))
			clk.Advance(time.Minute)
		}
		clk.Advance(time.Minute) // now 12:11: all ten due, p0 for 9m30s
		s1 := mustPass(t, rec)
		// Four checked (p0..p3); p4, due since 12:05:30, is the earliest left.
		if s1.Checked != 4 || s1.DueBacklog != 6 || s1.OldestOverdueSeconds != int64((5*time.Minute+30*time.Second)/time.Second) {
			t.Fatalf("first pass %+v: want 4 checked, backlog 6, oldest overdue 330 s", s1)
		}
		line := lastPassLine(t, logs.String())
		if line["due_backlog"] != float64(6) || line["oldest_overdue_seconds"] != float64(330) {
			t.Fatalf("reconcile pass line %v: want due_backlog 6, oldest_overdue_seconds 330", line)
		}
		mustPass(t, rec)
		s3 := mustPass(t, rec)
		if s3.DueBacklog != 0 || s3.OldestOverdueSeconds != 0 {
			t.Fatalf("caught-up pass %+v: want backlog 0, oldest overdue 0", s3)
		}
	})
}

// lastPassLine is the last "reconcile pass" log line, decoded.
func lastPassLine(t *testing.T, logs string) map[string]any {
	t.Helper()
	var last map[string]any
	for l := range strings.SplitSeq(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "reconcile pass" {
			last = m
		}
	}
	if last == nil {
		t.Fatalf("no reconcile pass line in %s", logs)
	}
	return last
}
