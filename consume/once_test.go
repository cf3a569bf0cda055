package consume_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/consume"
	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/results/resultstest"
	"github.com/lrosink/lrosink/internal/testutil"
)

// The acceptance scenario of effectively-once processing: 200 results
// messages (20 of them deliberate replays, which must run once more), each
// delivered 1-4 times, concurrently, to several consumer "processes"; in the
// first rounds some processes are killed mid-handler (context cancelled,
// store cut: nothing released, the lease must run out), some handlers fail,
// and some runs freeze between their handler and their DONE commit while
// their lease runs out (the zombie the fence is for). A fake clock moves past
// the lease between rounds, as Pub/Sub's redelivery brings unacked messages
// back. At the end every dedupe key must have exactly one completed run
// (handler returned nil and DONE committed), none may have run concurrently
// with itself, and none may be lost.

const (
	scenarioMessages = 200
	scenarioReplays  = 20
	scenarioLease    = 10 * time.Minute
	faultRounds      = 2
)

type plan int

const (
	planNone   plan = iota
	planKill        // the process dies mid-handler
	planFail        // the handler returns an error
	planFreeze      // the run stalls after the handler, before DONE, past its lease
)

// delivery is one delivery of one message to one process.
type delivery struct {
	msg    consume.Message
	key    string
	plan   plan
	gate   chan struct{} // planFreeze: closed to let the DONE commit go on
	parked atomic.Bool
	once   sync.Once
	settle func() // frees the delivery's concurrency slot and wakes the round
	done   chan struct{}
}

func (d *delivery) settled() {
	d.once.Do(func() {
		d.settle()
		close(d.done)
	})
}

var errKilled = errors.New("process killed")

// process is one consumer process: a Consumer whose store handle dies with it.
type process struct {
	ctx    context.Context
	cancel context.CancelFunc
	dead   atomic.Bool
	c      *consume.Consumer
}

// scenario is the shared state of one run of the scenario.
type scenario struct {
	t     *testing.T
	store consume.Store
	clock *testutil.Clock

	mu         sync.Mutex
	inflight   map[string]int
	completed  map[string]int
	violations []string
	stats      map[string]int
	byID       map[string]*delivery
	gates      map[string]*delivery // by fencing token
	queue      []*delivery
	procs      []*process
	seq        int
}

// procStore is a process's handle on the shared store: cut when the process
// is killed, and able to stall a planned DONE commit.
type procStore struct {
	consume.Store
	s *scenario
	p *process
}

func (ps procStore) Get(ctx context.Context, key string) (consume.Record, consume.Revision, error) {
	if ps.p.dead.Load() {
		return consume.Record{}, "", errKilled
	}
	return ps.Store.Get(ctx, key)
}

func (ps procStore) Create(ctx context.Context, key string, r consume.Record) (consume.Revision, error) {
	if ps.p.dead.Load() {
		return "", errKilled
	}
	return ps.Store.Create(ctx, key, r)
}

func (ps procStore) Update(ctx context.Context, key string, rev consume.Revision, r consume.Record) (consume.Revision, error) {
	if r.Status == consume.Done {
		ps.s.mu.Lock()
		d := ps.s.gates[r.Holder]
		ps.s.mu.Unlock()
		if d != nil {
			d.parked.Store(true)
			// The stalled process still holds the message: Pub/Sub sends
			// it again once its ack deadline passes.
			ps.s.requeue(d)
			d.settled()
			<-d.gate
		}
	}
	if ps.p.dead.Load() {
		return "", errKilled
	}
	return ps.Store.Update(ctx, key, rev, r)
}

func newScenario(t *testing.T, store consume.Store) *scenario {
	return &scenario{
		t: t, store: store, clock: testutil.NewClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)),
		inflight: map[string]int{}, completed: map[string]int{}, stats: map[string]int{},
		byID: map[string]*delivery{}, gates: map[string]*delivery{},
	}
}

