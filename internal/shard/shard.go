// Package shard divides the ledger's operations into a fixed set of virtual
// buckets, so that a reconcile pass can cover part of the ledger and several
// passes can cover all of it in parallel.
//
// An operation's bucket is a pure function of its document id, computed when
// the operation is first stored and never changed: the number of buckets is
// fixed (Buckets), and the number of shards (passes) is only a way of
// grouping contiguous bucket ranges, so it can change between deployments
// without moving a document. It is a leaf: it imports nothing of lrosink's.
package shard

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Buckets is the number of virtual buckets. It bounds the number of shards
// a deployment can use; changing it would move documents between buckets,
// so it is fixed.
const Buckets = 64

// Of returns the bucket of the operation whose document id is docID:
// FNV-1a (32 bit) of the id, modulo Buckets. FNV spreads the ids of one
// kind ("batches/…", "operations/…") evenly (TestOfSpreadsEvenly).
func Of(docID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(docID)) // a hash.Hash never fails to write
	return int(h.Sum32() % Buckets)
}

// Range is the half-open bucket range [Lo, Hi) one pass covers.
type Range struct {
	Lo, Hi int
}

// All is the range of every bucket: an unsharded pass.
func All() Range { return Range{Lo: 0, Hi: Buckets} }

// IsAll reports whether r covers every bucket.
func (r Range) IsAll() bool { return r == All() }

// Contains reports whether bucket b is in r.
func (r Range) Contains(b int) bool { return r.Lo <= b && b < r.Hi }

// Len is the number of buckets in r.
func (r Range) Len() int { return r.Hi - r.Lo }

// ErrBadRange marks a range that is empty or outside [0, Buckets).
var ErrBadRange = errors.New("bad bucket range")

// Validate reports why r is not a usable range, or nil.
func (r Range) Validate() error {
	if r.Lo < 0 || r.Hi > Buckets || r.Lo >= r.Hi {
		return fmt.Errorf("%w: [%d, %d) must be non-empty within [0, %d)", ErrBadRange, r.Lo, r.Hi, Buckets)
	}
	return nil
}

// String is the range as Parse reads it: "LO-HI" (HI exclusive).
func (r Range) String() string { return strconv.Itoa(r.Lo) + "-" + strconv.Itoa(r.Hi) }

// Parse reads a range written by String ("0-16"), and checks it.
func Parse(s string) (Range, error) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		return Range{}, fmt.Errorf("%w: %q: want LO-HI, e.g. 0-16", ErrBadRange, s)
	}
	l, err1 := strconv.Atoi(lo)
	h, err2 := strconv.Atoi(hi)
	if err1 != nil || err2 != nil {
		return Range{}, fmt.Errorf("%w: %q: want LO-HI with whole numbers, e.g. 0-16", ErrBadRange, s)
	}
	r := Range{Lo: l, Hi: h}
	return r, r.Validate()
}

// Split divides every bucket into n contiguous ranges whose sizes differ by
// at most one, in bucket order: shard i of n covers Split(n)[i].
func Split(n int) ([]Range, error) {
	if n < 1 || n > Buckets {
		return nil, fmt.Errorf("%w: %d shards: want 1 to %d", ErrBadRange, n, Buckets)
	}
	out := make([]Range, n)
	lo := 0
	for i := range n {
		size := Buckets / n
		if i < Buckets%n {
			size++
		}
		out[i] = Range{Lo: lo, Hi: lo + size}
		lo += size
	}
	return out, nil
}
