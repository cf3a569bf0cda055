package deliverylog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultQueue bounds the entries waiting to be written.
const DefaultQueue = 4096

// writeTimeout bounds one chunk's append to the store.
const writeTimeout = 10 * time.Second

// MaxChunk bounds the operations of one AppendBatch call: on SQLite one
// writer request of up to MaxChunk upserts stays a small part of one group
// commit.
const MaxChunk = 256

// dropWarnEvery spaces the WARNING lines about dropped entries: a flood
// drops thousands a second, and one line a minute with the count says as
// much (lrosink_delivery_log_dropped_total has the running total).
const dropWarnEvery = time.Minute

// Recorder writes entries to a Store from one background goroutine, after
// the caller has answered: Record only queues (it never blocks, and drops
// the entry when the queue is full, counted in Dropped). The goroutine takes
// everything queued, keeps the newest Keep per operation (a flood of
// duplicates of one delivery becomes one append of at most Keep entries) and
// writes them through AppendBatch, at most MaxChunk operations per call (on
// SQLite, one writer request each; elsewhere a few appends in flight). A
// store that answers one operation per commit would let the queue fill.
//
// Drops are never silent: Dropped counts them (the metric
// lrosink_delivery_log_dropped_total) and a WARNING "delivery log: entries
// dropped" says how many, at most once a minute.
//
// What a crash can lose: the entries queued and not yet written, normally
// those of the last few milliseconds (at most the queue). Close, called on
// a graceful stop, writes them first. The log is evidence for people, not
// state: nothing the door decides depends on it.
type Recorder struct {
	store   Store
	ret     Retention
	log     *slog.Logger
	ch      chan item
	quit    chan struct{}
	done    chan struct{}
	stop    sync.Once
	dropped atomic.Int64
	// pending counts the entries queued and not yet written (or failed):
	// what Close reports as unwritten when its budget ends.
	pending atomic.Int64
	now     func() time.Time
	// warnedAt (unix ns, 0: never) and warnedDropped (Dropped then) are
	// the last drop WARNING's; whoever swaps warnedAt logs the next one.
	warnedAt      atomic.Int64
	warnedDropped atomic.Int64
}

// RecorderOption changes a Recorder's defaults.
type RecorderOption func(*Recorder)

// WithClock sets the clock that spaces the drop WARNINGs (tests).
func WithClock(now func() time.Time) RecorderOption {
	return func(r *Recorder) { r.now = now }
}

type item struct {
	opID  string
	e     Entry
	flush chan struct{} // non-nil: a flush marker, closed once all before it is written
}

// NewRecorder starts a recorder writing to s; Close stops it.
func NewRecorder(s Store, r Retention, log *slog.Logger, opts ...RecorderOption) *Recorder {
	rec := &Recorder{store: s, ret: r.WithDefaults(), log: log, now: time.Now,
		ch: make(chan item, DefaultQueue), quit: make(chan struct{}), done: make(chan struct{})}
	for _, o := range opts {
		o(rec)
	}
	go rec.run()
	return rec
}

// Record queues e for operation opID; it never blocks.
func (r *Recorder) Record(opID string, e Entry) {
	if opID == "" {
		return
	}
	select {
	case <-r.quit:
		r.drop()
		return
	default:
	}
	r.pending.Add(1)
	select {
	case r.ch <- item{opID: opID, e: e}:
	default:
		r.pending.Add(-1)
		r.drop()
	}
}

// drop counts a dropped entry and logs the WARNING when the last one is a
// minute old (or none was logged): the first drop of a flood is seen at
// once, even while the store holds the writer up.
func (r *Recorder) drop() {
	n := r.dropped.Add(1)
	now := r.now()
	last := r.warnedAt.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < dropWarnEvery {
		return
	}
	if !r.warnedAt.CompareAndSwap(last, now.UnixNano()) {
		return // another caller logs this one
	}
	since := n - r.warnedDropped.Swap(n)
	r.log.Warn("delivery log: entries dropped", "dropped", max(since, 1), "dropped_total", n, "queue", cap(r.ch))
}

// Dropped counts entries not queued because the queue was full or the
// recorder closed.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// ErrClosed: the recorder was closed.
var ErrClosed = errors.New("delivery log recorder closed")

// Flush waits until every entry recorded before it is written (or failed).
func (r *Recorder) Flush(ctx context.Context) error {
	select {
	case <-r.quit:
		return ErrClosed
	default:
	}
	f := make(chan struct{})
	select {
	case r.ch <- item{flush: f}:
	case <-ctx.Done():
		return fmt.Errorf("delivery log flush: %w", context.Cause(ctx))
	}
	select {
	case <-f:
		return nil
	case <-r.done:
		// Closed meanwhile: everything queued before Close was written.
		return nil
	case <-ctx.Done():
		return fmt.Errorf("delivery log flush: %w", context.Cause(ctx))
	}
}

// Close writes what is queued and stops the goroutine, within ctx.
func (r *Recorder) Close(ctx context.Context) error {
	r.stop.Do(func() { close(r.quit) })
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		// Checked here, not before the select: with nothing left to write
		// the goroutine ends on its own, and a select with both ready picks
		// at random, so a spent budget must not report a loss that is none.
		if n := r.pending.Load(); n > 0 {
			return fmt.Errorf("delivery log: %d entries may be unwritten: %w", n, context.Cause(ctx))
		}
		return nil
	}
}

func (r *Recorder) run() {
	defer close(r.done)
	for {
		select {
		case it := <-r.ch:
			r.batch(it)
		case <-r.quit:
			for {
				select {
				case it := <-r.ch:
					r.batch(it)
				default:
					return
				}
			}
		}
	}
}

// batch writes it and everything queued behind it.
func (r *Recorder) batch(first item) {
	byOp := map[string][]Entry{}
	var order []string
	var flushes []chan struct{}
	taken := int64(0)
	defer func() { r.pending.Add(-taken) }()
	add := func(it item) {
		if it.flush != nil {
			flushes = append(flushes, it.flush)
			return
		}
		taken++
		if _, ok := byOp[it.opID]; !ok {
			order = append(order, it.opID)
		}
		es := append(byOp[it.opID], it.e)
		if len(es) > 2*r.ret.Keep {
			// A flood stays bounded in memory too: the newest arrivals.
			es = slices.Clone(es[len(es)-r.ret.Keep:])
		}
		byOp[it.opID] = es
	}
	add(first)
	for n := 0; n < cap(r.ch); n++ {
		select {
		case it := <-r.ch:
			add(it)
			continue
		default:
		}
		break
	}
	batch := make([]Append, 0, len(order))
	for _, id := range order {
		es := byOp[id]
		if len(es) > r.ret.Keep {
			es = es[len(es)-r.ret.Keep:]
		}
		batch = append(batch, Append{OpID: id, Entries: es})
	}
	for chunk := range slices.Chunk(batch, MaxChunk) {
		r.write(chunk)
	}
	for _, f := range flushes {
		close(f)
	}
}

// write appends one chunk, and logs what a failure lost.
func (r *Recorder) write(chunk []Append) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	lost, err := appendBatch(ctx, r.store, chunk, r.ret)
	if err == nil {
		return
	}
	entries := 0
	for _, i := range lost {
		entries += len(chunk[i].Entries)
	}
	r.log.Warn("delivery log: append failed; these entries are lost", "operation_id", chunk[lost[0]].OpID,
		"operations", len(lost), "entries", entries, "error", err.Error())
}
