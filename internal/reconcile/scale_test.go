package reconcile_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/shard"
	"github.com/lrosink/lrosink/internal/testutil"
)

// The scale simulation (issue [K]): N batch operations submitted evenly
// over Arrivals, each running an exponentially distributed time (mean
// MeanRun) on a fake Gemini that answers after 100–300 ms of virtual time
// and refuses a share of requests with 429 (retryDelay 1 s); no webhook
// arrives, so every completion is found by polling, the worst case. A pass
// runs every Interval on one virtual clock with the memory ledger, the
// real reconciler, door, retry helper and genai SDK (its HTTP served
// in-process by the fake's handler, no socket). Every Gemini request waits
// on the budget first.
type scaleConfig struct {
	N                 int
	Arrivals, MeanRun time.Duration
	Interval          time.Duration
	QPS               float64
	Concurrency       int
	MaxOperations     int
	Share429          float64
	Seed              uint64
}

type scaleResult struct {
	Checks, Requests, Grants int
	Settled                  int
	Elapsed                  time.Duration
	P50, P99, Max            time.Duration // lateness of the checks
	MaxPerSecond             int           // most requests granted in one virtual second
	Reads                    int64
	Backlog                  int // due operations at the end
}

func (r scaleResult) String() string {
	return fmt.Sprintf("checks %d, settled %d, lateness p50 %v p99 %v max %v, calls/op %.2f, calls/s %.2f (max %d in one second), ledger reads/check %.2f, virtual %v",
		r.Checks, r.Settled, r.P50, r.P99, r.Max, float64(r.Requests)/float64(max(r.Settled, 1)),
		float64(r.Requests)/r.Elapsed.Seconds(), r.MaxPerSecond, float64(r.Reads)/float64(max(r.Checks, 1)), r.Elapsed)
}

// latencyTransport serves the fake's handler in-process, modelling C
// calls in flight on C lanes of virtual time: a call starts when its lane
// is free (not before the clock), ends 100–300 ms later, and the clock
// moves to the earliest lane end only once every lane is busy, as the
// pass's semaphore makes a check wait for a slot. (Moving the one clock to
// each call's end would run the calls one after another.) A response
// arrives up to 300 ms after the clock says: lateness is that much low.
type latencyTransport struct {
	h     http.Handler
	clk   *clock
	mu    sync.Mutex
	rng   *rand.Rand
	lanes []time.Time
	count int
}

func (t *latencyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.mu.Lock()
	lat := 100*time.Millisecond + time.Duration(t.rng.Int64N(int64(200*time.Millisecond)))
	t.count++
	i := 0
	for j, free := range t.lanes {
		if free.Before(t.lanes[i]) {
			i = j
		}
	}
	start := t.lanes[i]
	if now := t.clk.Now(); now.After(start) {
		start = now
	}
	t.lanes[i] = start.Add(lat)
	earliest := t.lanes[0]
	for _, free := range t.lanes {
		if free.Before(earliest) {
			earliest = free
		}
	}
	t.clk.AdvanceTo(earliest)
	t.mu.Unlock()
	in := r.Clone(r.Context())
	if in.Body == nil {
		in.Body = http.NoBody // a server request always has one
	}
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, in)
	res := w.Result()
	res.Request = r
	return res, nil
}

// occupy is a retry's wait: a lane is busy for d, the other calls go on.
func (t *latencyTransport) occupy(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i := 0
	for j, free := range t.lanes {
		if free.Before(t.lanes[i]) {
			i = j
		}
	}
	t.lanes[i] = later(t.lanes[i], t.clk.Now()).Add(d)
	earliest := t.lanes[0]
	for _, free := range t.lanes {
		if free.Before(earliest) {
			earliest = free
		}
	}
	t.clk.AdvanceTo(earliest)
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// drain moves the clock to when the last call in flight ends: the pass's end.
func (t *latencyTransport) drain() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, free := range t.lanes {
		t.clk.AdvanceTo(free)
	}
}

// lateDoor records how late each check came: the time it reached the door
// less the due time of the operation as the pass read it.
type lateDoor struct {
	*ingest.Door
	clk  *clock
	mu   sync.Mutex
	late []time.Duration
}

func (d *lateDoor) IngestRead(ctx context.Context, ev event.Event, read *ledger.Operation) (ingest.Result, error) {
	d.mu.Lock()
	d.late = append(d.late, d.clk.Now().Sub(read.NextCheckAt))
	d.mu.Unlock()
	return d.Door.IngestRead(ctx, ev, read)
}

