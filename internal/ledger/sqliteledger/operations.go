package sqliteledger

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/shard"
)

// opColumns are the columns an operation is read from, in scanOperation's
// order; pending_since is derived on write and never read back.
const opColumns = `id, name, api_name, kind, state, gemini_status, update_time, version, submitted_at, settled_at, settled_by,
	next_check_at, checks, last_check, last_check_at, history, conflicts, user_metadata, output, error,
	effect_status, effect_lease_until, replays, stuck_alerted_at, stuck_from, intent`

// The statements, named so the query-plan test checks exactly what runs.
// sqlGetOperation is the point read (pointRead says why it is written so).
var sqlGetOperation = pointRead(opColumns, "operations")

const (
	// ON CONFLICT DO NOTHING turns "already exists" into zero rows changed,
	// which is ErrConflict, without parsing driver error codes. The
	// parameters are positional (named ones cost the driver a name lookup
	// and a string per parameter per statement): opArgs's order, with the
	// update taking id and the version read last (fenced).
	sqlInsertOperation = `INSERT INTO operations (id, name, api_name, kind, state, gemini_status, update_time, version,
	submitted_at, settled_at, settled_by, next_check_at, pending_since, checks, last_check, last_check_at,
	history, conflicts, user_metadata, output, error, effect_status, effect_lease_until, replays, stuck_alerted_at, stuck_from, bucket, intent)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING`

	sqlUpdateOperation = `UPDATE operations SET name = ?, api_name = ?, kind = ?, state = ?,
	gemini_status = ?, update_time = ?, version = ?, submitted_at = ?, settled_at = ?,
	settled_by = ?, next_check_at = ?, pending_since = ?, checks = ?,
	last_check = ?, last_check_at = ?, history = ?, conflicts = ?,
	user_metadata = ?, output = ?, error = ?, effect_status = ?,
	effect_lease_until = ?, replays = ?, stuck_alerted_at = ?,
	stuck_from = ?, bucket = ?, intent = ?
WHERE id = ? AND version = ?`

	// sqlPatchSchedule writes the reconciler's fields, fenced on the version
	// read (ledger.Write.Schedule).
	sqlPatchSchedule = `UPDATE operations SET next_check_at = ?, checks = ?, last_check = ?, last_check_at = ?,
	stuck_alerted_at = ?, stuck_from = ?, version = ?
WHERE id = ? AND version = ?`

	// The row value is a range on the index (next_check_at, id).
	sqlDueOperations = `SELECT ` + opColumns + ` FROM operations
WHERE next_check_at <= ? AND (next_check_at, id) > (?, ?) ORDER BY next_check_at, id LIMIT ?`

	sqlStuckOperations = `SELECT ` + opColumns + ` FROM operations
WHERE stuck_from <= ? ORDER BY stuck_from, id LIMIT ?`

	// One bucket of a range, read in order on the index (bucket, time, id);
	// inBuckets merges the buckets of the range. For the whole ledger the
	// queries above read the order directly.
	sqlDueOperationsInBucket = `SELECT ` + opColumns + ` FROM operations
WHERE bucket = ? AND next_check_at <= ? AND (next_check_at, id) > (?, ?) ORDER BY next_check_at, id LIMIT ?`

	sqlStuckOperationsInBucket = `SELECT ` + opColumns + ` FROM operations
WHERE bucket = ? AND stuck_from <= ? ORDER BY stuck_from, id LIMIT ?`

	sqlListOperations = `SELECT ` + opColumns + ` FROM operations
ORDER BY submitted_at DESC, id DESC LIMIT ?`

	sqlListOperationsInState = `SELECT ` + opColumns + ` FROM operations
WHERE state = ? ORDER BY submitted_at DESC, id DESC LIMIT ?`
)

