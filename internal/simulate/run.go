package simulate

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lrosink/lrosink/internal/clock"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/register"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
	"github.com/lrosink/lrosink/submit"
)

// Options configure a run. Rates are probabilities in [0, 1].
type Options struct {
	Ops     int
	Seed    int64
	Dup     float64 // extra copies of a delivery
	Reorder float64 // a delivery held back past later ones
	Drop    float64 // a delivery lost for good (only reconcile can recover it)
	// Crash is the chance of a process kill at each crash boundary of the
	// ingest door (inside the transaction, after commit, after publish).
	Crash         float64
	LedgerErrors  float64
	PublishErrors float64
	// SlowEffects is the chance that a side effect outlives its lease while
	// another process seizes the claim.
	SlowEffects float64
	// UnstorableMetadata is the share of operations whose registrations and
	// webhook payloads carry metadata a Firestore map cannot hold (arrays
	// inside arrays, "__name__"/"__x__" and empty keys); half of them also
	// carry a value over ledger.MaxMetadataBytes, which /Register refuses
	// (the submitter retries without it) and the door drops from webhooks.
	UnstorableMetadata float64
	// NeverNotified is the share of operations whose webhooks are never
	// sent; NeverFinish the share that stay running past the stuck limit.
	NeverNotified, NeverFinish float64
	// Poison is the share of operations the door can never ingest: the
	// store keeps their registration but refuses every commit that records
	// Gemini's answer (as it would an answer it cannot hold), for the whole
	// run. Half of them also refuse the reconciler's schedule write, so they
	// cannot even be moved out of the due set.
	Poison float64
	// Incomplete is the share of finishing interactions that end
	// "incomplete" or "budget_exceeded" (half each): INCOMPLETE, with no
	// webhook event, so only the reconciler can see them.
	Incomplete float64
	// PartialBatches is the share of succeeding batches whose
	// metadata.batchStats reports failed requests. Every terminal batch
	// carries statistics; a message settled by reconcile must carry them
	// (webhook events have none: a documented limit).
	PartialBatches float64
	// ErrorObjects is the share of failing videos and interactions whose
	// webhook reports the failure as an "error" object ({code, message})
	// rather than error_code/error_message (and whose video GET answers a
	// google.rpc.Status with extra fields).
	ErrorObjects float64
	// WebhookOutage is how long the project webhook is disabled
	// (disabled_due_to_failed_deliveries) in the middle of the run; nothing
	// is delivered meanwhile and the reconciler must poll at its minimum
	// interval. 0: no outage.
	WebhookOutage time.Duration
	// Submit is the share of operations created through lrosink's own
	// submission path (package submit over the run's ledger: intent,
	// create at the fake's create endpoints, bind) rather than by the
	// user's code and registered by hand after. CrashBeforeBind is the
	// chance a submission's process is killed between its create and its
	// bind; DuplicateSubmit the chance a submission is run again with the
	// same key (at once or up to 30 min later). IntentGrace is
	// LROSINK_INTENT_GRACE.
	Submit, CrashBeforeBind, DuplicateSubmit float64
	IntentGrace                              time.Duration
	// Horizon is the simulated time span; Step the tick.
	Horizon, Step time.Duration
	// ReconcileEvery, Grace, Lease, StuckAfter as in production config.
	ReconcileEvery, Grace, Lease, StuckAfter time.Duration
	// Concurrency bounds simultaneous deliveries.
	Concurrency int
	// PageSize is the reconciler's page size (default 200).
	PageSize int
	// Progress, if set, receives a progress bar.
	Progress io.Writer
	// PlantedBug turns on a deliberate defect so the suite can prove it
	// catches one: "unfenced-ledger" (a store that ignores fencing) or
	// "no-delivery-bind" (the webhook path ignores the intent a delivery
	// names). Never set outside tests.
	PlantedBug string
}