func (s *scenario) newProcess() *process {
	p := &process{}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.c = &consume.Consumer{
		Store: procStore{Store: s.store, s: s, p: p},
		Lease: scenarioLease,
		Now:   s.clock.Now,
		Handler: func(ctx context.Context, d consume.Delivery) error {
			s.mu.Lock()
			dl := s.byID[d.MessageID]
			s.inflight[d.Key]++
			if n := s.inflight[d.Key]; n > 1 {
				s.violations = append(s.violations, fmt.Sprintf("%s: %d runs at once", d.Key, n))
			}
			s.mu.Unlock()
			defer func() {
				s.mu.Lock()
				s.inflight[d.Key]--
				s.mu.Unlock()
			}()
			runtime.Gosched() // let concurrent copies overlap if they can
			switch dl.plan {
			case planKill:
				s.kill(p)
				<-ctx.Done()
				return ctx.Err()
			case planFail:
				return errors.New("planned handler failure")
			case planFreeze:
				s.mu.Lock()
				s.gates[d.Token] = dl
				s.mu.Unlock()
			}
			return nil
		},
	}
	return p
}

// kill ends p as a crash would: its context is cancelled and its store
// handle cut, so it releases nothing; a fresh process takes its place.
func (s *scenario) kill(p *process) {
	p.dead.Store(true)
	p.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats["killed"]++
	for i, q := range s.procs {
		if q == p {
			s.procs[i] = s.newProcess()
		}
	}
}

// requeue puts a new delivery of d's message in the next round.
func (s *scenario) requeue(d *delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, s.delivery(d.msg, d.key))
}

// delivery makes a delivery with a fresh id (s.mu held).
func (s *scenario) delivery(m consume.Message, key string) *delivery {
	s.seq++
	m.ID = fmt.Sprintf("d%05d", s.seq)
	d := &delivery{msg: m, key: key, gate: make(chan struct{}), done: make(chan struct{})}
	s.byID[m.ID] = d
	return d
}

func (s *scenario) record(d *delivery, p *process, o consume.Outcome) {
	s.mu.Lock()
	s.stats[string(o.Kind)]++
	if o.Kind == consume.Processed {
		s.completed[o.Key]++
	}
	if o.Kind == consume.Invalid {
		s.violations = append(s.violations, fmt.Sprintf("%s: invalid: %v", d.msg.ID, o.Err))
	}
	s.mu.Unlock()
	// A dead process acks nothing; a nack or a lost ack brings it back.
	if (!o.Ack() || p.dead.Load()) && !d.parked.Load() {
		s.requeue(d)
	}
}

// run plays the scenario and returns its violations.
func (s *scenario) run(messages []consume.Message, keys []string) []string {
	rng := rand.New(rand.NewPCG(7, 11))
	for range 12 {
		s.procs = append(s.procs, s.newProcess())
	}
	for i, m := range messages {
		for range 1 + rng.IntN(4) {
			s.queue = append(s.queue, s.delivery(m, keys[i]))
		}
	}
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var parked []*delivery
	for round := 0; ; round++ {
		if round > 40 {
			s.t.Fatalf("no end after %d rounds; queue %d", round, len(s.queue))
		}
		s.mu.Lock()
		cur := s.queue
		s.queue = nil
		s.mu.Unlock()
		if len(cur) == 0 {
			// Let every stalled run go on and see what it brings back.
			for _, d := range parked {
				close(d.gate)
			}
			parked = nil
			wg.Wait()
			s.mu.Lock()
			cur, s.queue = s.queue, nil
			s.mu.Unlock()
			if len(cur) == 0 {
				break
			}
		}
		rng.Shuffle(len(cur), func(i, j int) { cur[i], cur[j] = cur[j], cur[i] })
		for _, d := range cur {
			if round < faultRounds {
				switch x := rng.Float64(); {
				case x < 0.04:
					d.plan = planKill
				case x < 0.12:
					d.plan = planFail
				case x < 0.22:
					d.plan = planFreeze
				}
			}
			d.settle = func() { <-sem }
			sem <- struct{}{}
			s.mu.Lock()
			p := s.procs[rng.IntN(len(s.procs))]
			s.mu.Unlock()
			wg.Go(func() {
				o := p.c.Process(p.ctx, d.msg)
				s.record(d, p, o)
				d.settled()
			})
		}
		for _, d := range cur {
			<-d.done
		}
		// Runs stalled in an earlier round go on now: a redelivery has
		// had a round to seize their key.
		var still []*delivery
		for _, d := range parked {
			close(d.gate)
		}
		for _, d := range cur {
			if d.parked.Load() {
				still = append(still, d)
			}
		}
		parked = still
		s.clock.Advance(scenarioLease + time.Second)
	}
	wg.Wait()

	s.mu.Lock()
	defer s.mu.Unlock()
	v := append([]string(nil), s.violations...)
	for _, k := range keys {
		switch n := s.completed[k]; {
		case n == 0:
			v = append(v, k+": lost (never completed)")
		case n > 1:
			v = append(v, fmt.Sprintf("%s: completed %d times", k, n))
		}
	}
	sort.Strings(v)
	return v
}

