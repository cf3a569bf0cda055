// Package simulate drives the real lrosink code — the Webhook handler over
// HTTP with real signatures, the Reconcile pass through the real genai SDK,
// the one ingest door and a real ledger — against the fake Gemini API, under
// a seeded workload of duplicated, reordered, delayed and dropped deliveries
// and injected crashes, ledger errors, publish errors and expiring leases,
// and checks the invariants the product promises.
package simulate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/results"
)

// dice makes fault decisions reproducible: the answer depends on the seed,
// what is asked and how many times that question was asked before for that
// operation, not on which goroutine asks first.
type dice struct {
	seed   int64
	mu     sync.Mutex
	counts map[string]int
}

func newDice(seed int64) *dice { return &dice{seed: seed, counts: map[string]int{}} }

// roll reports true with probability p for the n-th ask of (what, key).
func (d *dice) roll(p float64, what, key string) bool {
	if p <= 0 {
		return false
	}
	d.mu.Lock()
	k := what + "|" + key
	n := d.counts[k]
	d.counts[k] = n + 1
	d.mu.Unlock()
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(d.seed))
	binary.LittleEndian.PutUint64(b[8:], uint64(n))
	h.Write(b[:])
	h.Write([]byte(k))
	return float64(mix(h.Sum64())>>11)/float64(1<<53) < p
}

// mix is splitmix64's finalizer: FNV alone leaves the high bits of keys
// that differ only in their last bytes correlated.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// faultCounts tallies what was injected.
type faultCounts struct {
	CrashBeforeCommit atomic.Int64
	CrashAfterCommit  atomic.Int64
	CrashAfterPublish atomic.Int64
	LedgerErrors      atomic.Int64
	PublishErrors     atomic.Int64
	SlowEffects       atomic.Int64
	// UnstorableMetadata counts operations given metadata a Firestore map
	// cannot hold; RegisterRefused the registrations answered 400
	// invalid-metadata (an oversize value).
	UnstorableMetadata atomic.Int64
	RegisterRefused    atomic.Int64
	// Fenced counts writes the store rejected because another writer got
	// there first: the races the run actually produced.
	Fenced atomic.Int64
	// Poison counts the operations the door can never ingest, and of those
	// the ones whose schedule write is refused too (Options.Poison).
	Poison, PoisonUnschedulable atomic.Int64
	// The workload's Gemini shapes: interactions ending INCOMPLETE,
	// succeeded batches with failed requests, failures as error objects,
	// and deliveries Gemini never made because the webhook was disabled.
	Incomplete, PartialBatches, ErrorObjects, LostToOutage atomic.Int64
	// Submissions through package submit (Options.Submit) and their
	// faults: kills between create and bind, retries with the same key
	// and what they found; first attempts that created nothing, binds
	// that failed (the door's injected faults) and retries that failed.
	Submitted, CrashBeforeBind, DuplicateSubmits              atomic.Int64
	SubmitErrors, BindErrors, RetriesExisting, RetriesRefused atomic.Int64
	RetryErrors                                               atomic.Int64
}

// faults implements ingest.Faults with a rate per crash boundary. While
// disabled (the final drain) nothing is injected.
type faults struct {
	rate     float64
	dice     *dice
	counts   *faultCounts
	disabled *atomic.Bool
	// afterPublish remembers operations whose holder was killed after
	// publishing: their one extra message is explained.
	mu           sync.Mutex
	afterPublish map[string]int
}

var errKilled = errors.New("simulated process kill")

func (f *faults) At(_ context.Context, p ingest.FaultPoint, op string) error {
	if f.disabled.Load() || !f.dice.roll(f.rate, "crash-"+string(p), op) {
		return nil
	}
	switch p {
	case ingest.FaultBeforeCommit:
		f.counts.CrashBeforeCommit.Add(1)
	case ingest.FaultAfterCommit:
		f.counts.CrashAfterCommit.Add(1)
	case ingest.FaultAfterPublish:
		f.counts.CrashAfterPublish.Add(1)
		f.mu.Lock()
		f.afterPublish[op]++
		f.mu.Unlock()
	}
	return errKilled
}

func (f *faults) explained(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.afterPublish[op]
}

// Ledger is what the simulated processes write through: the backend's store
// with the claim protocol on top (claims.Ledger), which the fault injectors
// below wrap step by step.
type Ledger interface {
	ledger.Ledger
	ingest.Store
	reconcile.Ledger
}