// Defaults are the documented default rates: every fault type on.
func Defaults() Options {
	return Options{Ops: 1000, Seed: 1, Dup: 0.3, Reorder: 0.2, Drop: 0.1, Crash: 0.02, LedgerErrors: 0.01,
		PublishErrors: 0.02, SlowEffects: 0.01, UnstorableMetadata: 0.05, NeverNotified: 0.05, NeverFinish: 0.02, Poison: 0.01,
		Incomplete: 0.1, PartialBatches: 0.3, ErrorObjects: 0.5, WebhookOutage: time.Hour,
		Submit: 0.3, CrashBeforeBind: 0.1, DuplicateSubmit: 0.1, IntentGrace: time.Hour,
		Horizon: 8 * time.Hour, Step: time.Minute, ReconcileEvery: 5 * time.Minute, Grace: 90 * time.Second,
		Lease: ingest.DefaultLease, StuckAfter: reconcile.DefaultStuckAfter, Concurrency: 16}
}

// Validate checks that rates are probabilities and spans make sense.
func (o Options) Validate() error {
	// A fault chance of 1 never lets a delivery through (--dup 1 would
	// duplicate forever): a fault's chance per delivery or call is in
	// [0, 1); a workload share in [0, 1].
	for _, r := range []struct {
		name  string
		v     float64
		fault bool
	}{{"dup", o.Dup, true}, {"reorder", o.Reorder, true}, {"drop", o.Drop, true}, {"crash", o.Crash, true},
		{"ledger-errors", o.LedgerErrors, true}, {"publish-errors", o.PublishErrors, true}, {"slow-effects", o.SlowEffects, true},
		{"unstorable-metadata", o.UnstorableMetadata, true}, {"never-notified", o.NeverNotified, false},
		{"never-finish", o.NeverFinish, false}, {"poison", o.Poison, true}, {"incomplete", o.Incomplete, false},
		{"partial-batches", o.PartialBatches, false}, {"error-objects", o.ErrorObjects, false}, {"submit", o.Submit, false},
		{"crash-before-bind", o.CrashBeforeBind, true}, {"duplicate-submit", o.DuplicateSubmit, true}} {
		limitOK := r.v < 1 || (r.v == 1 && !r.fault)
		if !(r.v >= 0 && limitOK) { // also refuses NaN
			return fmt.Errorf("--%s %v: want a probability in [0, 1%s", r.name, r.v, map[bool]string{true: ")", false: "]"}[r.fault])
		}
	}
	switch {
	case o.Ops <= 0:
		return fmt.Errorf("--ops %d: at least one operation", o.Ops)
	case o.Horizon <= 0 || o.Step <= 0:
		return fmt.Errorf("--horizon %s: must be positive", o.Horizon)
	case o.Submit > 0 && (o.IntentGrace <= 0 || o.IntentGrace > o.Horizon/2):
		return fmt.Errorf("--intent-grace %s: positive and at most half the horizon (%s): the run checks every intent after it", o.IntentGrace, o.Horizon/2)
	case o.WebhookOutage < 0 || o.WebhookOutage > o.Horizon/2:
		return fmt.Errorf("--webhook-outage %s: between 0 and half the horizon (%s)", o.WebhookOutage, o.Horizon/2)
	}
	return nil
}

// outage is the webhook outage window: the middle of the horizon.
func (o Options) outage(t0 time.Time) (from, to time.Time) {
	from = t0.Add((o.Horizon - o.WebhookOutage) / 2)
	return from, from.Add(o.WebhookOutage)
}

// Backend is the store and results the run uses.
type Backend struct {
	Name   string // for the report: "firestore", "sqlite"
	Ledger ledger.Ledger
	// Results, if set, receives every message too (e.g. the Pub/Sub emulator).
	Results ingest.Sink
	// Counts reports store reads/writes for the cost figures (may be nil).
	Counts func() (reads, writes int64)
}

