package sqliteledger

import (
	"context"
	"fmt"
	"strings"

	"github.com/lrosink/lrosink/internal/ledger"
)

// pageQuery builds the statement of PageOperations (count false) or
// CountOperations (count true) for f, with the cursor condition when
// withCursor. Each combination of f's fields has its own index (schema
// version 2), ending in the order column and id, so the query is an index
// range read in order: TestQueryPlans explains every combination. A stuck
// filter orders by pending_since, which equals submitted_at while an
// operation is not terminal (and is NULL after): the same order, on the
// partial indexes that hold only the operations that can be stuck.
func pageQuery(f ledger.Filter, withCursor, count bool) (string, []any) {
	col, index := "submitted_at", "operations_"
	var where []string
	var args []any
	if f.Kind != "" {
		index += "kind_"
		where, args = append(where, "kind = ?"), append(args, string(f.Kind))
	}
	if f.State != "" {
		index += "state_"
		where, args = append(where, "state = ?"), append(args, string(f.State))
	}
	if !f.StuckAt.IsZero() {
		col = "pending_since"
		where, args = append(where, "pending_since <= ?"), append(args, micros(f.StuckAt))
	}
	index += col
	// INDEXED BY: without statistics the planner may prefer a shorter index
	// and filter the rest; naming the index makes the plan the one above,
	// and a query the index cannot serve an error instead of a scan.
	var b strings.Builder
	if count {
		b.WriteString("SELECT COUNT(*) FROM operations INDEXED BY " + index)
	} else {
		b.WriteString("SELECT " + opColumns + " FROM operations INDEXED BY " + index)
	}
	if withCursor {
		where = append(where, "("+col+", id) < (?, ?)")
	}
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	if !count {
		fmt.Fprintf(&b, " ORDER BY %s DESC, id DESC LIMIT ?", col)
	}
	return b.String(), args
}

// PageOperations implements ledger.Queries.
func (s *Store) PageOperations(ctx context.Context, f ledger.Filter, after ledger.ListCursor, limit int) ([]ledger.Operation, error) {
	q, args := pageQuery(f, !after.IsZero(), false)
	if !after.IsZero() {
		args = append(args, micros(after.SubmittedAt), after.ID)
	}
	return s.queryOps(ctx, "page operations", q, limit, args...)
}

// CountOperations implements ledger.Queries: COUNT(*) over the same index,
// which covers every column the filter reads.
func (s *Store) CountOperations(ctx context.Context, f ledger.Filter) (int64, error) {
	q, args := pageQuery(f, false, true)
	var n int64
	if err := s.reader.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fail(ctx, "count operations", err)
	}
	return n, nil
}

// sqlSearchOperations is a range read on the primary key: ids are a
// prefix-preserving escape of the canonical name (ledger.NameRange), read
// on strictly after the cursor ("" is before every id).
const sqlSearchOperations = `SELECT ` + opColumns + ` FROM operations
WHERE id >= ? AND id > ? AND id < ? ORDER BY id LIMIT ?`

// SearchOperations implements ledger.Queries.
func (s *Store) SearchOperations(ctx context.Context, prefix, after string, limit int) ([]ledger.Operation, error) {
	lo, hi, err := ledger.NameRange(prefix)
	if err != nil {
		return nil, err
	}
	return s.queryOps(ctx, "search operations", sqlSearchOperations, limit, lo, after, hi)
}
