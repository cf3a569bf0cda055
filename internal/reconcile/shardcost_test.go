package reconcile_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/shard"
	"github.com/lrosink/lrosink/internal/testutil"
)

// shardPassReads seeds n pending operations, all due, on the Firestore
// emulator, runs the 4 shard passes of a 4-way split and checks, for each,
// that each pass read no more than one document per operation it checked
// plus one per page of its due query and two fixed reads (the backlog count
// and the stuck query, each billed one read when empty; a third, the
// oldest due operation, when some are left for the next pass): the `in`
// filter on bucket reads only the pass's own operations (P2 per shard). It
// returns each shard's reads and checks over its passes.
func shardPassReads(tb testing.TB, n int) (reads, checked []int64) {
	tb.Helper()
	fs := testutil.FirestoreLedger(tb)
	w := newWorldOn(tb, 0, fs, func() int64 { r, _, _ := fs.Counts().Snapshot(); return r })
	ctx := tb.Context()
	now := w.clock.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var inBucket [shard.Buckets]int
	for i := range n {
		id := fmt.Sprintf("sp-%06d", i)
		inBucket[shard.Of("gemini:batches%2F"+id)]++
		w.fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_RUNNING", UpdateTime: tDone})
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			op := ledger.Operation{ID: "gemini:batches%2F" + id, Name: "batches/" + id, APIName: "batches/" + id, Kind: "batch",
				State: lifecycle.Pending, UpdateTime: now, SubmittedAt: now, NextCheckAt: now.Add(time.Duration(i%100) * time.Second)}
			if _, err := w.store.Apply(ctx, ledger.PutOperation(op)); err != nil {
				tb.Error(err)
			}
		}()
	}
	wg.Wait()
	w.clock.Advance(5 * time.Minute)
	ranges, err := shard.Split(4)
	if err != nil {
		tb.Fatal(err)
	}
	const pageSize = 100 // reconcile's default
	var total int64
	for _, rg := range ranges {
		// A pass checks at most MaxOperations (1,000): passes repeat until
		// the range has nothing due, each read-checked on its own.
		var got int64
		checks := 0
		for range n {
			r0 := w.reads()
			s, err := w.rec.PassRange(ctx, rg)
			if err != nil || s.Partial {
				tb.Fatalf("PassRange(%v) = %+v, %v", rg, s, err)
			}
			pass := w.reads() - r0
			// Fixed: the backlog count, the stuck query, and the first
			// due operation when some are left.
			pages, fixed := int64(s.Checked/pageSize+1), int64(2)
			if s.DueBacklog > 0 {
				fixed++
			}
			if pass > int64(s.Checked)+pages+fixed {
				tb.Errorf("PassRange(%v) read %d documents for %d checks (%d pages): want at most checks + pages + %d", rg, pass, s.Checked, pages, fixed)
			}
			got += pass
			checks += s.Checked
			if s.DueBacklog == 0 {
				break
			}
		}
		want := 0
		for b := rg.Lo; b < rg.Hi; b++ {
			want += inBucket[b]
		}
		if checks != want {
			tb.Errorf("PassRange(%v) checked %d, want the %d operations of its buckets", rg, checks, want)
		}
		reads, checked = append(reads, got), append(checked, int64(checks))
		total += int64(checks)
	}
	if total != int64(n) {
		tb.Errorf("the 4 shard passes checked %d operations in all, want each of %d once", total, n)
	}
	return reads, checked
}

// TestShardPassReadsOnlyItsOwn: P2 per shard on the Firestore emulator,
// with 1,000 pending operations (make test); BenchmarkShardPassReads runs
// 20,000 (docs/BENCHMARKS.md).
func TestShardPassReadsOnlyItsOwn(t *testing.T) {
	reads, checked := shardPassReads(t, 1_000)
	t.Logf("reads per shard pass %v for checks %v", reads, checked)
}

// BenchmarkShardPassReads is the 20,000-operation run of the acceptance:
// run with -benchtime 1x under scripts/with-emulators.sh.
func BenchmarkShardPassReads(b *testing.B) {
	for b.Loop() {
		reads, checked := shardPassReads(b, 20_000)
		b.Logf("reads per shard pass %v for checks %v", reads, checked)
	}
}
