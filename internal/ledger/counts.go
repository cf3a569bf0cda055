package ledger

import "sync/atomic"

// Counts tallies what the Firestore billing would count: a read per document
// read (a query costs at least one), a write per document written by a
// commit that succeeded, and a commit per commit attempted. The Firestore
// adapter counts its real calls; the memory ledger imitates them, so
// benchmarks and cost tests read both the same way.
//
// The delivery log (package deliverylog) is counted apart, in
// DeliveryReads and DeliveryWrites: it is a store of its own, and the cost
// tests pin that a duplicate costs the ledger one read and no write with the
// log enabled.
type Counts struct {
	Reads, Writes, Commits        atomic.Int64
	DeliveryReads, DeliveryWrites atomic.Int64
}

// Snapshot returns the current tallies.
func (c *Counts) Snapshot() (reads, writes, commits int64) {
	return c.Reads.Load(), c.Writes.Load(), c.Commits.Load()
}
