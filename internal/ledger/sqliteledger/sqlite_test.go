package sqliteledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/claims/claimstest"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/shard"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 123456000, time.UTC)

var far = t0.Add(30 * 24 * time.Hour)

// nullMicros is how a nullable time column reads back.
func nullMicros(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: true}
}

// openAt opens a store on path and closes it when the test ends.
func openAt(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func openTemp(t testing.TB) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "ledger.db"))
}

func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Ledger { return openTemp(t) })
}

// TestProtocol runs the claim protocol's suite on SQLite: an integration
// test of the protocol on a real store.
func TestProtocol(t *testing.T) {
	claimstest.Run(t, func(t *testing.T) ledger.Ledger { return openTemp(t) })
}

// settle commits op id as PENDING, then SUCCEEDED with a claim held by holder.
func settle(t *testing.T, s *Store, id, holder string, leaseUntil time.Time) (ledger.Operation, *ledger.Lease) {
	t.Helper()
	ctx := t.Context()
	if _, _, err := claims.New(s).CommitOperation(ctx, ledgertest.Op(id), nil); err != nil {
		t.Fatal(err)
	}
	op, err := s.GetOperation(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	op.State, op.UpdateTime, op.SettledAt, op.SettledBy, op.NextCheckAt = lifecycle.Succeeded, t0, t0, "webhook", time.Time{}
	op.Effect = ledger.EffectMirror{Status: ledger.ClaimHeld, LeaseUntil: leaseUntil}
	rev, lease, err := claims.New(s).CommitOperation(ctx, op, ledgertest.Claim(id, holder, leaseUntil))
	if err != nil {
		t.Fatal(err)
	}
	op.Rev = rev
	return op, lease
}

// TestRoundTrip checks every field of an operation and a claim survives the
// store, with times at microsecond precision in UTC.
func TestRoundTrip(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	cet := time.FixedZone("CET", 3600)
	at := time.Date(2026, 3, 4, 5, 6, 7, 891234567, cet)
	op := ledger.Operation{
		ID: "r1", Name: "batches/r1", APIName: "batches/r1-api", Kind: "batch", State: lifecycle.Failed,
		UpdateTime: at, SubmittedAt: at.Add(-time.Hour), SettledAt: at, SettledBy: "reconcile",
		NextCheckAt: time.Time{}, Checks: 3, LastCheck: "not-found", LastCheckAt: at.Add(-time.Minute),
		History:      []ledger.HistoryEntry{{At: at, Source: "webhook", State: lifecycle.Failed, UpdateTime: at, Reason: "higher-rank", DeliveryID: "d1"}},
		Conflicts:    []ledger.HistoryEntry{{At: at, Source: "reconcile", State: lifecycle.Succeeded, UpdateTime: at, Reason: "terminal-conflict"}},
		UserMetadata: map[string]any{"job": "j1", "n": json.Number("2.5"), "nested": map[string]any{"a": []any{"x"}}},
		Output:       map[string]any{"uri": "gs://b/o"},
		Error:        &results.ErrorInfo{Code: 13, Message: "internal"},
		Effect:       ledger.EffectMirror{Status: ledger.ClaimReleased, LeaseUntil: at},
		Replays:      []ledger.Replay{{ID: "rp1", At: at}},
	}
	if _, _, err := claims.New(s).CommitOperation(ctx, op, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetOperation(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	us := func(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
	want := op
	want.Rev = ledger.Revision{Version: 1}
	want.UpdateTime, want.SubmittedAt, want.SettledAt, want.LastCheckAt = us(op.UpdateTime), us(op.SubmittedAt), us(op.SettledAt), us(op.LastCheckAt)
	want.History = []ledger.HistoryEntry{{At: us(at), Source: "webhook", State: lifecycle.Failed, UpdateTime: us(at), Reason: "higher-rank", DeliveryID: "d1"}}
	want.Conflicts = []ledger.HistoryEntry{{At: us(at), Source: "reconcile", State: lifecycle.Succeeded, UpdateTime: us(at), Reason: "terminal-conflict"}}
	want.Effect.LeaseUntil = us(at)
	want.Replays = []ledger.Replay{{ID: "rp1", At: us(at)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("operation round trip:\n got %+v\nwant %+v", got, want)
	}

	c := *ledgertest.Claim("r2", "h1", at)
	if _, _, err := claims.New(s).CommitOperation(ctx, ledgertest.Op("r2"), &c); err != nil {
		t.Fatal(err)
	}
	gotc, err := s.GetClaim(ctx, "r2")
	if err != nil {
		t.Fatal(err)
	}
	wantc := c
	wantc.Rev = ledger.Revision{Version: 1}
	wantc.LeaseUntil = us(at)
	if !reflect.DeepEqual(gotc, wantc) {
		t.Fatalf("claim round trip:\n got %+v\nwant %+v", gotc, wantc)
	}
}

// TestClaimRevAndDueAt checks the rev column fences every claim write and
// due_at follows the claim's status.
func TestClaimRevAndDueAt(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	_, lease := settle(t, s, "v1", "h1", t0.Add(time.Minute))
	dueAt := func() sql.NullInt64 {
		t.Helper()
		var v sql.NullInt64
		if err := s.reader.QueryRowContext(ctx, `SELECT due_at FROM claims WHERE id = 'v1'`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if lease.Rev.Version != 1 || dueAt() != nullMicros(t0.Add(time.Minute)) {
		t.Fatalf("new claim: lease rev %d, due_at %v", lease.Rev.Version, dueAt())
	}
	if err := claims.New(s).ReleaseClaim(ctx, *lease, far, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := claims.New(s).ReleaseClaim(ctx, *lease, far, t0.Add(time.Second)); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("second release with the same lease = %v, want ErrFenced", err)
	}
	c, _ := s.GetClaim(ctx, "v1")
	if c.Rev.Version != 2 || c.Holder != "" || dueAt() != nullMicros(t0.Add(time.Second)) {
		t.Fatalf("released claim %+v, due_at %v", c, dueAt())
	}
	l2, err := claims.New(s).SeizeClaim(ctx, c, "h2", t0.Add(time.Hour), far, t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if l2.Rev.Version != 3 || dueAt() != nullMicros(t0.Add(time.Hour)) {
		t.Fatalf("seized: lease %+v, due_at %v", l2, dueAt())
	}
	if err := claims.New(s).CompleteClaim(ctx, *l2, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.GetClaim(ctx, "v1"); c.Rev.Version != 4 || c.Status != ledger.ClaimDone || dueAt().Valid {
		t.Fatalf("done claim %+v, due_at %v", c, dueAt())
	}
	missing := ledger.Lease{ID: "none", Rev: ledger.Revision{Version: 1}}
	_, seizeErr := claims.New(s).SeizeClaim(ctx, ledger.Claim{ID: missing.ID, Rev: missing.Rev}, "h", t0, far, t0)
	for name, err := range map[string]error{
		"seize":    seizeErr,
		"release":  claims.New(s).ReleaseClaim(ctx, missing, far, t0),
		"complete": claims.New(s).CompleteClaim(ctx, missing, t0),
	} {
		if !errors.Is(err, ledger.ErrFenced) {
			t.Errorf("%s a missing claim = %v, want ErrFenced", name, err)
		}
	}
}

// planProblem returns why a query plan is not served by an index, or "".
func planProblem(details []string) string {
	indexed := false
	for _, d := range details {
		switch {
		case strings.Contains(d, "USING INDEX"), strings.Contains(d, "USING COVERING INDEX"),
			strings.Contains(d, "USING INTEGER PRIMARY KEY"):
			indexed = true
		case strings.HasPrefix(d, "SCAN "):
			return "full scan: " + d
		}
		if strings.Contains(d, "TEMP B-TREE") {
			return "sorts in a temporary b-tree: " + d
		}
	}
	if !indexed {
		return "no index used"
	}
	return ""
}

func explain(t *testing.T, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain %q: %v", query, err)
	}
	defer rows.Close()
	var details []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		details = append(details, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return details
}

// updateArgs is the update's arguments for a put at version 1 (fenced).
func updateArgs(insert []any) []any {
	_, args := fenced("", "", ledger.Revision{Version: 1}, insert)
	return args
}

// TestQueryPlans proves every statement the adapter runs is served by an
// index: no query or fenced write ever scans a table.
func TestQueryPlans(t *testing.T) {
	s := openTemp(t)
	opArgs, err := opArgs(ledgertest.Op("x"), 2)
	if err != nil {
		t.Fatal(err)
	}
	updated := *ledgertest.Claim("x", "h", t0)
	updated.Rev = ledger.Revision{Version: 1}
	updateClaim, updateClaimArgs, err := claimArgs(updated, 2)
	if err != nil {
		t.Fatal(err)
	}
	intentInsert, err := intentArgs(ledgertest.Intent("k", t0), 2)
	if err != nil {
		t.Fatal(err)
	}
	now := micros(t0)
	for name, q := range map[string]struct {
		sql   string
		index string
		args  []any
	}{
		"GetOperation":            {sqlGetOperation, "sqlite_autoindex_operations_1", []any{"x"}},
		"UpdateOperation":         {sqlUpdateOperation, "sqlite_autoindex_operations_1", updateArgs(opArgs)},
		"PatchSchedule":           {sqlPatchSchedule, "sqlite_autoindex_operations_1", []any{now, 1, "n", now, now, now, 2, "x", 1}},
		"MirrorEffect":            {sqlMirrorEffect, "sqlite_autoindex_operations_1", []any{"CLAIMED", now, "x"}},
		"DueOperations":           {sqlDueOperations, "operations_next_check_at", []any{now, now, "x", 10}},
		"StuckOperations":         {sqlStuckOperations, "operations_stuck_from", []any{now, 10}},
		"ListOperations":          {sqlListOperations, "operations_submitted_at", []any{10}},
		"ListOperationsState":     {sqlListOperationsInState, "operations_state_submitted_at", []any{"PENDING", 10}},
		"GetClaim":                {sqlGetClaim, "sqlite_autoindex_claims_1", []any{"x"}},
		"UpdateClaim":             {updateClaim, "sqlite_autoindex_claims_1", updateClaimArgs},
		"DueClaims":               {sqlDueClaims, "claims_due_at", []any{now, now, "x", 10}},
		"CountDueClaims":          {sqlCountDueClaims, "claims_due_at", []any{now, now, "x"}},
		"SearchOperations":        {sqlSearchOperations, "sqlite_autoindex_operations_1", []any{"gemini:b", "gemini:b1", "gemini:c", 10}},
		"CountPending":            {sqlCountPending, "operations_pending_since", nil},
		"CountDue":                {sqlCountDue, "operations_next_check_at", []any{now}},
		"ListDeliveries":          {sqlListDeliveries, "delivery_entries_op", []any{"x"}},
		"WebhookTraffic":          {sqlWebhookTraffic, "INTEGER PRIMARY KEY", []any{10}},
		"DeliverySeqRange":        {sqlSeqRange, "delivery_entries", nil},
		"TrimDeliveries":          {sqlTrimDeliveries, "delivery_entries_op", []any{"x", 50}},
		"ExpireDeliveries":        {sqlExpireDeliveries, "INTEGER PRIMARY KEY", []any{10, now}},
		"DueOperationsInBucket":   {sqlDueOperationsInBucket, "operations_bucket_next_check_at", []any{3, now, now, "x", 10}},
		"StuckOperationsInBucket": {sqlStuckOperationsInBucket, "operations_bucket_stuck_from", []any{3, now, 10}},
		"CountDueInBucket":        {sqlCountDueInBucket, "operations_bucket_next_check_at", []any{3, now}},
		"PruneOperations":         {sqlPruneOperations, "operations_settled_at", []any{now, 10}},
		"PruneClaims":             {sqlPruneClaims, "claims_done_expire_at", []any{now, 10}},
		"GetIntent":               {sqlGetIntent, "sqlite_autoindex_intents_1", []any{"k"}},
		"UpdateIntent":            {sqlUpdateIntent, "sqlite_autoindex_intents_1", updateArgs(intentInsert)},
		"UnboundIntents":          {sqlUnboundIntents, "intents_unbound_since", []any{now, now, "k", 10}},
		"CountUnboundIntents":     {sqlCountUnboundIntents, "intents_unbound_since", []any{now}},
		"IntentAlertsDue":         {sqlIntentAlertsDue, "intents_alert_from", []any{now, 10}},
		"PruneIntents":            {sqlPruneIntents, "intents_bound_at", []any{now, 10}},
	} {
		t.Run(name, func(t *testing.T) {
			plan := explain(t, s.writer, q.sql, q.args...)
			t.Logf("plan: %q", plan)
			if p := planProblem(plan); p != "" {
				t.Fatalf("%s: %s\nplan: %q", name, p, plan)
			}
			if !strings.Contains(strings.Join(plan, "\n"), q.index) {
				t.Fatalf("%s does not use %s: %q", name, q.index, plan)
			}
		})
	}
	// Every combination of the console's filters, with and without a
	// cursor, and its count.
	for _, kind := range []string{"", "batch"} {
		for _, state := range []string{"", "PENDING"} {
			for _, stuck := range []bool{false, true} {
				f := ledger.Filter{Kind: opname.Kind(kind), State: lifecycle.State(state)}
				index := "operations_"
				if kind != "" {
					index += "kind_"
				}
				if state != "" {
					index += "state_"
				}
				if index += "submitted_at"; stuck {
					f.StuckAt = t0
					index = strings.Replace(index, "submitted_at", "pending_since", 1)
				}
				for _, v := range []struct {
					name          string
					cursor, count bool
				}{{"page", false, false}, {"next-page", true, false}, {"count", false, true}} {
					q, args := pageQuery(f, v.cursor, v.count)
					if v.cursor {
						args = append(args, now, "x")
					}
					if !v.count {
						args = append(args, 10)
					}
					t.Run(fmt.Sprintf("%s/%+v", v.name, f), func(t *testing.T) {
						plan := explain(t, s.writer, q, args...)
						// Counting every operation reads every entry of
						// the (covering) index: that is what a count is.
						if p := planProblem(plan); p != "" && !(v.count && f == (ledger.Filter{}) && strings.Contains(p, "COVERING INDEX")) {
							t.Fatalf("%s: %s\nplan: %q", q, p, plan)
						}
						want := index
						if v.count && f == (ledger.Filter{}) {
							want = "sqlite_autoindex_operations_1" // SQLite counts on the smallest index
						}
						if !strings.Contains(strings.Join(plan, "\n")+" ", "INDEX "+want+" ") {
							t.Fatalf("%s does not use %s: %q", q, want, plan)
						}
					})
				}
			}
		}
	}
	// The check itself must catch a scan.
	if p := planProblem(explain(t, s.writer, `SELECT id FROM operations WHERE settled_by = ?`, "x")); !strings.HasPrefix(p, "full scan") {
		t.Fatalf("an unindexed query passed the plan check (%q)", p)
	}
	if p := planProblem(explain(t, s.writer, `SELECT id FROM claims WHERE due_at <= ? ORDER BY holder LIMIT 1`, now)); p == "" {
		t.Fatalf("a query sorting in a temporary b-tree passed the plan check")
	}
}

// TestTwoStoresOneFile: two Stores on one file (two processes' view) racing
// commits from the same read; exactly one wins, the other is fenced out.
func TestTwoStoresOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	stores := []*Store{openAt(t, path), openAt(t, path)}
	ctx := t.Context()
	for round := range 16 {
		id := fmt.Sprint("two", round)
		if _, _, err := claims.New(stores[0]).CommitOperation(ctx, ledgertest.Op(id), nil); err != nil {
			t.Fatal(err)
		}
		read, err := stores[1].GetOperation(ctx, id) // the other store sees the first's commit
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		errs := make([]error, len(stores))
		var wg sync.WaitGroup
		for i, s := range stores {
			wg.Go(func() {
				op := read
				op.State, op.UpdateTime, op.SettledAt, op.SettledBy, op.NextCheckAt = lifecycle.Succeeded, t0, t0, fmt.Sprint("store", i), time.Time{}
				<-start
				_, _, errs[i] = claims.New(s).CommitOperation(ctx, op, ledgertest.Claim(id, fmt.Sprint("h", i), t0.Add(time.Minute)))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: both stores committed from one read", round)
				}
				winner = i
			case !errors.Is(err, ledger.ErrConflict):
				t.Fatalf("round %d: store %d: %v, want ErrConflict", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no store committed: %v", round, errs)
		}
		for _, s := range stores {
			op, err := s.GetOperation(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			c, err := s.GetClaim(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if op.Rev.Version != 2 || op.SettledBy != fmt.Sprint("store", winner) || c.Holder != fmt.Sprint("h", winner) {
				t.Fatalf("round %d: winner %d but operation %+v, claim holder %q", round, winner, op, c.Holder)
			}
		}
	}
}

// TestWriteTakesLockAtBegin: with _txlock=immediate a write transaction holds
// the write lock from BEGIN, so a writer in another process waits for it
// (here until its context ends) instead of failing mid-transaction.
func TestWriteTakesLockAtBegin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock.db")
	a, b := openAt(t, path), openAt(t, path)
	ctx := t.Context()
	if _, _, err := claims.New(a).CommitOperation(ctx, ledgertest.Op("w1"), nil); err != nil {
		t.Fatal(err)
	}
	op, err := b.GetOperation(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := a.writer.BeginTx(ctx, nil) // executes no statement: only BEGIN
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = claims.New(b).ScheduleCheck(short, op, t0, "x", t0)
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("write while another store holds BEGIN IMMEDIATE = %v, want the context's deadline", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := claims.New(b).ScheduleCheck(ctx, op, t0, "x", t0); err != nil {
		t.Fatalf("write after the lock was released: %v", err)
	}
}

// TestReopen: what was committed is there after Close and Open.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reopen.db")
	ctx := t.Context()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	_, lease := settle(t, s, "p1", "h1", t0.Add(time.Minute))
	if err := claims.New(s).CompleteClaim(ctx, *lease, t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := claims.New(s).CommitOperation(ctx, ledgertest.Op("p2"), nil); err != nil {
		t.Fatal(err)
	}
	wantOp, _ := s.GetOperation(ctx, "p1")
	wantClaim, _ := s.GetClaim(ctx, "p1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path)
	gotOp, err := s.GetOperation(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	gotClaim, err := s.GetClaim(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotOp, wantOp) || !reflect.DeepEqual(gotClaim, wantClaim) {
		t.Fatalf("after reopen:\n op %+v\nwant %+v\n claim %+v\nwant %+v", gotOp, wantOp, gotClaim, wantClaim)
	}
	if due, err := s.DueOperations(ctx, shard.All(), t0.Add(time.Hour), ledger.DueCursor{}, 10); err != nil || len(due) != 1 || due[0].ID != "p2" {
		t.Fatalf("due after reopen = %v, %v", due, err)
	}
	var v int
	if err := s.reader.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("schema version %d, %v", v, err)
	}
}

func TestPragmas(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	for _, p := range []struct {
		db   *sql.DB
		name string
		want string
	}{
		{s.writer, "journal_mode", "wal"},
		{s.writer, "synchronous", "1"}, // NORMAL
		{s.writer, "busy_timeout", "10000"},
		{s.writer, "foreign_keys", "1"},
		{s.writer, "query_only", "0"},
		{s.reader, "busy_timeout", "10000"},
		{s.reader, "query_only", "1"},
	} {
		var got string
		if err := p.db.QueryRowContext(ctx, "PRAGMA "+p.name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != p.want {
			t.Errorf("PRAGMA %s = %s, want %s", p.name, got, p.want)
		}
	}
	if s.writer.Stats().MaxOpenConnections != 1 {
		t.Errorf("writer pool allows %d connections, want 1", s.writer.Stats().MaxOpenConnections)
	}
}

// TestMigratesStuckAlertedAt: a database written by a binary at schema
// version 1 (no stuck_alerted_at, no gemini_status, no stuck_from) opens,
// keeps its operations, puts its pending ones in the stuck scan and records
// alerts.
func TestMigratesStuckAlertedAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	ctx := t.Context()
	s := openAt(t, path)
	if _, _, err := claims.New(s).CommitOperation(ctx, ledgertest.Op("m1"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.ExecContext(ctx, `DROP INDEX operations_bucket_next_check_at; DROP INDEX operations_bucket_stuck_from;
ALTER TABLE operations DROP COLUMN bucket; DROP INDEX operations_stuck_from; ALTER TABLE operations DROP COLUMN stuck_from;
ALTER TABLE operations DROP COLUMN stuck_alerted_at; ALTER TABLE operations DROP COLUMN gemini_status; DROP TABLE intents; ALTER TABLE operations DROP COLUMN intent;
UPDATE schema_version SET version = 1`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	op, err := s.GetOperation(ctx, "m1")
	if err != nil || !op.StuckAlertedAt.IsZero() {
		t.Fatalf("after migration: %+v, %v", op, err)
	}
	if stuck, err := s.StuckOperations(ctx, shard.All(), op.SubmittedAt, 10); err != nil || len(stuck) != 1 {
		t.Fatalf("stuck scan after migration: %v, %v; want m1", stuck, err)
	}
	if _, err := claims.New(s).RecordStuckAlert(ctx, op, t0, t0); err != nil {
		t.Fatal(err)
	}
	if op, err = s.GetOperation(ctx, "m1"); err != nil || !op.StuckAlertedAt.Equal(t0) {
		t.Fatalf("after recording: %+v, %v", op, err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "future.db")
	ctx := t.Context()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.ExecContext(ctx, `UPDATE schema_version SET version = ?`, schemaVersion+1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(ctx, path); err == nil {
		s.Close()
		t.Fatal("Open accepted a database with a newer schema")
	}
}

func TestOpenNeedsAFile(t *testing.T) {
	for _, path := range []string{"", ":memory:", "file::memory:?cache=shared"} {
		if s, err := Open(t.Context(), path); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded; two pools on an in-memory database would not share it", path)
		}
	}
	// A path with URI metacharacters is a file name, not parameters.
	odd := filepath.Join(t.TempDir(), "a?b#c%d.db")
	s := openAt(t, odd)
	if _, _, err := claims.New(s).CommitOperation(t.Context(), ledgertest.Op("o1"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(odd); err != nil {
		t.Fatalf("database file not created at its path: %v", err)
	}
}

// TestCancelledContext: a done context is reported as such, never as a
// fencing error (the ingest door must answer "unavailable", not re-read).
func TestCancelledContext(t *testing.T) {
	s := openTemp(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := claims.New(s).CommitOperation(ctx, ledgertest.Op("c1"), nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("commit with a cancelled context = %v", err)
	}
	if _, err := s.GetOperation(ctx, "c1"); !errors.Is(err, context.Canceled) || errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("get with a cancelled context = %v", err)
	}
	if _, err := s.GetOperation(t.Context(), "c1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the cancelled commit wrote: %v", err)
	}
}

// BenchmarkCommit runs the ingest door's full write path per operation:
// create PENDING, RUNNING, SUCCEEDED with its claim, claim DONE.
func BenchmarkCommit(b *testing.B) {
	s := openTemp(b)
	ctx := b.Context()
	commits := 0
	for i := 0; b.Loop(); i++ {
		op := ledgertest.Op(fmt.Sprint("b", i))
		rev, _, err := claims.New(s).CommitOperation(ctx, op, nil)
		if err != nil {
			b.Fatal(err)
		}
		op.Rev, op.State, op.UpdateTime = rev, lifecycle.Running, t0
		if rev, _, err = claims.New(s).CommitOperation(ctx, op, nil); err != nil {
			b.Fatal(err)
		}
		op.Rev, op.State, op.SettledAt, op.SettledBy, op.NextCheckAt = rev, lifecycle.Succeeded, t0, "webhook", time.Time{}
		op.Effect = ledger.EffectMirror{Status: ledger.ClaimHeld, LeaseUntil: t0.Add(time.Minute)}
		_, lease, err := claims.New(s).CommitOperation(ctx, op, ledgertest.Claim(op.ID, "h", t0.Add(time.Minute)))
		if err != nil {
			b.Fatal(err)
		}
		if err := claims.New(s).CompleteClaim(ctx, *lease, t0); err != nil {
			b.Fatal(err)
		}
		commits += 4
	}
	b.ReportMetric(float64(commits)/b.Elapsed().Seconds(), "commits/s")
}

// TestMigratesVersion1: a database written by a version-1 binary (no
// gemini_status column) is migrated on Open; its operations read back with
// no status and take one on the next commit.
func TestMigratesVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	ctx := t.Context()
	db, err := openPool(ctx, dsn(path, false), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		migrations()[0],
		`CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL) STRICT`,
		`INSERT INTO schema_version (id, version) VALUES (1, 1)`,
		`INSERT INTO operations (id, name, api_name, kind, state, update_time, version, submitted_at, settled_by,
			next_check_at, pending_since, checks, last_check, effect_status)
		 VALUES ('old', 'interactions/i1', 'interactions/i1', 'interaction', 'RUNNING', 0, 1, 0, '', 0, 0, 0, '', '')`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("build a version-1 database: %v", err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openAt(t, path)
	op, err := s.GetOperation(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if op.State != lifecycle.Running || op.GeminiStatus != "" {
		t.Fatalf("migrated operation: state %s gemini status %q", op.State, op.GeminiStatus)
	}
	op.GeminiStatus = "requires_continuation"
	if _, _, err := claims.New(s).CommitOperation(ctx, op, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetOperation(ctx, "old"); err != nil || got.GeminiStatus != "requires_continuation" {
		t.Fatalf("after commit: %q, %v", got.GeminiStatus, err)
	}
	var v int
	if err := s.reader.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("schema version %d, %v", v, err)
	}
}

// The version constant and the migration list move together: a migration
// added without raising the version would never run (two branches each
// added a version 2 and one of them went unapplied).
func TestSchemaVersionCountsTheMigrations(t *testing.T) {
	if n := len(migrations()); schemaVersion != n {
		t.Fatalf("schemaVersion = %d, but there are %d migrations", schemaVersion, n)
	}
}

// TestEmptyListsWrittenBeforeReadAsNil: rows written while empty lists were
// stored as "[]" (not NULL) read them back as nil, as every adapter does.
func TestEmptyListsWrittenBeforeReadAsNil(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	if _, _, err := claims.New(s).CommitOperation(ctx, ledgertest.Op("old"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.ExecContext(ctx, `UPDATE operations SET history = '[]', conflicts = '[]', replays = '[]' WHERE id = 'old'`); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetOperation(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if got.History != nil || got.Conflicts != nil || got.Replays != nil {
		t.Fatalf("history %#v, conflicts %#v, replays %#v; want all nil", got.History, got.Conflicts, got.Replays)
	}
}

// TestMigratesBuckets: a database written before the bucket column (schema
// version 7) opens with every row's bucket backfilled, so a pass over a
// range of buckets finds its operations.
func TestMigratesBuckets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v7.db")
	ctx := t.Context()
	s := openAt(t, path)
	op := ledgertest.Op("b1")
	op.NextCheckAt = t0
	if _, err := s.Apply(ctx, ledger.PutOperation(op)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.ExecContext(ctx, `DROP INDEX operations_bucket_next_check_at; DROP INDEX operations_bucket_stuck_from;
ALTER TABLE operations DROP COLUMN bucket; DROP TABLE intents; ALTER TABLE operations DROP COLUMN intent;
UPDATE schema_version SET version = 7`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	b := shard.Of("b1")
	rg := shard.Range{Lo: b, Hi: b + 1}
	if due, err := s.DueOperations(ctx, rg, t0, ledger.DueCursor{}, 10); err != nil || len(due) != 1 {
		t.Fatalf("due in %v after migration = %v, %v; want b1", rg, due, err)
	}
	if stuck, err := s.StuckOperations(ctx, rg, t0, 10); err != nil || len(stuck) != 1 {
		t.Fatalf("stuck in %v after migration = %v, %v; want b1", rg, stuck, err)
	}
}

// TestMigratesIntents: a database written before intents (schema version
// 9) opens with its operations bound to no intent, and takes intents.
func TestMigratesIntents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v9.db")
	ctx := t.Context()
	s := openAt(t, path)
	if _, err := s.Apply(ctx, ledger.PutOperation(ledgertest.Op("i1"))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.ExecContext(ctx, `DROP TABLE intents; ALTER TABLE operations DROP COLUMN intent;
UPDATE schema_version SET version = 9`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	op, err := s.GetOperation(ctx, "i1")
	if err != nil || op.Intent != "" {
		t.Fatalf("after migration: %+v, %v; want the operation, bound to no intent", op, err)
	}
	in := ledgertest.Intent("k1", t0)
	op.Intent = in.Key
	if _, err := s.Apply(ctx, ledger.PutOperation(op), ledger.PutIntent(ledgertest.Bind(in, "i1", t0))); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetIntent(ctx, "k1"); err != nil || got.Name != "batches/i1" {
		t.Fatalf("intent after migration: %+v, %v", got, err)
	}
}

// TestApplyErrorNamesEveryWrite: the name of an Apply call is built only
// for an error, and still names the call and each of its writes.
func TestApplyErrorNamesEveryWrite(t *testing.T) {
	s := openTemp(t)
	op := ledgertest.Op("n1")
	if _, err := s.Apply(t.Context(), ledger.PutOperation(op), ledger.PutClaim(*ledgertest.Claim("n1", "h", time.Now()))); err != nil {
		t.Fatal(err)
	}
	// The same creates again: both exist, so the first is a conflict.
	_, err := s.Apply(t.Context(), ledger.PutOperation(op), ledger.PutClaim(*ledgertest.Claim("n1", "h", time.Now())))
	if !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("second create = %v, want ErrConflict", err)
	}
	if want := "sqlite: apply operation n1 claim n1: operation n1: "; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q, want it to begin %q", err, want)
	}
}

// TestMigratesDeliveryActor: a database written before console actions
// (schema version 10) keeps its delivery log, each entry with no actor,
// and takes entries with one.
func TestMigratesDeliveryActor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v10.db")
	ctx := t.Context()
	s := openAt(t, path)
	old := deliverylog.Entry{At: t0, Source: deliverylog.SourceWebhook, DeliveryID: "msg_1", Outcome: "completed", Answer: 200}
	if err := s.AppendDeliveries(ctx, "a1", []deliverylog.Entry{old}, deliverylog.Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.ExecContext(ctx, `ALTER TABLE delivery_entries DROP COLUMN actor;
UPDATE schema_version SET version = 10`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	act := deliverylog.Entry{At: t0.Add(time.Second), Source: deliverylog.SourceConsole, Status: "replay", Actor: "session:0a1b2c3d", Outcome: "replayed"}
	if err := s.AppendDeliveries(ctx, "a1", []deliverylog.Entry{act}, deliverylog.Retention{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListDeliveries(ctx, "a1")
	if err != nil || len(got) != 2 || got[0].Actor != act.Actor || got[1].Actor != "" || got[1].DeliveryID != "msg_1" {
		t.Fatalf("after migration: %+v, %v; want the console entry with its actor over the old one with none", got, err)
	}
}