// fetchOnly hides the fetcher's webhook listing: the health check is no
// part of the simulation.
type fetchOnly struct{ f *gemini.Fetcher }

func (f fetchOnly) Fetch(ctx context.Context, k opname.Kind, n string) (event.Event, error) {
	return f.f.Fetch(ctx, k, n)
}

func (f fetchOnly) ListBatches(ctx context.Context, n int, tok string) ([]event.Event, string, error) {
	return f.f.ListBatches(ctx, n, tok)
}

func runScale(tb testing.TB, c scaleConfig) scaleResult {
	tb.Helper()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	clk := testutil.NewClock(t0)
	rng := rand.New(rand.NewPCG(c.Seed, 1))
	fake := fakegemini.New(fakegemini.WithClock(clk.Now))
	var faultMu sync.Mutex
	faultRng := rand.New(rand.NewPCG(c.Seed, 2))
	fake.FailNextWith(func(*http.Request) bool {
		faultMu.Lock()
		defer faultMu.Unlock()
		return faultRng.Float64() < c.Share429
	}, fakegemini.Fault{Status: http.StatusTooManyRequests, RetryDelay: time.Second}, -1)
	rt := &latencyTransport{h: fake.Handler(), clk: clk, rng: rand.New(rand.NewPCG(c.Seed, 3)), lanes: make([]time.Time, c.Concurrency)}
	sleep := func(ctx context.Context, d time.Duration) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		clk.AdvanceTo(clk.Now().Add(d))
		return nil
	}
	budget := reconcile.NewBudget(c.QPS, 1, clk.Now, sleep)
	var grantMu sync.Mutex
	grants := map[int64]int{}
	wait := func(ctx context.Context) error {
		at, err := budget.Take(ctx)
		if err == nil {
			grantMu.Lock()
			grants[at.Unix()]++
			grantMu.Unlock()
		}
		return err
	}
	log := logging.New(discard{}, slog.LevelError, "")
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: "http://gemini.fake/",
		HTTPClient: &http.Client{Transport: rt}, Sleep: rt.occupy, Now: clk.Now, Wait: wait, Log: log})
	if err != nil {
		tb.Fatal(err)
	}
	store := testutil.MemLedger(tb)
	inner, err := ingest.New(ingest.Config{Store: store, Sink: &testutil.Recorder{}, Log: log, Now: clk.Now, Grace: 90 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	door := &lateDoor{Door: inner, clk: clk}
	rec, err := reconcile.New(reconcile.Config{Ledger: store, Door: door, Gemini: fetchOnly{f}, Log: log, Now: clk.Now,
		StuckAfter: 24 * time.Hour, Concurrency: c.Concurrency, MaxOperations: c.MaxOperations})
	if err != nil {
		tb.Fatal(err)
	}

	type op struct {
		id              string
		submit, done    time.Time
		registered, fin bool
	}
	ops := make([]op, c.N)
	for i := range ops {
		submit := t0.Add(time.Duration(float64(c.Arrivals) * float64(i) / float64(c.N)))
		run := time.Duration(rng.ExpFloat64() * float64(c.MeanRun))
		ops[i] = op{id: fmt.Sprintf("s%07d", i), submit: submit, done: submit.Add(min(run, 23*time.Hour))}
	}
	byDone := slices.Clone(ops)
	slices.SortFunc(byDone, func(a, b op) int { return a.done.Compare(b.done) })
	next, nextDone, settled := 0, 0, 0
	ctx := context.Background()
	var checks int
	for tick := t0.Add(c.Interval); settled < c.N; tick = tick.Add(c.Interval) {
		// Submissions up to this tick, each at its own time.
		for ; next < c.N && !ops[next].submit.After(tick); next++ {
			o := ops[next]
			clk.AdvanceTo(o.submit)
			// The previous pass may have run past this submission and
			// its end: the completion loop below has then seen it.
			st := fakegemini.BatchState{State: "BATCH_STATE_RUNNING"}
			if !o.done.After(clk.Now()) {
				st = fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: o.done, ResponsesFile: "files/out-" + o.id}
			}
			fake.SetBatch(o.id, st)
			if _, err := inner.Ingest(ctx, event.Event{Name: "batches/" + o.id, State: lifecycle.Pending, Source: event.SourceRegister}); err != nil {
				tb.Fatal(err)
			}
		}
		clk.AdvanceTo(tick)
		for ; nextDone < c.N && !byDone[nextDone].done.After(clk.Now()); nextDone++ {
			id := byDone[nextDone].id
			fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_SUCCEEDED", UpdateTime: byDone[nextDone].done, ResponsesFile: "files/out-" + id})
		}
		s, err := rec.Pass(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		rt.drain()
		checks += s.Checked
		settled += s.Settled
		if tick.Sub(t0) > c.Arrivals+48*time.Hour {
			byState := map[lifecycle.State]int{}
			for _, o := range ops {
				so, _ := store.GetOperation(ctx, "gemini:batches%2F"+o.id)
				byState[so.State]++
				if so.State == lifecycle.Running && byState[so.State] < 3 {
					tb.Logf("%s submit %v done %v nextDone %d", o.id, o.submit, o.done, nextDone)
				}
			}
			tb.Logf("%v last pass %+v", byState, s)
			tb.Fatalf("not settled after %v: %d of %d", tick.Sub(t0), settled, c.N)
		}
	}
	res := scaleResult{Checks: checks, Settled: settled, Elapsed: clk.Now().Sub(t0), Requests: rt.count}
	for _, n := range grants {
		res.Grants += n
		res.MaxPerSecond = max(res.MaxPerSecond, n)
	}
	res.Reads, _, _ = store.Counts().Snapshot()
	late := door.late
	slices.Sort(late)
	if len(late) > 0 {
		res.P50, res.P99, res.Max = late[len(late)/2], late[int(math.Ceil(0.99*float64(len(late))))-1], late[len(late)-1]
	}
	n, err := store.CountDue(ctx, shard.All(), clk.Now())
	if err != nil {
		tb.Fatal(err)
	}
	res.Backlog = int(n)
	return res
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// defaultScale is the shipped reconciler (1,000 checks and 8 Gemini calls
// at once a pass) every 2 minutes, with a budget of 20 requests a second
// and 5 % of requests refused with 429.
func defaultScale(n int) scaleConfig {
	return scaleConfig{N: n, Arrivals: time.Hour, MeanRun: 20 * time.Minute, Interval: 2 * time.Minute,
		QPS: 20, Concurrency: 8, MaxOperations: 1000, Share429: 0.05, Seed: 1}
}

// TestScaleKeepsSchedule: 5,000 operations arriving over an hour stay on
// schedule (p99 lateness within one interval, none later than two: no
// starvation), the budget is never exceeded in any virtual second, every
// request waited on it, and every operation settles.
func TestScaleKeepsSchedule(t *testing.T) {
	c := defaultScale(5_000)
	r := runScale(t, c)
	t.Log(r)
	if r.Settled != c.N || r.Backlog != 0 {
		t.Errorf("%d of %d settled, %d still due", r.Settled, c.N, r.Backlog)
	}
	if r.P99 > c.Interval || r.Max > 2*c.Interval {
		t.Errorf("lateness p99 %v, max %v: want p99 within %v and none beyond %v", r.P99, r.Max, c.Interval, 2*c.Interval)
	}
	if r.MaxPerSecond > int(c.QPS) {
		t.Errorf("%d requests granted in one virtual second, budget %v", r.MaxPerSecond, c.QPS)
	}
	if r.Grants != r.Requests {
		t.Errorf("%d requests sent, %d waited on the budget", r.Requests, r.Grants)
	}
}

// BenchmarkScale records the figures of docs/BENCHMARKS.md (run with
// -benchtime=1x; the 100k case takes minutes).
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			var r scaleResult
			for b.Loop() {
				r = runScale(b, defaultScale(n))
			}
			b.Log(r)
			b.ReportMetric(r.P50.Seconds(), "lateness-p50-s")
			b.ReportMetric(r.P99.Seconds(), "lateness-p99-s")
			b.ReportMetric(r.Max.Seconds(), "lateness-max-s")
			b.ReportMetric(float64(r.Requests)/float64(n), "calls/op")
			b.ReportMetric(float64(r.Requests)/r.Elapsed.Seconds(), "calls/s")
			b.ReportMetric(float64(r.Reads)/float64(max(r.Checks, 1)), "reads/check")
		})
	}
}