// buildMessages returns the 200 messages and their dedupe keys: 180
// operations and 20 replays of the first 20 of them.
func buildMessages(t *testing.T) ([]consume.Message, []string) {
	t.Helper()
	var msgs []consume.Message
	var keys []string
	for i := range scenarioMessages {
		op := fmt.Sprintf("batches/op-%03d", i%(scenarioMessages-scenarioReplays))
		m := results.Message{
			Operation: op, Kind: "batch", State: "SUCCEEDED",
			UpdateTime: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC), SettledBy: "webhook",
			SettledAt: time.Date(2026, 11, 21, 9, 0, 1, 0, time.UTC), IdempotencyKey: "gemini:" + op,
			Output: map[string]any{"responses_file": "files/out-" + op},
		}
		if i >= scenarioMessages-scenarioReplays {
			m.ReplayID = "r1"
		}
		data, err := m.Data()
		if err != nil {
			t.Fatal(err)
		}
		resultstest.Check(t, data)
		msgs = append(msgs, consume.Message{Data: data, Attributes: m.Attributes()})
		keys = append(keys, consume.DedupeKey(m.IdempotencyKey, m.ReplayID))
	}
	return msgs, keys
}

// unfenced is the planted bug: a store whose DONE commit does not check that
// the claim is still the committer's (it writes over whatever is there).
type unfenced struct{ consume.Store }

func (u unfenced) Update(ctx context.Context, key string, rev consume.Revision, r consume.Record) (consume.Revision, error) {
	if r.Status == consume.Done {
		_, cur, err := u.Store.Get(ctx, key)
		if err != nil {
			return "", err
		}
		rev = cur
	}
	return u.Store.Update(ctx, key, rev, r)
}

func checkScenario(t *testing.T, store consume.Store) {
	msgs, keys := buildMessages(t)
	s := newScenario(t, store)
	if v := s.run(msgs, keys); len(v) > 0 {
		t.Errorf("%d violations:\n%s", len(v), strings.Join(v, "\n"))
	}
	t.Logf("outcomes: %v", s.stats)
	// The scenario must have exercised what it claims to.
	for _, k := range []string{"killed", string(consume.Failed), string(consume.Superseded), string(consume.Busy), string(consume.Duplicate)} {
		if s.stats[k] == 0 {
			t.Errorf("no %s in the scenario: %v", k, s.stats)
		}
	}
}

func checkPlanted(t *testing.T, store consume.Store) {
	msgs, keys := buildMessages(t)
	v := newScenario(t, unfenced{store}).run(msgs, keys)
	if !strings.Contains(strings.Join(v, "\n"), "completed 2 times") {
		t.Fatalf("the planted unfenced DONE went unnoticed; violations: %v", v)
	}
	t.Logf("planted bug caught: %d violations, e.g. %s", len(v), v[0])
}

func openSQLite(t *testing.T) *consume.SQLiteStore {
	t.Helper()
	s, err := consume.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "consume.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestEffectivelyOnceSQLite(t *testing.T) { checkScenario(t, openSQLite(t)) }

func TestEffectivelyOnceFirestore(t *testing.T) {
	fs, _ := emutest.Firestore(t)
	checkScenario(t, consume.NewFirestoreStore(fs, "processed"))
}

func TestPlantedUnfencedDoneIsCaughtSQLite(t *testing.T) { checkPlanted(t, openSQLite(t)) }

func TestPlantedUnfencedDoneIsCaughtFirestore(t *testing.T) {
	fs, _ := emutest.Firestore(t)
	checkPlanted(t, consume.NewFirestoreStore(fs, "processed"))
}