// plan is one operation's true history in Gemini.
type plan struct {
	kind opname.Kind
	// id is Gemini's id (no prefix), name the canonical name; label is
	// the plan's own (sim-NNNNN), in its metadata. A submitted plan's id
	// and name are the fake's create's, known once created; until then
	// they are the label's.
	id, name, label string
	// sub is set when the plan is submitted through package submit.
	sub      *submission
	submit   time.Time
	steps    []step // state changes, in time order
	terminal lifecycle.State
	notify   bool
	// hardMeta: metadata a Firestore map cannot hold; bigMeta: also a
	// value over the bound (UnstorableMetadata).
	hardMeta, bigMeta bool
	// poison: the store refuses Gemini's answers for it (Options.Poison);
	// unschedulable: and the reconciler's schedule write too.
	poison, unschedulable bool
	// stats: the batch's metadata.batchStats once terminal (nil for other
	// kinds); partial: a SUCCEEDED batch with failed requests.
	stats   *fakegemini.BatchStats
	partial bool
	// errorObject: its failure is reported as an "error" object.
	errorObject bool
}

type step struct {
	at    time.Time
	state lifecycle.State
	// raw is Gemini's status when the state alone does not say it
	// ("incomplete", "budget_exceeded").
	raw string
}

// delivery is one webhook POST Gemini will attempt.
type delivery struct {
	at      time.Time
	op      int
	id      string // webhook-id
	typ     string
	eventAt time.Time
	failed  bool
	attempt int
}

type runner struct {
	o       Options
	b       Backend
	clock   *clock.Manual // the simulation's time: it moves only when the simulator says
	t0      time.Time
	plans   []plan
	fake    *fakegemini.Server
	gemini  *httptest.Server
	secret  string
	hooks   []*httptest.Server
	rec     *reconcile.Reconciler
	sink    *recorder
	faults  *faults
	poison  *poisonLedger
	counts  faultCounts
	quiet   atomic.Bool // faults off: the final drain
	stats   *decisionStats
	ledger  Ledger
	mu      sync.Mutex
	queue   []delivery
	rep     Report
	lastMu  sync.Mutex
	last    map[string]lifecycle.Current
	reads   atomic.Int64
	alerted map[string]int
	// register is the Register function the submitters call.
	register http.Handler
	dice     *dice
	// hookID is the project webhook in the fake (WebhookOutage).
	hookID string
	// submitter is package submit's Client over the run's ledger and the
	// fake; keyPlan maps an intent key to its plan (filled by generate,
	// only read after).
	submitter *submit.Client
	keyPlan   map[string]int
}

// Run executes one simulation and returns its report; the report's
// Violations list what broke. Run's error is for setup failures only.
func Run(ctx context.Context, o Options, b Backend) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	r := &runner{o: o, b: b, t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), last: map[string]lifecycle.Current{}, alerted: map[string]int{},
		keyPlan: map[string]int{}}
	r.clock = clock.NewManual(r.t0)
	if err := r.setup(); err != nil {
		return nil, err
	}
	defer r.gemini.Close()
	r.hookID = r.fake.AddWebhook("lrosink-simulate", r.hooks[0].URL)
	defer func() {
		for _, h := range r.hooks {
			h.Close()
		}
	}()
	r.generate()
	r.loop(ctx)
	r.drain(ctx)
	if b.Counts != nil {
		// The product's cost: the store's tally less the simulator's own
		// observation reads.
		reads, writes := b.Counts()
		r.rep.Cost.StoreReads, r.rep.Cost.StoreWrites = reads-r.reads.Load(), writes
		r.rep.Cost.StoreCounted = true
	}
	r.check(ctx)
	r.rep.WallSeconds = time.Since(start).Seconds()
	return &r.rep, nil
}

