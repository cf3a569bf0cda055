package reconcile

import "testing"

// TestWindowBacksOffAndRecovers: pushback halves the bound down to one,
// and each bound's worth of answered checks raises it by one, back to the
// configured concurrency and no further.
func TestWindowBacksOffAndRecovers(t *testing.T) {
	w := newWindow(8)
	for i := range 8 {
		if !w.tryAcquire() {
			t.Fatalf("slot %d of 8 refused", i+1)
		}
	}
	if w.tryAcquire() {
		t.Fatal("a ninth slot was given with concurrency 8")
	}
	w.release(true) // 7 in flight, bound 4
	if w.tryAcquire() {
		t.Fatal("a slot was given with 7 in flight after the bound halved to 4")
	}
	for range 3 {
		w.release(true) // bound 2, then 1, then 1
	}
	if w.limit != 1 || w.smallest() != 1 {
		t.Fatalf("bound %d, lowest %d after four pushbacks; want 1, 1", w.limit, w.smallest())
	}
	for range 4 {
		w.release(false) // drains the four left in flight; at bound 1 one answer raises it to 2, two more to 3
	}
	if w.inflight != 0 || w.limit != 3 {
		t.Fatalf("in flight %d, bound %d; want 0, 3", w.inflight, w.limit)
	}
	for range 40 {
		if !w.tryAcquire() {
			t.Fatalf("no slot with bound %d and %d in flight", w.limit, w.inflight)
		}
		w.release(false)
	}
	if w.limit != 8 {
		t.Fatalf("bound %d after many answers, want back at 8 and no further", w.limit)
	}
}
