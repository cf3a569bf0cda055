package sqlite

import (
	"context"
	"time"
)

// sqlCountDue counts what sqlDueOperations lists, over the same partial index.
const sqlCountDue = `SELECT COUNT(*) FROM operations WHERE next_check_at <= ?`

// CountDue implements ledger.Queries.
func (s *Store) CountDue(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	if err := s.reader.QueryRowContext(ctx, sqlCountDue, micros(now)).Scan(&n); err != nil {
		return 0, fail(ctx, "count due operations", err)
	}
	return n, nil
}