func (r *runner) setup() error {
	d := newDice(r.o.Seed)
	r.stats = newDecisionStats(r.clock.Now)
	log := slog.New(r.stats)
	r.fake = fakegemini.New(fakegemini.WithClock(r.clock.Now))
	r.gemini = httptest.NewServer(r.fake.Handler())
	r.faults = &faults{rate: r.o.Crash, dice: d, counts: &r.counts, disabled: &r.quiet, afterPublish: map[string]int{}}
	r.poison = &poisonLedger{Ledger: claims.New(r.b.Ledger), ops: map[string]bool{}}
	var l Ledger = &flakyLedger{Ledger: r.poison, rate: r.o.LedgerErrors, dice: d, counts: &r.counts, disabled: &r.quiet}
	switch r.o.PlantedBug {
	case "unfenced-ledger":
		l = unfencedLedger{Ledger: l}
	case "", "no-delivery-bind":
	default:
		return fmt.Errorf("unknown planted bug %q", r.o.PlantedBug)
	}
	r.ledger = l
	r.sink = &recorder{next: r.b.Results, rate: r.o.PublishErrors, slowRate: r.o.SlowEffects, dice: d, counts: &r.counts,
		disabled: &r.quiet, slow: map[string]bool{}}
	door := func(now func() time.Time) (*ingest.Door, error) {
		return ingest.New(ingest.Config{Store: l, Sink: r.sink, Log: log, Now: now, Lease: r.o.Lease, Grace: r.o.Grace, Faults: r.faults})
	}
	// Four processes: two webhook instances (Cloud Run scales out, so
	// duplicates race across instances, not only inside one), the
	// reconciler, and a late one whose clock is past every lease (it seizes
	// claims of slow side effects).
	hookDoor, err := door(r.clock.Now)
	if err != nil {
		return err
	}
	hookDoor2, err := door(r.clock.Now)
	if err != nil {
		return err
	}
	recDoor, err := door(r.clock.Now)
	if err != nil {
		return err
	}
	lateDoor, err := door(func() time.Time { return r.clock.Now().Add(r.o.Lease + time.Minute) })
	if err != nil {
		return err
	}
	r.sink.seize = func(ctx context.Context, m results.Message) {
		name, _ := opname.Normalize(m.Operation, opname.Kind(m.Kind))
		id, _ := opname.DocID(name.Key())
		_, _ = lateDoor.RetryClaim(context.WithoutCancel(ctx), id)
	}
	r.secret = webhooktest.NewSecret()
	v, err := webhook.NewVerifier(webhook.Config{Secrets: []string{r.secret}, Now: r.clock.Now})
	if err != nil {
		return err
	}
	for _, d := range []*ingest.Door{hookDoor, hookDoor2} {
		var hd httpDoor = d
		if r.o.PlantedBug == "no-delivery-bind" {
			hd = unboundDoor{d}
		}
		r.hooks = append(r.hooks, httptest.NewServer(httpapi.Webhook(hd, v, log, 1<<20)))
	}
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: r.gemini.URL, HTTPClient: r.gemini.Client(),
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }, Log: log})
	if err != nil {
		return err
	}
	// Adoption finds the batches whose submitter was killed before its
	// bind; it runs only when the workload submits. Pages of 20 (serve
	// lists 50): every pass feeds its first page to the door, which is most
	// of what adoption costs a run, and a smaller reach leaves more jobs to
	// the search before an intent's alert.
	adopt := 0
	if r.o.Submit > 0 {
		adopt = 20
	}
	r.rec, err = reconcile.New(reconcile.Config{Ledger: l, Door: recDoor, Gemini: f, Log: log, Now: r.clock.Now,
		StuckAfter: r.o.StuckAfter, IntentGrace: r.o.IntentGrace, AdoptPageSize: adopt,
		Concurrency: 8, MaxOperations: 5000, PageSize: cmp.Or(r.o.PageSize, 200)})
	if err != nil {
		return err
	}
	if r.o.Submit > 0 {
		// The embedded submit path: register.Intents over the run's
		// ledger, binding through a webhook instance's door, as `lrosink
		// submit` without a Register URL does.
		in, err := register.NewIntents(hookDoor, l, r.clock.Now, r.o.IntentGrace)
		if err != nil {
			return err
		}
		g, err := submit.NewGemini(submit.GeminiConfig{APIKey: fakegemini.DefaultAPIKey, BaseURL: r.gemini.URL, HTTPClient: r.gemini.Client()})
		if err != nil {
			return err
		}
		if r.submitter, err = submit.New(g, simIntents{submit.Embedded(in), r}, submit.Options{Now: r.clock.Now}); err != nil {
			return err
		}
	}
	r.register, r.dice = httpapi.Register(hookDoor, log), d
	return nil
}

