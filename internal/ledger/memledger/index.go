package memledger

import (
	"cmp"
	"slices"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/shard"
)

// orderKey is an operation's place in one of the indexed orders: a time,
// then the id.
type orderKey struct {
	at time.Time
	id string
}

func compareKeys(a, b orderKey) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.id, b.id)) }

// orderIndex keeps, per bucket, the keys of the operations in one order,
// sorted, as the other stores keep an index per (bucket, time, id): a due
// or stuck query reads the front of each bucket in its range, never every
// operation, so a simulation of a million operations runs in minutes. A
// key is kept only while the operation is in the order (a due time is
// set; not terminal with a stuck key).
type orderIndex [shard.Buckets][]orderKey

func (x *orderIndex) remove(k orderKey) {
	b := &x[shard.Of(k.id)]
	if i, ok := slices.BinarySearchFunc(*b, k, compareKeys); ok {
		*b = slices.Delete(*b, i, i+1)
	}
}

func (x *orderIndex) insert(k orderKey) {
	b := &x[shard.Of(k.id)]
	if i, ok := slices.BinarySearchFunc(*b, k, compareKeys); !ok {
		*b = slices.Insert(*b, i, k)
	}
}

// front returns, in order, up to limit keys of the buckets of rg that are
// strictly after `after` and whose time is at or before upTo.
func (x *orderIndex) front(rg shard.Range, after orderKey, upTo time.Time, limit int) []orderKey {
	var out []orderKey
	for b := rg.Lo; b < rg.Hi; b++ {
		keys := x[b]
		i, found := slices.BinarySearchFunc(keys, after, compareKeys)
		if found {
			i++
		}
		for n := 0; i < len(keys) && n < limit && !keys[i].at.After(upTo); i, n = i+1, n+1 {
			out = append(out, keys[i])
		}
	}
	slices.SortFunc(out, compareKeys)
	return out[:min(limit, len(out))]
}

// count returns how many keys of the buckets of rg have a time at or
// before upTo.
func (x *orderIndex) count(rg shard.Range, upTo time.Time) int64 {
	var n int64
	for b := rg.Lo; b < rg.Hi; b++ {
		keys := x[b]
		i, _ := slices.BinarySearchFunc(keys, orderKey{at: upTo, id: "\U0010FFFF"}, compareKeys)
		n += int64(i)
	}
	return n
}

// dueKey and stuckKey are op's keys in the due and stuck orders, and
// whether it is in them (the same conditions as the other stores' partial
// indexes: a next check; not terminal with a stuck key).
func dueKey(o ledger.Operation) (orderKey, bool) {
	return orderKey{at: o.NextCheckAt, id: o.ID}, !o.NextCheckAt.IsZero()
}

func stuckKey(o ledger.Operation) (orderKey, bool) {
	return orderKey{at: o.StuckFrom, id: o.ID}, !o.State.Terminal() && !o.StuckFrom.IsZero()
}

// reindex moves op from its keys as old to its keys as now; the caller
// holds the lock. Every write that may change NextCheckAt, StuckFrom or
// State calls it (CommitOperation, updateOp).
func (s *Store) reindex(old *ledger.Operation, now ledger.Operation) {
	for _, o := range []struct {
		x   *orderIndex
		key func(ledger.Operation) (orderKey, bool)
	}{{&s.due, dueKey}, {&s.stuck, stuckKey}} {
		if old != nil {
			if k, ok := o.key(*old); ok {
				o.x.remove(k)
			}
		}
		if k, ok := o.key(now); ok {
			o.x.insert(k)
		}
	}
}

// indexed returns copies of the kept operations of keys (skipping any no
// longer kept), counting the reads as selectOps does.
func (s *Store) indexed(keys []orderKey, limit int) ([]ledger.Operation, error) {
	s.counts.Reads.Add(int64(max(1, min(limit, len(keys)))))
	out := make([]ledger.Operation, 0, len(keys))
	for _, k := range keys {
		so, ok := s.ops[k.id]
		if !ok {
			continue
		}
		o, err := so.operation()
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}