// opArgs returns sqlInsertOperation's arguments (the operation at
// version), in its column order: id, then every other column as
// sqlUpdateOperation sets them (fenced reorders them for the update).
func opArgs(o ledger.Operation, version int64) ([]any, error) {
	var pending any
	if !o.State.Terminal() {
		pending = nullable(o.SubmittedAt)
	}
	var js [6]any
	for i, j := range []struct {
		name string
		v    any
	}{
		{"history", ledger.StoredHistory(o.History)}, {"conflicts", ledger.StoredHistory(o.Conflicts)},
		{"user_metadata", o.UserMetadata}, {"output", o.Output}, {"error", o.Error},
		{"replays", ledger.StoredReplays(o.Replays)},
	} {
		col, err := toJSON(j.v)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", j.name, err)
		}
		if col.Valid {
			js[i] = col.String
		}
	}
	return []any{
		o.ID, o.Name, o.APIName, string(o.Kind), string(o.State), o.GeminiStatus,
		micros(lifecycle.ServerTime(o.UpdateTime)), version, micros(o.SubmittedAt), nullable(o.SettledAt),
		o.SettledBy, nullable(o.NextCheckAt), pending, o.Checks, o.LastCheck, nullable(o.LastCheckAt),
		js[0], js[1], js[2], js[3], js[4], string(o.Effect.Status), nullable(o.Effect.LeaseUntil), js[5],
		nullable(o.StuckAlertedAt), nullable(ledger.StuckKey(o)), shard.Of(o.ID), o.Intent,
	}, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanOperation(sc scanner) (ledger.Operation, error) {
	var (
		o                                                    ledger.Operation
		kind, state, effect                                  string
		updateTime, submittedAt                              int64
		settledAt, nextCheckAt, lastCheckAt, effectLease     sql.NullInt64
		stuckAlertedAt, stuckFrom                            sql.NullInt64
		history, conflicts, userMetadata, output, errj, reps sql.NullString
	)
	if err := sc.Scan(&o.ID, &o.Name, &o.APIName, &kind, &state, &o.GeminiStatus, &updateTime, &o.Rev.Version, &submittedAt,
		&settledAt, &o.SettledBy, &nextCheckAt, &o.Checks, &o.LastCheck, &lastCheckAt, &history, &conflicts,
		&userMetadata, &output, &errj, &effect, &effectLease, &reps, &stuckAlertedAt, &stuckFrom, &o.Intent); err != nil {
		return ledger.Operation{}, err
	}
	o.Kind, o.State = opname.Kind(kind), lifecycle.State(state)
	o.UpdateTime, o.SubmittedAt = fromMicros(updateTime), fromMicros(submittedAt)
	o.SettledAt, o.NextCheckAt, o.LastCheckAt = fromNullMicros(settledAt), fromNullMicros(nextCheckAt), fromNullMicros(lastCheckAt)
	o.Effect = ledger.EffectMirror{Status: ledger.ClaimStatus(effect), LeaseUntil: fromNullMicros(effectLease)}
	o.StuckAlertedAt, o.StuckFrom = fromNullMicros(stuckAlertedAt), fromNullMicros(stuckFrom)
	for _, j := range []struct {
		name string
		col  sql.NullString
		v    any
	}{
		{"history", history, &o.History}, {"conflicts", conflicts, &o.Conflicts},
		{"user_metadata", userMetadata, &o.UserMetadata}, {"output", output, &o.Output},
		{"error", errj, &o.Error}, {"replays", reps, &o.Replays},
	} {
		if err := fromJSON(j.col, j.v); err != nil {
			return ledger.Operation{}, fmt.Errorf("decode operation %s: %s: %w", o.ID, j.name, err)
		}
	}
	// Rows written before empty lists were stored as NULL hold "[]".
	o.History, o.Conflicts, o.Replays = ledger.StoredHistory(o.History), ledger.StoredHistory(o.Conflicts), ledger.StoredReplays(o.Replays)
	return o, nil
}

// GetOperation implements ledger.Reads.
func (s *Store) GetOperation(ctx context.Context, id string) (ledger.Operation, error) {
	return getOne(ctx, s.readers, "operation", sqlGetOperation, id, scanOperation)
}