// generate draws every operation's lifecycle and webhook schedule.
func (r *runner) generate() {
	rng := rand.New(rand.NewPCG(uint64(r.o.Seed), 0x5eed))
	// A stream of its own: the rest of a seed's workload is the same with
	// or without submission faults.
	delays := rand.New(rand.NewPCG(uint64(r.o.Seed), 0x5b))
	end := r.t0.Add(r.o.Horizon)
	terminals := []lifecycle.State{lifecycle.Succeeded, lifecycle.Failed, lifecycle.Cancelled, lifecycle.Expired}
	for i := range r.o.Ops {
		p := plan{id: fmt.Sprintf("sim-%05d", i), notify: rng.Float64() >= r.o.NeverNotified}
		p.label = p.id
		// Decided by the dice, not the workload's random stream, so the rest
		// of a seed's workload is the same with or without this fault.
		if p.hardMeta = r.dice.roll(r.o.UnstorableMetadata, "unstorable-metadata", p.id); p.hardMeta {
			p.bigMeta = r.dice.roll(0.5, "oversize-metadata", p.id)
			r.counts.UnstorableMetadata.Add(1)
		}
		switch k := rng.Float64(); {
		case k < 0.7:
			p.kind, p.name = opname.KindBatch, "batches/"+p.id
		case k < 0.9:
			p.kind, p.name = opname.KindInteraction, "interactions/"+p.id
		default:
			p.kind, p.name = opname.KindVideo, "operations/"+p.id
		}
		p.submit = r.t0.Add(time.Duration(rng.Int64N(int64(10 * time.Minute))))
		t := p.submit.Add(time.Duration(1+rng.Int64N(20)) * time.Minute)
		p.steps = append(p.steps, step{at: t, state: lifecycle.Running})
		if p.kind == opname.KindInteraction && rng.Float64() < 0.4 {
			for range 1 + rng.IntN(2) {
				t = t.Add(time.Duration(1+rng.Int64N(15)) * time.Minute)
				p.steps = append(p.steps, step{at: t, state: lifecycle.RequiresAction})
				t = t.Add(time.Duration(1+rng.Int64N(15)) * time.Minute)
				p.steps = append(p.steps, step{at: t, state: lifecycle.Running})
			}
		}
		if rng.Float64() >= r.o.NeverFinish {
			t = t.Add(time.Duration(rng.Int64N(int64(4 * time.Hour))))
			if t.After(end.Add(-30 * time.Minute)) {
				t = end.Add(-30 * time.Minute)
			}
			p.terminal = terminals[rng.IntN(4)]
			switch {
			case p.kind == opname.KindVideo && p.terminal != lifecycle.Succeeded:
				p.terminal = lifecycle.Failed // video operations succeed or fail
			case p.kind == opname.KindInteraction && p.terminal == lifecycle.Expired:
				p.terminal = lifecycle.Succeeded // interactions do not expire
			}
			last := step{at: t, state: p.terminal}
			// The dice, not rng, choose the new end states and shapes:
			// the rest of a seed's workload stays what it was.
			if p.kind == opname.KindInteraction && r.dice.roll(r.o.Incomplete, "incomplete", p.id) {
				p.terminal, last.state, last.raw = lifecycle.Incomplete, lifecycle.Incomplete, "incomplete"
				if r.dice.roll(0.5, "budget-exceeded", p.id) {
					last.raw = "budget_exceeded"
				}
				r.counts.Incomplete.Add(1)
			}
			if p.kind == opname.KindBatch {
				p.stats, p.partial = batchStats(i, p.terminal, r.dice.roll(r.o.PartialBatches, "partial-batch", p.id))
				if p.partial {
					r.counts.PartialBatches.Add(1)
				}
			}
			if p.terminal == lifecycle.Failed && p.kind != opname.KindBatch && r.dice.roll(r.o.ErrorObjects, "error-object", p.id) {
				p.errorObject = true
				r.counts.ErrorObjects.Add(1)
			}
			p.steps = append(p.steps, last)
		}
		// The dice, not rng, choose poison: the workload of a seed stays
		// the same whatever the poison rate.
		if r.dice.roll(r.o.Poison, "poison", p.name) {
			p.poison, p.unschedulable = true, r.dice.roll(0.5, "unschedulable", p.name)
			id, _ := opname.DocID(opname.KeyPrefix + p.name)
			r.poison.ops[id] = p.unschedulable
			r.counts.Poison.Add(1)
			if p.unschedulable {
				r.counts.PoisonUnschedulable.Add(1)
			}
		}
		r.chooseSubmission(&p, i, delays)
		r.plans = append(r.plans, p)
		for si, s := range p.steps {
			typ := eventType(p.kind, s.state)
			if typ == "" || !p.notify {
				continue
			}
			r.rep.Deliveries.Events++
			if rng.Float64() < r.o.Drop {
				r.rep.Deliveries.Dropped++
				continue
			}
			d := delivery{at: s.at.Add(time.Duration(rng.Int64N(int64(2 * time.Minute)))), op: i,
				id: fmt.Sprintf("msg_%s_%d", p.id, si), typ: typ, eventAt: s.at}
			if rng.Float64() < r.o.Reorder {
				d.at = d.at.Add(time.Duration(5+rng.Int64N(60)) * time.Minute) // arrives after later events
				r.rep.Deliveries.Reordered++
			}
			r.queue = append(r.queue, d)
			for rng.Float64() < r.o.Dup {
				dup := d
				// Half the copies arrive in a burst with the original (they
				// race, on different instances); the rest up to 30 min later.
				if rng.IntN(2) == 0 {
					dup.at = d.at.Add(time.Duration(rng.Int64N(int64(30 * time.Minute))))
				}
				r.queue = append(r.queue, dup)
				r.rep.Deliveries.Duplicated++
			}
		}
	}
}