// flakyLedger fails a fraction of ledger calls, as a store that is briefly
// unreachable does. Fencing errors are never injected: they would be lies.
type flakyLedger struct {
	Ledger
	rate     float64
	dice     *dice
	counts   *faultCounts
	disabled *atomic.Bool

	mu       sync.Mutex
	complete map[string]int // failed DONE commits per claim id
	// lastDone: per claim id, per holder, whether that holder's last DONE
	// commit was an injected failure (it gave up with its claim HELD).
	lastDone map[string]map[string]bool
}

func (l *flakyLedger) completeFailures(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.complete[id]
}

// abandonedDone counts the holders of claim id whose last DONE commit
// failed here: each published and left the claim to be seized, so each
// caused one extra message. A holder whose retry succeeded does not count.
func (l *flakyLedger) abandonedDone(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, failed := range l.lastDone[id] {
		if failed {
			n++
		}
	}
	return n
}

func (l *flakyLedger) doneResult(lease ledger.Lease, failed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastDone == nil {
		l.lastDone = map[string]map[string]bool{}
	}
	if l.lastDone[lease.ID] == nil {
		l.lastDone[lease.ID] = map[string]bool{}
	}
	l.lastDone[lease.ID][lease.Holder] = failed
}

var errLedgerDown = errors.New("simulated ledger outage")

func (l *flakyLedger) fail(what, id string) error {
	if l.disabled.Load() || !l.dice.roll(l.rate, "ledger-"+what, id) {
		return nil
	}
	l.counts.LedgerErrors.Add(1)
	return fmt.Errorf("%s %s: %w", what, id, errLedgerDown)
}

func (l *flakyLedger) GetOperation(ctx context.Context, id string) (ledger.Operation, error) {
	if err := l.fail("get", id); err != nil {
		return ledger.Operation{}, err
	}
	return l.Ledger.GetOperation(ctx, id)
}

func (l *flakyLedger) CommitOperation(ctx context.Context, op ledger.Operation, c *ledger.Claim) (ledger.Revision, *ledger.Lease, error) {
	if err := l.fail("commit", op.ID); err != nil {
		return ledger.Revision{}, nil, err
	}
	rev, lease, err := l.Ledger.CommitOperation(ctx, op, c)
	l.fenced(err)
	return rev, lease, err
}

func (l *flakyLedger) fenced(err error) {
	if errors.Is(err, ledger.ErrConflict) || errors.Is(err, ledger.ErrFenced) {
		l.counts.Fenced.Add(1)
	}
}

func (l *flakyLedger) SeizeClaim(ctx context.Context, c ledger.Claim, holder string, leaseUntil, expireAt, now time.Time) (*ledger.Lease, error) {
	lease, err := l.Ledger.SeizeClaim(ctx, c, holder, leaseUntil, expireAt, now)
	l.fenced(err)
	return lease, err
}

func (l *flakyLedger) CompleteClaim(ctx context.Context, lease ledger.Lease, now time.Time) error {
	if err := l.fail("complete", lease.ID); err != nil {
		l.mu.Lock()
		if l.complete == nil {
			l.complete = map[string]int{}
		}
		l.complete[lease.ID]++
		l.mu.Unlock()
		l.doneResult(lease, true)
		return err
	}
	err := l.Ledger.CompleteClaim(ctx, lease, now)
	l.doneResult(lease, false)
	l.fenced(err)
	return err
}

// poisonLedger refuses, for the whole run and even in the final drain,
// every commit that would record Gemini's answer for its operations (any
// state but PENDING: the registration is kept), and for those mapped to
// true the reconciler's schedule write as well. ops is filled before the
// run starts and only read after.
type poisonLedger struct {
	Ledger
	ops map[string]bool // doc id → schedule write refused too
}

var errPoison = errors.New("simulated poison operation: the store refuses it")

func (l *poisonLedger) CommitOperation(ctx context.Context, op ledger.Operation, c *ledger.Claim) (ledger.Revision, *ledger.Lease, error) {
	if _, ok := l.ops[op.ID]; ok && op.State != lifecycle.Pending {
		return ledger.Revision{}, nil, fmt.Errorf("commit %s: %w", op.ID, errPoison)
	}
	return l.Ledger.CommitOperation(ctx, op, c)
}

func (l *poisonLedger) ScheduleCheck(ctx context.Context, op ledger.Operation, next time.Time, note string, now time.Time) (ledger.Revision, error) {
	if l.ops[op.ID] {
		return ledger.Revision{}, fmt.Errorf("schedule check %s: %w", op.ID, errPoison)
	}
	return l.Ledger.ScheduleCheck(ctx, op, next, note, now)
}