// Apply implements ledger.Writes: every write in one transaction, each a
// statement that changes exactly one row when its precondition holds; if
// one does not, the transaction is rolled back whole.
func (s *Store) Apply(ctx context.Context, writes ...ledger.Write) ([]ledger.Revision, error) {
	if err := ledger.CheckWrites(writes); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	type stmt struct {
		query string
		args  []any
	}
	stmts := make([]stmt, len(writes))
	revs := make([]ledger.Revision, len(writes))
	for i, w := range writes {
		var (
			st  stmt
			err error
		)
		switch {
		case w.Op != nil:
			st.args, err = opArgs(*w.Op, w.Op.Rev.Version+1)
			st.query, st.args = fenced(sqlInsertOperation, sqlUpdateOperation, w.Op.Rev, st.args)
			revs[i] = ledger.Revision{Version: w.Op.Rev.Version + 1}
		case w.Claim != nil:
			st.query, st.args, err = claimArgs(*w.Claim, w.Claim.Rev.Version+1)
			revs[i] = ledger.Revision{Version: w.Claim.Rev.Version + 1}
		case w.Mirror != nil:
			st = stmt{sqlMirrorEffect, []any{string(w.Mirror.Effect.Status), nullable(w.Mirror.Effect.LeaseUntil), w.Mirror.OpID}}
		case w.Schedule != nil:
			v := w.Schedule
			st = stmt{sqlPatchSchedule, []any{nullable(v.NextCheckAt), v.Checks, v.LastCheck, nullable(v.LastCheckAt),
				nullable(v.StuckAlertedAt), nullable(ledger.StuckKey(*v)), v.Rev.Version + 1, v.ID, v.Rev.Version}}
			revs[i] = ledger.Revision{Version: v.Rev.Version + 1}
		case w.Intent != nil:
			st.args, err = intentArgs(*w.Intent, w.Intent.Rev.Version+1)
			st.query, st.args = fenced(sqlInsertIntent, sqlUpdateIntent, w.Intent.Rev, st.args)
			revs[i] = ledger.Revision{Version: w.Intent.Rev.Version + 1}
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite: apply %s: %w", w.Describe(), err)
		}
		stmts[i] = st
	}
	err := s.write(ctx, applyLabel(writes), func(ctx context.Context, tx *wtx) error {
		for i, st := range stmts {
			n, err := tx.exec(ctx, st.query, st.args...)
			if err != nil {
				return err
			}
			if err := affected(n, ledger.ErrConflict); err != nil {
				return fmt.Errorf("%s: %w", writes[i].Describe(), err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return revs, nil
}

// applyLabel names an Apply call in its errors, "apply" and each write
// (Describe), built only when an error needs it: per call it was a string
// per write and their concatenation.
type applyLabel []ledger.Write

func (a applyLabel) String() string {
	var b strings.Builder
	b.WriteString("apply")
	for _, w := range a {
		b.WriteString(" ")
		b.WriteString(w.Describe())
	}
	return b.String()
}

// fenced picks the statement of a put at rev: the insert (which does
// nothing if the row exists) to create, else the update fenced on the
// version read. args are the insert's, id first; the update takes the
// other columns, then id and the version read.
func fenced(insert, update string, rev ledger.Revision, args []any) (string, []any) {
	if !rev.Exists() {
		return insert, args
	}
	out := make([]any, 0, len(args)+1)
	return update, append(append(out, args[1:]...), args[0], rev.Version)
}

// queryOps runs a bounded operation query on the reader pool.
func (s *Store) queryOps(ctx context.Context, what, query string, limit int, args ...any) ([]ledger.Operation, error) {
	// LIMIT 0 or less would read nothing, or (negative) everything: neither
	// is a bounded query worth running.
	if limit <= 0 {
		return nil, nil
	}
	return queryAll(ctx, s.reader, what, query, scanOperation, append(args, limit)...)
}

// queryAll runs query and decodes every row with scan.
func queryAll[T any](ctx context.Context, db *sql.DB, what, query string, scan func(scanner) (T, error), args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fail(ctx, what, err)
	}
	defer rows.Close() //nolint:errcheck // rows.Err reports what matters
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fail(ctx, what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fail(ctx, what, err)
	}
	return out, nil
}

// DueOperations implements ledger.Queries (partial index on
// (next_check_at, id)). The zero cursor's time is far before any stored one.
// A range of buckets uses the partial index on (bucket, next_check_at, id).
func (s *Store) DueOperations(ctx context.Context, rg shard.Range, now time.Time, after ledger.DueCursor, limit int) ([]ledger.Operation, error) {
	if rg.IsAll() {
		return s.queryOps(ctx, "due operations", sqlDueOperations, limit, micros(now), micros(after.NextCheckAt), after.ID)
	}
	return inBuckets(rg, limit, ledger.ByDue, func(b int) ([]ledger.Operation, error) {
		return s.queryOps(ctx, "due operations", sqlDueOperationsInBucket, limit, b, micros(now), micros(after.NextCheckAt), after.ID)
	})
}

// inBuckets merges the first limit operations of each bucket of rg, each
// read in order by query, into the first limit of the range in order: a
// page reads up to limit rows per bucket, all from the index, none by a
// sort in SQLite. (A query over the range would sort every due row of it,
// or walk the whole ledger's due order filtering on bucket.)
func inBuckets(rg shard.Range, limit int, order func(a, b ledger.Operation) int, query func(bucket int) ([]ledger.Operation, error)) ([]ledger.Operation, error) {
	pages := make([][]ledger.Operation, 0, rg.Len())
	for b := rg.Lo; b < rg.Hi; b++ {
		ops, err := query(b)
		if err != nil {
			return nil, err
		}
		pages = append(pages, ops)
	}
	return ledger.FirstOf(limit, order, pages...), nil
}

// StuckOperations implements ledger.Queries (partial index on stuck_from;
// for a range of buckets, on (bucket, stuck_from, id)).
func (s *Store) StuckOperations(ctx context.Context, rg shard.Range, cutoff time.Time, limit int) ([]ledger.Operation, error) {
	if rg.IsAll() {
		return s.queryOps(ctx, "stuck operations", sqlStuckOperations, limit, micros(cutoff))
	}
	return inBuckets(rg, limit, ledger.ByStuck, func(b int) ([]ledger.Operation, error) {
		return s.queryOps(ctx, "stuck operations", sqlStuckOperationsInBucket, limit, b, micros(cutoff))
	})
}

// ListOperations implements ledger.Queries (index on (state, submitted_at)
// with a state, on submitted_at without).
func (s *Store) ListOperations(ctx context.Context, state lifecycle.State, limit int) ([]ledger.Operation, error) {
	if state == "" {
		return s.queryOps(ctx, "list operations", sqlListOperations, limit)
	}
	return s.queryOps(ctx, "list operations", sqlListOperationsInState, limit, string(state))
}
