package shard

import (
	"errors"
	"fmt"
	"testing"
)

func TestSplitCoversEveryBucketOnce(t *testing.T) {
	for n := 1; n <= Buckets; n++ {
		rs, err := Split(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != n {
			t.Fatalf("Split(%d) gave %d ranges", n, len(rs))
		}
		seen := make([]int, Buckets)
		minLen, maxLen := Buckets, 0
		for _, r := range rs {
			if err := r.Validate(); err != nil {
				t.Fatalf("Split(%d): %v", n, err)
			}
			for b := r.Lo; b < r.Hi; b++ {
				seen[b]++
			}
			minLen, maxLen = min(minLen, r.Len()), max(maxLen, r.Len())
		}
		for b, c := range seen {
			if c != 1 {
				t.Fatalf("Split(%d): bucket %d covered %d times", n, b, c)
			}
		}
		if maxLen-minLen > 1 {
			t.Fatalf("Split(%d): range sizes %d..%d differ by more than one", n, minLen, maxLen)
		}
	}
	if rs, _ := Split(1); !rs[0].IsAll() {
		t.Fatalf("Split(1) = %v, want All", rs)
	}
	for _, n := range []int{0, -1, Buckets + 1} {
		if _, err := Split(n); !errors.Is(err, ErrBadRange) {
			t.Errorf("Split(%d) err = %v, want ErrBadRange", n, err)
		}
	}
}

func TestParseReadsString(t *testing.T) {
	for _, r := range []Range{All(), {0, 1}, {16, 32}, {63, 64}} {
		got, err := Parse(r.String())
		if err != nil || got != r {
			t.Errorf("Parse(%q) = %v, %v; want %v", r.String(), got, err, r)
		}
	}
	for _, s := range []string{"", "3", "a-b", "5-5", "6-5", "-1-3", "0-65", "0-16-32"} {
		if _, err := Parse(s); !errors.Is(err, ErrBadRange) {
			t.Errorf("Parse(%q) err = %v, want ErrBadRange", s, err)
		}
	}
}

// TestOfSpreadsEvenly: ids of one shape land in every bucket, none with more
// than twice its share, so shards get comparable work.
func TestOfSpreadsEvenly(t *testing.T) {
	const n = 64000
	counts := make([]int, Buckets)
	for i := range n {
		b := Of(fmt.Sprintf("batches~2Fbatch-%08d", i))
		if b < 0 || b >= Buckets {
			t.Fatalf("Of gave bucket %d", b)
		}
		counts[b]++
	}
	for b, c := range counts {
		if c < n/Buckets/2 || c > 2*n/Buckets {
			t.Errorf("bucket %d has %d of %d ids (share %d)", b, c, n, n/Buckets)
		}
	}
	if Of("x") != Of("x") {
		t.Fatal("Of is not stable")
	}
}