// unfencedLedger is the planted bug of the suite's self-test: a store that
// ignores fencing (last writer wins, and a claim that already exists is
// quietly taken over). The simulator must catch it.
type unfencedLedger struct{ Ledger }

func (l unfencedLedger) CommitOperation(ctx context.Context, op ledger.Operation, c *ledger.Claim) (ledger.Revision, *ledger.Lease, error) {
	rev, lease, err := l.Ledger.CommitOperation(ctx, op, c)
	if !errors.Is(err, ledger.ErrConflict) {
		return rev, lease, err
	}
	cur, gerr := l.Ledger.GetOperation(ctx, op.ID)
	if gerr != nil && !errors.Is(gerr, ledger.ErrNotFound) {
		return rev, lease, err
	}
	op.Rev = cur.Rev // overwrite whatever is there now
	rev, _, err = l.Ledger.CommitOperation(ctx, op, nil)
	if err != nil || c == nil {
		return rev, nil, err
	}
	return rev, &ledger.Lease{ID: c.ID, OpID: op.ID, Holder: c.Holder}, nil
}

func (l unfencedLedger) SeizeClaim(ctx context.Context, c ledger.Claim, holder string, leaseUntil, expireAt, now time.Time) (*ledger.Lease, error) {
	lease, err := l.Ledger.SeizeClaim(ctx, c, holder, leaseUntil, expireAt, now)
	if !errors.Is(err, ledger.ErrFenced) {
		return lease, err
	}
	if cur, gerr := l.Ledger.GetClaim(ctx, c.ID); gerr == nil {
		return l.Ledger.SeizeClaim(ctx, cur, holder, leaseUntil, expireAt, now) // take it anyway
	}
	return lease, err
}

// recorder is the results sink of every simulated process: it keeps what
// was published (the invariants' evidence), optionally forwards to a real
// sink first, injects publish errors, and for a few operations plays a side
// effect so slow that its lease expires while it runs: another process
// seizes the claim meanwhile.
type recorder struct {
	next     ingest.Sink // nil: record only
	rate     float64
	slowRate float64
	dice     *dice
	counts   *faultCounts
	disabled *atomic.Bool
	// seize is called for a slow effect; it runs another process's claim
	// retry with a clock past the lease.
	seize func(ctx context.Context, m results.Message)

	mu   sync.Mutex
	msgs []results.Message
	slow map[string]bool
}

var errPublish = errors.New("simulated publish failure")

func (r *recorder) Publish(ctx context.Context, m results.Message) error {
	if !r.disabled.Load() && r.dice.roll(r.rate, "publish", m.Operation) {
		r.counts.PublishErrors.Add(1)
		return errPublish
	}
	slow := false
	if !r.disabled.Load() && r.seize != nil {
		r.mu.Lock()
		if !r.slow[m.Operation] && r.dice.roll(r.slowRate, "slow", m.Operation) {
			r.slow[m.Operation], slow = true, true
		}
		r.mu.Unlock()
	}
	if slow {
		r.counts.SlowEffects.Add(1)
		if r.tails() {
			// A sink that can say what it wrote (the file) writes within
			// the lease (the door's publish budget cuts it short past it):
			// what outlives the lease is the rest of the effect, the fsync
			// and the DONE commit. So the line is written, then the claim
			// is seized.
			if err := r.publish(ctx, m); err != nil {
				return err
			}
			r.seize(ctx, m)
			return nil
		}
		r.seize(ctx, m) // the lease runs out while we are "still publishing"
	}
	return r.publish(ctx, m)
}

// publish hands m to the real sink, if any, and records it.
func (r *recorder) publish(ctx context.Context, m results.Message) error {
	if r.next != nil {
		if err := r.next.Publish(ctx, m); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
	return nil
}

// tails reports whether the real sink can say what it wrote recently
// (ingest.TailChecker: a file): then every recovered claim asks it, and
// the run allows no extra message.
func (r *recorder) tails() bool {
	_, ok := r.next.(ingest.TailChecker)
	return ok
}

// InTail asks the real sink; false when it cannot tell (or there is none).
func (r *recorder) InTail(ctx context.Context, m results.Message) (bool, error) {
	tc, ok := r.next.(ingest.TailChecker)
	if !ok {
		return false, nil
	}
	return tc.InTail(ctx, m)
}

func (r *recorder) slowOps() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]bool, len(r.slow))
	for k, v := range r.slow {
		out[k] = v
	}
	return out
}

func (r *recorder) all() []results.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]results.Message(nil), r.msgs...)
}