// batchStats is what Gemini reports for batch i ending in state s: counts
// as strings, zeros omitted (proto3 JSON). A partial batch succeeded with
// some failed requests; a failed, cancelled or expired one left some
// pending. partial is false unless s is SUCCEEDED.
func batchStats(i int, s lifecycle.State, partial bool) (*fakegemini.BatchStats, bool) {
	n := 10 + i%90
	str := func(v int) string {
		if v == 0 {
			return ""
		}
		return strconv.Itoa(v)
	}
	switch s {
	case lifecycle.Succeeded:
		failed := 0
		if partial {
			failed = 1 + i%(n-1)
		}
		return &fakegemini.BatchStats{RequestCount: str(n), SuccessfulRequestCount: str(n - failed), FailedRequestCount: str(failed)}, partial
	default:
		done := i % n
		return &fakegemini.BatchStats{RequestCount: str(n), SuccessfulRequestCount: str(done / 2), FailedRequestCount: str(done - done/2),
			PendingRequestCount: str(n - done)}, false
	}
}

func eventType(k opname.Kind, s lifecycle.State) string {
	switch k {
	case opname.KindBatch:
		switch s {
		case lifecycle.Succeeded:
			return "batch.succeeded"
		case lifecycle.Failed:
			return "batch.failed"
		case lifecycle.Cancelled:
			return "batch.cancelled"
		case lifecycle.Expired:
			return "batch.expired"
		}
	case opname.KindInteraction:
		switch s {
		case lifecycle.Succeeded:
			return "interaction.completed"
		case lifecycle.Failed:
			return "interaction.failed"
		case lifecycle.Cancelled:
			return "interaction.cancelled"
		case lifecycle.RequiresAction:
			return "interaction.requires_action"
		}
	case opname.KindVideo:
		if s.Terminal() {
			return "video.generated"
		}
	}
	return ""
}
