package ledgertest

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/shard"
)

// testRangedQueries: DueOperations, CountDue and StuckOperations over a
// range of buckets answer exactly the operations of those buckets, in the
// order of the whole ledger, for ranges of one bucket, of the 16-bucket
// shards of a 4-way split, of the 32-bucket halves (more than one Firestore
// `in` filter takes) and of every bucket; paging with the cursor visits
// each once.
func testRangedQueries(t *testing.T, s ledger.Ledger) {
	const n = 120
	type row struct {
		id          string
		bucket      int
		next, stuck time.Time
	}
	var rows []row
	for i := range n {
		op := Op(fmt.Sprintf("g%03d", i))
		// Ten due times, so ties are ordered by id; every operation is
		// due at t0+10m and stuck at t0 (submitted 7 h before).
		op.NextCheckAt = t0.Add(time.Duration(i%10) * time.Minute)
		op.SubmittedAt = t0.Add(-7*time.Hour + time.Duration(i%7)*time.Minute)
		mustCommit(t, s, op, nil)
		rows = append(rows, row{op.ID, shard.Of(op.ID), op.NextCheckAt, op.SubmittedAt})
	}
	// A settled operation is in no order, whatever its bucket.
	settled := Op("g-settled")
	mustCommit(t, s, settled, nil)
	mustCommit(t, s, terminal(mustGet(t, s, settled.ID), t0), nil)

	split2, _ := shard.Split(2)
	split4, _ := shard.Split(4)
	ranges := append(append([]shard.Range{shard.All(), {Lo: rows[0].bucket, Hi: rows[0].bucket + 1}}, split2...), split4...)
	now := t0.Add(5 * time.Minute)
	for _, rg := range ranges {
		var wantDue, wantStuck []row
		for _, r := range rows {
			if rg.Contains(r.bucket) && !r.next.After(now) {
				wantDue = append(wantDue, r)
			}
			if rg.Contains(r.bucket) {
				wantStuck = append(wantStuck, r)
			}
		}
		slices.SortFunc(wantDue, func(a, b row) int { return cmp.Or(a.next.Compare(b.next), cmp.Compare(a.id, b.id)) })
		slices.SortFunc(wantStuck, func(a, b row) int { return cmp.Or(a.stuck.Compare(b.stuck), cmp.Compare(a.id, b.id)) })
		idsOf := func(rs []row) []string {
			out := []string{}
			for _, r := range rs {
				out = append(out, r.id)
			}
			return out
		}
		if len(wantDue) == 0 {
			t.Fatalf("range %v: no due operation among %d: the test proves nothing", rg, n)
		}
		// Pages of 7: each due operation of the range once, in order.
		paged := []string{}
		var cur ledger.DueCursor
		for range n {
			page, err := s.DueOperations(t.Context(), rg, now, cur, 7)
			if err != nil {
				t.Fatalf("range %v: %v", rg, err)
			}
			paged = append(paged, ids(page)...)
			if len(page) < 7 {
				break
			}
			cur = ledger.After(page[len(page)-1])
		}
		if !same(paged, idsOf(wantDue)) {
			t.Errorf("range %v: due paged = %v\nwant %v", rg, paged, idsOf(wantDue))
		}
		if c, err := s.CountDue(t.Context(), rg, now); err != nil || c != int64(len(wantDue)) {
			t.Errorf("range %v: CountDue = %d, %v; want %d", rg, c, err, len(wantDue))
		}
		limit := min(10, len(wantStuck))
		stuck, err := s.StuckOperations(t.Context(), rg, t0.Add(-6*time.Hour), limit)
		if err != nil {
			t.Fatalf("range %v: %v", rg, err)
		}
		if !same(ids(stuck), idsOf(wantStuck[:limit])) {
			t.Errorf("range %v: stuck = %v, want %v", rg, ids(stuck), idsOf(wantStuck[:limit]))
		}
	}
}
