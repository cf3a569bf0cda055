package recall_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/recall"
	"github.com/lrosink/lrosink/internal/testutil"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestRemembersForItsTTL(t *testing.T) {
	clk := testutil.NewClock(t0)
	m := recall.New[string](10, clk.Now)
	m.Put("a", "one", time.Minute)
	m.Put("b", "two", time.Hour)
	if v, ok := m.Get("a"); !ok || v != "one" {
		t.Fatalf("a = %q, %v", v, ok)
	}
	clk.Advance(time.Minute - time.Nanosecond)
	if _, ok := m.Get("a"); !ok {
		t.Fatal("a forgotten before its TTL")
	}
	clk.Advance(time.Nanosecond)
	if _, ok := m.Get("a"); ok {
		t.Fatal("a remembered at its TTL")
	}
	if v, ok := m.Get("b"); !ok || v != "two" {
		t.Fatalf("b = %q, %v", v, ok)
	}
	if n := m.Len(); n != 1 {
		t.Fatalf("%d entries held, want the expired one dropped on its read", n)
	}
	// A Put replaces the value and the TTL.
	m.Put("b", "three", time.Second)
	clk.Advance(time.Second)
	if _, ok := m.Get("b"); ok {
		t.Fatal("b kept its old TTL")
	}
	if _, ok := m.Get("never"); ok {
		t.Fatal("a key never put is remembered")
	}
}

// TestBounded: a full memory never holds more than its size; it drops what
// expired before anything live, and then the least recently used.
func TestBounded(t *testing.T) {
	clk := testutil.NewClock(t0)
	m := recall.New[int](3, clk.Now)
	m.Put("old", 1, time.Second)
	m.Put("x", 2, time.Hour)
	m.Put("y", 3, time.Hour)
	clk.Advance(time.Second)
	m.Put("z", 4, time.Hour) // "old" expired: it makes the room
	if m.Len() != 3 || m.Evicted() != 0 {
		t.Fatalf("len %d evicted %d, want 3 and 0", m.Len(), m.Evicted())
	}
	if _, ok := m.Get("x"); !ok { // x is now the most recently used
		t.Fatal("x dropped")
	}
	m.Put("w", 5, time.Hour) // full of live entries: y, the least recently used, goes
	if _, ok := m.Get("y"); ok {
		t.Fatal("y kept, though least recently used")
	}
	for _, k := range []string{"x", "z", "w"} {
		if _, ok := m.Get(k); !ok {
			t.Fatalf("%s dropped", k)
		}
	}
	if m.Len() != 3 || m.Evicted() != 1 {
		t.Fatalf("len %d evicted %d, want 3 and 1", m.Len(), m.Evicted())
	}
	for i := range 100 {
		m.Put(fmt.Sprint(i), i, time.Hour)
		if m.Len() > 3 {
			t.Fatalf("len %d after %d puts", m.Len(), i+1)
		}
	}
}

func TestSizeAtLeastOne(t *testing.T) {
	m := recall.New[int](0, testutil.NewClock(t0).Now)
	m.Put("a", 1, time.Hour)
	m.Put("b", 2, time.Hour)
	if _, ok := m.Get("b"); !ok || m.Len() != 1 {
		t.Fatalf("len %d, want the one last put", m.Len())
	}
}

func TestConcurrentUse(t *testing.T) {
	clk := testutil.NewClock(t0)
	m := recall.New[int](50, clk.Now)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := fmt.Sprint((g*7 + i) % 80)
				m.Put(k, i, time.Duration(1+i%3)*time.Second)
				m.Get(k)
				if i%50 == 0 {
					clk.Advance(time.Second)
				}
			}
		})
	}
	wg.Wait()
	if m.Len() > 50 {
		t.Fatalf("len %d over the bound", m.Len())
	}
}
