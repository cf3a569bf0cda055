// Package ingest is the one door through which operation state changes. The
// webhook, the reconciler and registration all call Door.Ingest; nothing else
// writes operation state.
//
// The path of an event:
//  1. Normalize the name (one key per operation, whatever form it came in).
//  2. Read the operation once and run the pure reducer. A dropped event that
//     owes no side effect returns here: no write, no transaction.
//  3. Otherwise commit the new state fenced on the revision read (a
//     concurrent writer makes the commit fail and the door re-reads); the
//     first entry into a terminal state creates the claim in the same commit.
//  4. Publish the results message, then mark the claim DONE only if this
//     holder still holds it. A failed publish releases the claim at once.
//     A claim seized after its lease ran out first asks a sink that can
//     tell (TailChecker) whether the dead holder published it already.
//
// Steps 2 to 4 are decide and the effect stage; the stages around them are
// listed in order, each with why, in one place: Door.pipeline (stages.go).
// Identical concurrent deliveries in one process are coalesced, so a burst
// costs one read and at most one commit. Registrations are not coalesced:
// each carries its submitter's metadata, which the door merges (missing keys
// only) whatever the operation's state.
//
// The door's work runs detached from its callers and is tracked: Drain
// refuses new work and waits for the work in flight, so a process can stop
// without cutting a side effect short.
package ingest

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fetcherr"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/recall"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/retry"
)

// Sink publishes a results message; nil means durably accepted.
type Sink interface {
	Publish(ctx context.Context, m results.Message) error
}

// TailChecker is optionally implemented by a Sink that can say whether a
// message is among what it wrote recently (the file sink: the tail of its
// file, sink.TailBytes). The door asks before it publishes the message of a
// claim seized after its lease ran out, whose holder may have published and
// died before it committed DONE: found, the door commits DONE without
// publishing again, which makes such a sink's results exactly once across
// crashes. The question is the sink's; the decision is the door's.
type TailChecker interface {
	// InTail reports whether m (the same idempotency_key, and the same
	// replay_id or none) is in the sink's recent tail, and durable there.
	// false means "not found" or "cannot tell": the door publishes.
	InTail(ctx context.Context, m results.Message) (bool, error)
}

// Outcome is what an ingest did, as reported to callers and logs.
type Outcome string

// Outcomes.
const (
	OutcomeApplied    Outcome = "applied"
	OutcomeCompleted  Outcome = "completed"
	OutcomeRecovered  Outcome = "recovered"
	OutcomeDropped    Outcome = "dropped"
	OutcomeDuplicate  Outcome = "duplicate"
	OutcomeConflict   Outcome = "conflict-recorded"
	OutcomeInProgress Outcome = "in-progress-elsewhere"
	// OutcomeRejected is only logged and observed: the event's name is
	// invalid, and Ingest returns an *event.InvalidError.
	OutcomeRejected Outcome = "rejected"
)

// Result describes one ingest.
type Result struct {
	Outcome   Outcome
	Reason    string
	Operation string // canonical name; empty if the name was invalid
	State     lifecycle.State
	Version   int64
	// Rev is the revision the door wrote, when it wrote one (zero
	// otherwise): a caller that writes next (the reconciler scheduling its
	// next check) fences on it without reading the operation again.
	Rev       ledger.Revision
	Published bool
	// AlreadyPublished: the message of a claim seized after its lease ran
	// out was found in the sink (TailChecker), so it was not published
	// again; Published is true too (the message is out).
	AlreadyPublished bool
	// MetadataMerged: a register added metadata keys to a known operation
	// (its state untouched).
	MetadataMerged bool
	// EffectOwed: the operation's side effect is owed and was left for
	// later (Event.LeaveOwed).
	EffectOwed bool
	// Intent is the key of the intent this ingest bound to the operation
	// (CONTRACT.md §5), in the commit that wrote it; "" when it bound none.
	Intent string
	// IntentNote is what became of the intent the event named:
	// ReasonBoundIntent, or why none was bound (event.ReasonIntentUnknown,
	// event.ReasonIntentBoundElsewhere, event.ReasonIntentMismatch); ""
	// when it named none, or one already bound to the operation.
	IntentNote string
}

// ReasonBoundIntent labels an ingest that bound an intent to its
// operation (Result.IntentNote, the history entry's reason).
const ReasonBoundIntent = "bound-intent"

// Label is the reason a caller answers and logs for r: its IntentNote when
// the event bound an intent or named one it could not, else its Reason.
func (r Result) Label() string {
	if r.IntentNote != "" {
		return r.IntentNote
	}
	return r.Reason
}

// Errors callers map to answers: an *event.InvalidError is the sender's
// fault (400);
// anything else means "try again later" (503).
var (
	ErrUnavailable = errors.New("ledger unavailable")
	ErrSideEffect  = errors.New("side effect not completed")
	// ErrClaimMissing: a terminal operation's side effect is owed but its
	// claim, which holds the message to publish, is gone. It needs an
	// operator (`lrosink replay`); every attempt until then fails with it.
	ErrClaimMissing = errors.New("claim missing while its side effect is owed")
	// ErrOperationMissing: a claim owes its results message but its
	// operation is gone, so the claim cannot be seized. It is an
	// ErrClaimMissing to every caller that classes errors.
	ErrOperationMissing = fmt.Errorf("operation missing while its side effect is owed: %w", ErrClaimMissing)
	// ErrStopping (always with ErrUnavailable): the process is stopping.
	// The door takes no new work, and a caller still waiting for work in
	// flight stops waiting: the work goes on, and Drain waits for it.
	ErrStopping = errors.New("the process is stopping")
)

// invalidName is the door's refusal of a name it cannot normalize; the
// "invalid event: " prefix is the detail the Webhook function answers.
func invalidName(err error) error {
	return &event.InvalidError{Reason: event.ReasonInvalidName, Err: fmt.Errorf("invalid event: %w", err)}
}

// DefaultLease is how long a claim holder has to publish and commit DONE
// before the next attempt may seize the claim (LROSINK_CLAIM_LEASE's
// default): far longer than a publish, short enough that a crashed holder's
// message is not late by much.
const DefaultLease = 10 * time.Minute

// Store is what the door needs from the ledger: the two document reads and
// the claim protocol's steps (claims.Ledger over any ledger adapter).
type Store interface {
	GetOperation(ctx context.Context, id string) (ledger.Operation, error)
	GetClaim(ctx context.Context, id string) (ledger.Claim, error)
	GetIntent(ctx context.Context, key string) (ledger.Intent, error)
	CommitOperation(ctx context.Context, op ledger.Operation, claim *ledger.Claim) (ledger.Revision, *ledger.Lease, error)
	// CommitBound is CommitOperation with the bound intent in the same
	// commit (claims.Ledger.CommitBound).
	CommitBound(ctx context.Context, op ledger.Operation, claim *ledger.Claim, in ledger.Intent) (ledger.Revision, *ledger.Lease, error)
	SeizeClaim(ctx context.Context, c ledger.Claim, holder string, leaseUntil, expireAt, now time.Time) (*ledger.Lease, error)
	ReleaseClaim(ctx context.Context, l ledger.Lease, expireAt, now time.Time) error
	CompleteClaim(ctx context.Context, l ledger.Lease, now time.Time) error
	CloseOrphanClaim(ctx context.Context, c ledger.Claim, now time.Time) error
}

// Config holds the door's dependencies.
type Config struct {
	Store Store
	Sink  Sink
	Log   *slog.Logger
	Now   func() time.Time
	// Lease is how long a claim holder may take before its claim is seized.
	Lease time.Duration
	// Grace delays the first reconcile check of a newly seen operation.
	Grace time.Duration
	// ClaimTTL is how long claims are kept (a TTL policy deletes them after).
	ClaimTTL time.Duration
	// MaxAttempts bounds re-reads after revision conflicts.
	MaxAttempts int
	// Timeout bounds one coalesced ingest, which runs detached from the
	// caller's cancellation so that one impatient caller cannot fail the
	// others waiting on the same work. The claim's write after a publish
	// (DONE or release) has a budget of its own (claimWriteBudget).
	Timeout time.Duration
	// NewToken makes claim holder tokens; defaults to 128 random bits.
	NewToken func() string
	// Faults, when set, is consulted at each crash boundary; an error
	// there makes the door stop as if the process died at that point (no
	// release, no cleanup). Only tests and the simulator set it.
	Faults Faults
	// Confirmer asks the Gemini API for an operation's state, to confirm
	// terminal hints (see Event.Hint); nil when no API key is configured.
	Confirmer Confirmer
	// Observer is told every decision the door logs (metrics); nil is a
	// no-op.
	Observer Observer
	// RecallEntries bounds each memory of the confirm stage (what Gemini
	// answered per operation; the delivery attempts answered);
	// DefaultRecallEntries when not positive.
	RecallEntries int
}

// Observer is told each decision the door logs as "ingest decision", with
// the same outcome, reason and error, once per piece of work (a coalesced
// burst is one decision).
type Observer interface {
	ObserveDecision(source event.Source, res Result, err error)
}

func (d *Door) notify(source event.Source, res Result, err error) {
	if d.cfg.Observer != nil {
		d.cfg.Observer.ObserveDecision(source, res, err)
	}
}

// FaultPoint names a crash boundary of the door.
type FaultPoint string

// The crash boundaries, in order.
const (
	// FaultBeforeCommit: decided, nothing written (a crash inside the
	// transaction: it never commits).
	FaultBeforeCommit FaultPoint = "before-commit"
	// FaultAfterCommit: state and claim committed, nothing published.
	FaultAfterCommit FaultPoint = "after-commit"
	// FaultAfterPublish: published, claim not yet DONE.
	FaultAfterPublish FaultPoint = "after-publish"
)

// Faults injects crashes at the door's boundaries.
type Faults interface {
	At(ctx context.Context, p FaultPoint, operation string) error
}

// ErrCrashed marks an error injected by Faults.
var ErrCrashed = errors.New("crash injected")

func (d *Door) fault(ctx context.Context, p FaultPoint, operation string) error {
	if d.cfg.Faults == nil {
		return nil
	}
	if err := d.cfg.Faults.At(ctx, p, operation); err != nil {
		return fmt.Errorf("%w at %s of %s: %w", ErrCrashed, p, operation, err)
	}
	return nil
}

// Door is the ingest door.
type Door struct {
	cfg    Config
	flight *flight // coalesces identical work and runs it (flight.go)
	handle handler // the stages of pipeline around decide
	// answers and attempts are the confirm stage's memory (confirm.go):
	// Gemini's answer per operation id; the operation id per delivery
	// attempt answered.
	answers  *recall.Memory[answer]
	attempts *recall.Memory[string]

	mu       sync.Mutex
	draining bool
	inFlight int
	idle     chan struct{} // closed once draining and inFlight is zero
	stopped  chan struct{} // closed by LetWaitersGo
	// waitersGone: stopped is closed.
	waitersGone bool
}

// New checks cfg and returns a door.
func New(cfg Config) (*Door, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("ingest: Store is required")
	case cfg.Sink == nil:
		return nil, errors.New("ingest: Sink is required")
	case cfg.Log == nil:
		return nil, errors.New("ingest: Log is required")
	case cfg.Now == nil:
		return nil, errors.New("ingest: Now is required")
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Grace < 0 {
		return nil, errors.New("ingest: Grace must not be negative")
	}
	if cfg.ClaimTTL <= 0 {
		cfg.ClaimTTL = 30 * 24 * time.Hour
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 25
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.NewToken == nil {
		cfg.NewToken = randomToken
	}
	if cfg.RecallEntries <= 0 {
		cfg.RecallEntries = DefaultRecallEntries
	}
	d := &Door{cfg: cfg, flight: newFlight(), stopped: make(chan struct{}),
		answers: recall.New[answer](cfg.RecallEntries, cfg.Now), attempts: recall.New[string](cfg.RecallEntries, cfg.Now)}
	d.handle = d.chain()
	return d, nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = crand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return hex.EncodeToString(b)
}

// Ingest applies one event. It is the only way operation state changes.
func (d *Door) Ingest(ctx context.Context, ev event.Event) (Result, error) {
	return d.IngestRead(ctx, ev, nil)
}

// IngestRead is Ingest for a caller that has just read the event's
// operation (the reconciler, which lists due operations): the first
// attempt decides on read instead of reading it again. Every commit is
// fenced on the revision it decided on, so a copy that is no longer
// current costs one conflict and a re-read, never a wrong write; a drop
// decided on it stands, as the stored state only moves forward.
func (d *Door) IngestRead(ctx context.Context, ev event.Event, read *ledger.Operation) (Result, error) {
	name, err := opname.Normalize(ev.Name, ev.Kind)
	if err != nil {
		d.cfg.Log.WarnContext(ctx, "ingest decision", "outcome", "rejected", "reason", "invalid-name",
			"source", string(ev.Source), "delivery_id", ev.DeliveryID, "error", err.Error())
		d.notify(ev.Source, Result{Outcome: OutcomeRejected, Reason: "invalid-name"}, nil)
		return Result{}, invalidName(err)
	}
	id, err := opname.DocID(name.Key())
	if err != nil {
		return Result{}, invalidName(err)
	}
	j := &job{id: id, name: name, ev: applied{Event: withoutIntentKey(ev)}}
	if ev.Hint {
		j.ev = bodyless(ev)
		if ev.SignedBody {
			// Usable once Gemini has confirmed the operation (confirm.go).
			j.bodyIntent = intentNamed(ev)
		}
		if ev.State.Terminal() || d.cfg.Confirmer != nil {
			j.confirm, j.key = true, confirmKey(id, ev.State)
			return d.handle(ctx, j)
		}
	}
	if !ev.Hint {
		// Every source but a hint is trusted for the intent it names: a v1
		// delivery (our secret), Gemini's answer, adoption, a registration.
		j.intent = intentNamed(ev)
		j.strictIntent = ev.Source == event.SourceRegister && ev.Intent != ""
	}
	if read != nil && read.ID == id { // else not this event's operation: read it
		j.read = read
	}
	if in := j.ev; in.Source != event.SourceRegister {
		// Registrations are not coalesced (key ""): they carry different
		// metadata and do not come in bursts. Concurrent first
		// registrations race on the create precondition; the loser
		// re-reads and merges its metadata.
		j.key = id + "|" + string(in.State) + "|" + strconv.FormatInt(lifecycle.ServerTime(in.UpdateTime).UnixNano(), 10) + "|" + string(in.Source)
	}
	return d.handle(ctx, j)
}

// RetryClaim runs the side effect of a terminal operation whose claim was
// released or whose lease ran out (the reconciler calls it for due claims).
func (d *Door) RetryClaim(ctx context.Context, id string) (Result, error) {
	return d.handle(ctx, &job{key: id + "|retry", id: id, recover: true,
		ev: applied{Event: event.Event{Source: event.SourceReconcile}}})
}

// begin admits one piece of work unless the door is draining.
func (d *Door) begin() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return false
	}
	d.inFlight++
	return true
}

func (d *Door) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inFlight--
	if d.draining && d.inFlight == 0 {
		close(d.idle)
	}
}

// StopTaking is the start of a stop: the door takes no new work (new calls
// fail with ErrStopping, which the handlers answer 503). Work in flight goes
// on, its callers still waiting (LetWaitersGo). Idempotent.
func (d *Door) StopTaking() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return
	}
	d.draining, d.idle = true, make(chan struct{})
	if d.inFlight == 0 {
		close(d.idle)
	}
}

// LetWaitersGo lets the callers still waiting for work in flight go, with
// ErrStopping, so that a server's shutdown need not wait on them; the work
// goes on detached, for Drain. Idempotent.
func (d *Door) LetWaitersGo() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.waitersGone {
		d.waitersGone = true
		close(d.stopped)
	}
}

// Drain stops the door taking new work (StopTaking) and waits until the
// work in flight has finished or ctx ends. A process calls it before
// closing the ledger and sink the work uses; work still running when ctx
// ends fails on the closed clients, and a claim it held is seized after its
// lease.
func (d *Door) Drain(ctx context.Context) error {
	d.StopTaking()
	d.LetWaitersGo()
	d.mu.Lock()
	idle := d.idle
	d.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		d.mu.Lock()
		n := d.inFlight
		d.mu.Unlock()
		if n == 0 {
			// Idle too: a select with both ready picks at random, and a stop
			// whose budget is spent must not report work cut off when none was.
			return nil
		}
		return fmt.Errorf("ingest: drain: %d in flight: %w", n, ctx.Err())
	}
}

// decide is one read-decide-commit round, the handler the stages wrap;
// ErrConflict means "re-read". It decides on j.read when the caller gave it.
// A claim it takes (created with the first terminal state, or seized) is
// left in j.effect for the effect stage.
func (d *Door) decide(ctx context.Context, j *job) (Result, error) {
	if j.recover {
		return d.recoverClaim(ctx, j, nil, lifecycle.Decision{Reason: "claim-retry"})
	}
	op, err := d.current(ctx, j.id, j.read)
	if err != nil {
		return Result{Operation: j.name.Canonical}, fmt.Errorf("%w: read %s: %w", ErrUnavailable, j.name.Canonical, err)
	}
	bind, note, err := d.intentToBind(ctx, j, op)
	if err != nil {
		return Result{Operation: j.name.Canonical}, err
	}
	res, err := d.decideOn(ctx, j, op, bind)
	switch {
	case res.Intent != "":
		res.IntentNote = ReasonBoundIntent
	case note != "":
		res.IntentNote = note
	}
	return res, err
}

// decideOn decides the event on op, binding intent bind (nil: none) to
// the operation in the commit that writes it.
func (d *Door) decideOn(ctx context.Context, j *job, op ledger.Operation, bind *ledger.Intent) (Result, error) {
	name, ev := j.name, j.ev
	now := d.cfg.Now()
	dec := lifecycle.Apply(op.Current(), lifecycle.Event{State: ev.State, UpdateTime: ev.UpdateTime})
	if dec.Applied {
		return d.apply(ctx, j, op, dec, now, bind)
	}
	res := Result{Outcome: OutcomeDropped, Reason: string(dec.Reason), Operation: name.Canonical, State: op.State, Version: op.Rev.Version}
	if dec.Reason == lifecycle.ReasonDuplicate {
		res.Outcome = OutcomeDuplicate
	}
	if dec.Conflict() {
		res.Outcome = OutcomeDuplicate // this conflict was recorded before
		if !op.HasConflict(ev.State) {
			next := op
			next.Conflicts = appendBounded(op.Conflicts, entry(now, ev, dec), ledger.MaxConflicts)
			rev, _, err := d.cfg.Store.CommitOperation(ctx, next, nil)
			if err != nil {
				return res, commitErr(name, err)
			}
			op.Rev, res.Outcome, res.Version, res.Rev = rev, OutcomeConflict, rev.Version, rev
		}
	}
	if bind != nil && op.Rev.Exists() {
		// The operation is known (adoption registered it first, or its
		// submitter's bind was lost): the intent becomes its registration
		// all the same, its state untouched.
		next, err := d.bindKnown(ctx, j, op, *bind, now)
		if err != nil {
			return res, err
		}
		op, res.Version, res.Rev, res.Intent = next, next.Rev.Version, next.Rev, bind.Key
	}
	if ev.Source == event.SourceRegister && op.Rev.Exists() {
		// The submitter's metadata is merged (missing keys only) whatever
		// the state, in a commit that changes nothing else; a settled
		// operation's message was fixed when it settled and stays as it is.
		// What would push the stored map over its bound is dropped (keep).
		// A registration naming the model of a video known only as
		// operations/ID (first seen in a delivery that omitted it) gives the
		// reconciler and hint confirmation a name Gemini can answer for.
		md := d.keep(ctx, name, ev, "user_metadata", op.UserMetadata, ev.UserMetadata, ledger.MaxMetadataBytes)
		upgrade := op.APIName == op.Name && moreSpecific(name.APIName, op.APIName)
		if len(md) > len(op.UserMetadata) || upgrade {
			next := op
			next.UserMetadata = md
			if upgrade {
				next.APIName = name.APIName
			}
			rev, _, err := d.cfg.Store.CommitOperation(ctx, next, nil)
			if err != nil {
				return res, commitErr(name, err)
			}
			op.Rev, res.Version, res.Rev, res.MetadataMerged = rev, rev.Version, rev, len(md) > len(op.UserMetadata)
		}
	}
	// A terminal operation whose claim was released or whose lease ran out
	// still owes its side effect: any delivery may pick it up.
	if op.State.Terminal() && op.Effect.Owed(now) {
		if ev.LeaveOwed {
			res.EffectOwed = true
			return res, nil
		}
		rec, err := d.recoverClaim(ctx, j, &op, dec)
		rec.MetadataMerged = res.MetadataMerged
		if err != nil || j.effect != nil || rec.Outcome == OutcomeInProgress {
			return rec, err
		}
	}
	return res, nil
}

// current is the operation to decide on: read, or the stored one (a new
// one when there is none).
func (d *Door) current(ctx context.Context, id string, read *ledger.Operation) (ledger.Operation, error) {
	if read != nil {
		return *read, nil
	}
	op, err := d.cfg.Store.GetOperation(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.Operation{ID: id}, nil
	}
	return op, err
}

func (d *Door) apply(ctx context.Context, j *job, op ledger.Operation, dec lifecycle.Decision, now time.Time, bind *ledger.Intent) (Result, error) {
	name, ev := j.name, j.ev
	next := op
	meta := op.UserMetadata
	next.State, next.UpdateTime = dec.Next.State, dec.Next.UpdateTime
	if ev.GeminiStatus != "" {
		// What Gemini said with the state applied; a source without one (a
		// registration) leaves the last observed status.
		next.GeminiStatus = ledger.Truncate(ev.GeminiStatus, ledger.MaxGeminiStatusBytes)
	}
	e := entry(now, ev, dec)
	if bind != nil {
		// The intent becomes the operation's registration: its metadata
		// exactly (the event's adds only keys it lacks), and on a first
		// sighting its record time as the submission's.
		e.Reason += "; " + ReasonBoundIntent
		next.Intent = bind.Key
		meta = mergeMissing(meta, bind.Metadata)
	}
	next.History = appendBounded(op.History, e, ledger.MaxHistory)
	if dec.FirstSighting {
		next.Name, next.APIName, next.Kind = name.Canonical, name.APIName, name.Kind
		next.SubmittedAt = now
		if bind != nil && !bind.CreatedAt.IsZero() {
			next.SubmittedAt = bind.CreatedAt
		}
		next.NextCheckAt = now.Add(d.cfg.Grace)
	} else if moreSpecific(name.APIName, op.APIName) {
		next.APIName = name.APIName
	}
	next.UserMetadata = d.keep(ctx, name, ev, "user_metadata", meta, ev.UserMetadata, ledger.MaxMetadataBytes)
	base := op.Output
	if dec.EntersTerminal {
		// The event that settles the operation carries Gemini's final
		// output: its keys win over what earlier, non-terminal observations
		// stored (an interaction's output_text while it waited for a
		// function result), which the message would otherwise carry.
		base = withoutKeys(base, ev.Output)
	}
	next.Output = d.keep(ctx, name, ev, "output", base, ev.Output, ledger.MaxOutputBytes)
	if next.Error == nil && ev.Error != nil {
		e := *ev.Error
		e.Message = ledger.Truncate(e.Message, ledger.MaxErrorMessageBytes)
		next.Error = &e
	}
	res := Result{Outcome: OutcomeApplied, Reason: string(dec.Reason), Operation: name.Canonical, State: next.State}
	var claim *ledger.Claim
	leaseUntil := now.Add(d.cfg.Lease)
	if dec.EntersTerminal {
		next.SettledAt, next.SettledBy, next.NextCheckAt = now, string(ev.Source), time.Time{}
		// The store's claim protocol makes it held, its first attempt, and
		// mirrors it on the operation (claims.Ledger.CommitOperation).
		claim = &ledger.Claim{
			ID: op.ID, Key: name.Key(), Operation: name.Canonical,
			Holder: d.cfg.NewToken(), LeaseUntil: leaseUntil,
			CreatedAt: now, ExpireAt: now.Add(d.cfg.ClaimTTL),
			Message: message(next, name.Key()),
		}
	}
	if err := d.fault(ctx, FaultBeforeCommit, name.Canonical); err != nil {
		return res, err
	}
	var rev ledger.Revision
	var lease *ledger.Lease
	var err error
	if bind != nil {
		rev, lease, err = d.cfg.Store.CommitBound(ctx, next, claim, boundIntent(*bind, next, ev.Source, now))
	} else {
		rev, lease, err = d.cfg.Store.CommitOperation(ctx, next, claim)
	}
	if err != nil {
		return res, commitErr(name, err)
	}
	res.Version, res.Rev = rev.Version, rev
	if bind != nil {
		res.Intent = bind.Key
	}
	if claim == nil {
		return res, nil
	}
	res.Outcome = OutcomeCompleted
	j.effect = &effect{lease: lease, leaseUntil: leaseUntil, message: claim.Message}
	return res, nil
}

// recoverClaim takes over a released or expired claim and leaves its side
// effect in j.effect; a claim that is DONE or live elsewhere needs nothing.
// op is the operation as read when the caller has it (its mirror said the
// effect may be owed); nil for a retry of a claim listed as due.
func (d *Door) recoverClaim(ctx context.Context, j *job, op *ledger.Operation, dec lifecycle.Decision) (Result, error) {
	id := j.id
	c, err := d.cfg.Store.GetClaim(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return d.claimMissing(ctx, id, op)
	}
	if err != nil {
		return Result{Operation: id}, fmt.Errorf("%w: read claim %s: %w", ErrUnavailable, id, err)
	}
	now := d.cfg.Now()
	res := Result{Outcome: OutcomeDuplicate, Reason: string(dec.Reason), Operation: c.Operation, State: lifecycle.State(c.Message.State)}
	switch {
	case c.Status == ledger.ClaimDone:
		return res, nil
	case c.Live(now):
		res.Outcome = OutcomeInProgress
		return res, nil
	}
	leaseUntil := now.Add(d.cfg.Lease)
	lease, err := d.cfg.Store.SeizeClaim(ctx, c, d.cfg.NewToken(), leaseUntil, now.Add(d.cfg.ClaimTTL), now)
	if errors.Is(err, ledger.ErrFenced) {
		// Someone else seized it first, or the operation whose mirror the
		// seize patches is gone: then nobody can seize the claim and the
		// message would be lost in silence. One read, on this path only,
		// tells them apart.
		if _, gerr := d.cfg.Store.GetOperation(ctx, id); errors.Is(gerr, ledger.ErrNotFound) {
			return res, d.operationMissing(ctx, c)
		}
		res.Outcome = OutcomeInProgress
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("%w: seize claim %s: %w", ErrUnavailable, c.Operation, err)
	}
	res.Outcome, res.Reason = OutcomeRecovered, "claim-"+string(c.Status)
	if c.Status == ledger.ClaimHeld {
		res.Reason = "lease-expired"
	}
	// A released claim's holder failed to publish (a sink's error means
	// "not published"); one whose lease ran out may have published.
	j.effect = &effect{lease: lease, leaseUntil: leaseUntil, message: c.Message, expired: c.Status == ledger.ClaimHeld}
	return res, nil
}

// claimMissing decides about a claim that is gone while the operation's
// mirror (or the due-claims query) said its side effect may be owed.
//
// Every seize and release moves a claim's expire_at to now + ClaimTTL and
// writes the mirror in the same commit (the claim's creation too), so the
// TTL policy can delete a claim only ClaimTTL after the write the mirror
// shows: at mirror.LeaseUntil - Lease + ClaimTTL for a held claim, and
// mirror.LeaseUntil + ClaimTTL for a released one. A claim whose effect
// keeps failing is retried by every reconcile pass, so it never gets there.
//
// DONE is not mirrored, so a held mirror cannot tell a completed claim from
// one whose holder died. Can a completed claim deleted by the TTL policy
// reach here? Gemini retries a delivery for 24 h, the reconciler reads only
// pending operations and existing claims, and replay reads the claim, not
// this path; but a registration (or any new event) for an operation that
// completed more than ClaimTTL ago does. So: a released mirror means the
// effect is owed for certain (a completion needs a seize first, which
// rewrites the mirror): missing claim = error. A held mirror with the claim
// gone before it could have expired: deleted out of band = error. A held
// mirror past that time: the normal end of a completed claim, a duplicate
// (an owed claim could only be there after ClaimTTL without any retry, i.e.
// with the reconciler down for a month, which its own alert reports). A
// claim listed as due that is gone (op nil) was not DONE: error.
//
// The error is ErrClaimMissing (a webhook answers 503; Gemini retries)
// with one ERROR line "alert":"claim-missing"; the operator republishes
// with `lrosink replay`, which settles the mirror.
func (d *Door) claimMissing(ctx context.Context, id string, op *ledger.Operation) (Result, error) {
	name := id
	if key, err := opname.KeyFromDocID(id); err == nil {
		name = strings.TrimPrefix(key, opname.KeyPrefix)
	}
	now := d.cfg.Now()
	if op != nil && op.Effect.Status == ledger.ClaimHeld && !now.Before(op.Effect.LeaseUntil.Add(d.cfg.ClaimTTL-d.cfg.Lease)) {
		return Result{Outcome: OutcomeDuplicate, Reason: "claim-expired", Operation: name, State: op.State}, nil
	}
	attrs := []any{"alert", "claim-missing", "operation", name}
	res := Result{Operation: name}
	if op != nil {
		res.State = op.State
		attrs = append(attrs, "effect_status", string(op.Effect.Status), "effect_lease_until", op.Effect.LeaseUntil)
	}
	d.cfg.Log.ErrorContext(ctx, "claim missing while its side effect is owed: run lrosink replay "+name, attrs...)
	return res, fmt.Errorf("%w: %s (the claim holding its results message is gone; lrosink replay republishes it)", ErrClaimMissing, name)
}

// operationMissing reports a claim owing its message whose operation is
// gone (deleted out of band, or by the TTL policy of a version that gave an
// owed Firestore operation its expire_at): the claim cannot be seized, so
// the message is published by nobody. One ERROR line "alert":"claim-missing"
// (the alert that already pages for an owed message nobody can publish)
// with "cause":"operation-missing", and ErrOperationMissing (a claim-missing
// error to the callers' classes: counted, 503 to a webhook), every attempt.
func (d *Door) operationMissing(ctx context.Context, c ledger.Claim) error {
	d.cfg.Log.ErrorContext(ctx, "operation missing while its claim owes the results message: run lrosink replay "+c.Operation,
		"alert", "claim-missing", "cause", "operation-missing", "operation", c.Operation, "claim_status", string(c.Status), "idempotency_key", c.Key)
	return fmt.Errorf("%w: %s (its claim still holds the results message; lrosink replay publishes it)", ErrOperationMissing, c.Operation)
}

// doneCommitAttempts bounds the tries at the DONE commit after a publish.
const doneCommitAttempts = 3

// claimWriteBudget bounds the claim's write after a publish (DONE, or the
// release of a failed one), which runs detached from the caller and from
// the work's Timeout: by then the message's fate is decided, and only this
// write keeps it from being published again.
const claimWriteBudget = 10 * time.Second

// runEffect publishes and then commits the claim DONE, fenced on the lease
// that runs until leaseUntil.
func (d *Door) runEffect(ctx context.Context, e effect, res Result) (Result, error) {
	l, leaseUntil, m := *e.lease, e.leaseUntil, e.message
	if err := d.fault(ctx, FaultAfterCommit, m.Operation); err != nil {
		return res, err
	}
	// The publish must end within the lease: past it the claim may be
	// seized and published by another holder, so a publish still running
	// then would be a second message outside the crash window. Cut short,
	// it fails and releases the claim like any failed publish.
	pctx, pcancel := context.WithTimeout(ctx, publishBudget(leaseUntil.Sub(d.cfg.Now())))
	found, err := d.published(pctx, e)
	if err != nil {
		pcancel()
		// Left held: whoever seizes it after this lease asks again, where a
		// release would have it published without asking.
		return res, fmt.Errorf("%w: look for %s's message in the results before publishing it again (the claim is retried after its lease): %w",
			ErrSideEffect, m.Operation, err)
	}
	if !found {
		err = d.cfg.Sink.Publish(pctx, m)
	}
	pcancel()
	if err != nil {
		// Release at once so the next delivery or reconcile pass retries
		// instead of waiting out the lease. Detached: the caller may be gone.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimWriteBudget)
		defer cancel()
		now := d.cfg.Now()
		if rerr := d.cfg.Store.ReleaseClaim(rctx, l, now.Add(d.cfg.ClaimTTL), now); rerr != nil {
			err = errors.Join(err, fmt.Errorf("release claim (it will be seized after the lease): %w", rerr))
		}
		return res, fmt.Errorf("%w: publish %s: %w", ErrSideEffect, m.Operation, err)
	}
	res.Published, res.AlreadyPublished = true, found
	if err := d.fault(ctx, FaultAfterPublish, m.Operation); err != nil {
		return res, err
	}
	// DONE has a budget of its own, detached from the work's Timeout: a
	// publish that succeeded just before that ran out must still be
	// recorded, or the claim is seized after its lease and published again.
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), claimWriteBudget)
	defer dcancel()
	if err := d.completeClaim(dctx, l, leaseUntil); err != nil {
		if errors.Is(err, ledger.ErrFenced) {
			// Our lease ran out and another holder seized the claim while we
			// published: both published the same message (same key); the new
			// holder commits DONE. Consumers dedupe on idempotency_key.
			d.cfg.Log.WarnContext(ctx, "claim seized before DONE; the new holder completes it",
				"operation", m.Operation, "idempotency_key", m.IdempotencyKey)
			return res, nil
		}
		return res, fmt.Errorf("%w: published %s but could not record DONE (the claim is retried after its lease): %w", ErrUnavailable, m.Operation, err)
	}
	return res, nil
}

// published asks a TailChecker sink whether the message of a claim seized
// after its lease is already out; every other effect is published.
func (d *Door) published(ctx context.Context, e effect) (bool, error) {
	tc, ok := d.cfg.Sink.(TailChecker)
	if !e.expired || !ok {
		return false, nil
	}
	return tc.InTail(ctx, e.message)
}

// publishBudget is how long a publish may take when left of the lease:
// all of it but a tenth (at most 5 s, at least 1 ms) kept for the DONE
// commit that follows.
func publishBudget(left time.Duration) time.Duration {
	margin := min(max(left/10, 0), 5*time.Second)
	return max(left-margin, time.Millisecond)
}

// completeClaim commits the claim DONE, retrying a transient store error a
// few times: a claim left HELD after a publish is seized after its lease and
// published again (an extra message). It never starts a try past the lease
// (the claim may be someone else's by then) and never retries ErrFenced
// (another holder has it; retrying cannot succeed).
func (d *Door) completeClaim(ctx context.Context, l ledger.Lease, leaseUntil time.Time) error {
	r := retry.Retrier{MaxAttempts: doneCommitAttempts, Delay: doneBackoff().Delay,
		Retryable: func(err error) bool { return !errors.Is(err, ledger.ErrFenced) },
		MayWait:   func(wait time.Duration) bool { return d.cfg.Now().Add(wait).Before(leaseUntil) }}
	_, err := r.Do(ctx, func(ctx context.Context) error { return d.cfg.Store.CompleteClaim(ctx, l, d.cfg.Now()) })
	if we := (*retry.WaitError)(nil); errors.As(err, &we) {
		return errors.Join(we.Last, we.Err)
	}
	return err
}

func (d *Door) log(ctx context.Context, ev applied, recalled, intent string, res Result, err error, start time.Time) {
	d.notify(ev.Source, res, err)
	// Typed attributes (LogAttrs): one line per delivery, so boxing every
	// value for the key-value form showed in serve's profile.
	attrs := make([]slog.Attr, 0, 16)
	attrs = append(attrs,
		slog.String("operation", res.Operation), slog.String("outcome", string(res.Outcome)), slog.String("reason", res.Reason),
		slog.String("state", string(res.State)), slog.String("event_state", string(ev.State)), slog.String("source", string(ev.Source)),
		slog.Int64("version", res.Version), slog.Bool("published", res.Published),
		slog.Int64("duration_ms", d.cfg.Now().Sub(start).Milliseconds()),
	)
	if ev.DeliveryID != "" {
		attrs = append(attrs, slog.String("delivery_id", ev.DeliveryID))
	}
	if ev.delivered != "" { // an event that stands in for a hint
		attrs = append(attrs, slog.String("delivered_state", string(ev.delivered)))
		if ev.confirmedBy != "" {
			attrs = append(attrs, slog.String("confirmed_by", ev.confirmedBy))
		}
	}
	if res.MetadataMerged {
		attrs = append(attrs, slog.Bool("metadata_merged", true))
	}
	if recalled != "" {
		// Answered from the confirm stage's memory: no Gemini call.
		attrs = append(attrs, slog.String("recalled", recalled))
	}
	if res.AlreadyPublished {
		attrs = append(attrs, slog.Bool("already_published", true))
	}
	if res.IntentNote != "" {
		// CONTRACT.md §5: bound-intent, or why the intent the event
		// names was not bound.
		attrs = append(attrs, slog.String("intent_note", res.IntentNote), slog.String("intent", intent))
	}
	var invalid *event.InvalidError
	level := slog.LevelInfo
	switch {
	case errors.As(err, &invalid):
		// The caller's to fix (a bind of an intent that cannot be bound),
		// answered 4xx: no failure of ours.
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("error", err.Error()))
	case errors.Is(err, ErrNotFoundYet) || errors.Is(err, fetcherr.ErrBudgetSpent) || errors.Is(err, ErrRecalled):
		// Expected answers that Gemini's redelivery settles (a replayed
		// foreign delivery meets them too), or one already logged at its
		// own level when the memory's answer was asked: no ERROR.
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("error", err.Error()))
	case err != nil:
		level = slog.LevelError
		attrs = append(attrs, slog.String("error", err.Error()))
		if errors.Is(err, ErrSideEffect) {
			// What the publish-failure alert counts (terraform/monitoring.tf):
			// other errors mention "publish" in their text too.
			attrs = append(attrs, slog.String("failure", "publish"))
		}
	}
	d.cfg.Log.LogAttrs(ctx, level, "ingest decision", attrs...)
}

func commitErr(name opname.Name, err error) error {
	if errors.Is(err, ledger.ErrConflict) {
		return err
	}
	return fmt.Errorf("%w: commit %s: %w", ErrUnavailable, name.Canonical, err)
}

func message(op ledger.Operation, key string) results.Message {
	return results.Message{
		Operation: op.Name, APIName: results.APIName(op.APIName), Kind: string(op.Kind), State: string(op.State), GeminiStatus: results.RawStatus(op.GeminiStatus),
		UpdateTime: lifecycle.ServerTime(op.UpdateTime), SettledBy: op.SettledBy, SettledAt: op.SettledAt,
		IdempotencyKey: key, Output: op.Output, Error: op.Error, UserMetadata: op.UserMetadata,
	}
}

func entry(now time.Time, ev applied, dec lifecycle.Decision) ledger.HistoryEntry {
	return ledger.HistoryEntry{At: now, Source: string(ev.Source), State: ev.State,
		UpdateTime: lifecycle.ServerTime(ev.UpdateTime), Reason: historyReason(ev, dec),
		DeliveryID: ledger.Truncate(ev.DeliveryID, ledger.MaxDeliveryIDBytes)}
}

func appendBounded(list []ledger.HistoryEntry, e ledger.HistoryEntry, max int) []ledger.HistoryEntry {
	out := append(append([]ledger.HistoryEntry(nil), list...), e)
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out
}

// keep merges an event's free-form map into the operation's (mergeMissing)
// unless the result could not be stored within limit bytes: then the event's
// map is dropped whole, with a WARN line saying why (never a value), and the
// rest of the event applies. What the ledger cannot keep is never a reason
// to refuse an event (a webhook would be answered 503 until Gemini gives
// up). A map already over the limit (stored before the bound) stays as is.
func (d *Door) keep(ctx context.Context, name opname.Name, ev applied, field string, base, extra map[string]any, limit int) map[string]any {
	merged := mergeMissing(base, extra)
	if len(merged) == len(base) {
		return base // nothing added
	}
	if err := ledger.CheckMap(merged, limit); err != nil {
		d.cfg.Log.WarnContext(ctx, "event field dropped: the ledger cannot keep it", "operation", name.Canonical,
			"field", field, "source", string(ev.Source), "delivery_id", ledger.Truncate(ev.DeliveryID, ledger.MaxDeliveryIDBytes),
			"reason", err.Error())
		return base
	}
	return merged
}

// withoutKeys is base less the keys of drop (base itself when none is in
// it).
func withoutKeys(base, drop map[string]any) map[string]any {
	var out map[string]any
	for k := range drop {
		if _, ok := base[k]; !ok {
			continue
		}
		if out == nil {
			out = maps.Clone(base)
		}
		delete(out, k)
	}
	if out == nil {
		return base
	}
	return out
}

// mergeMissing adds keys of extra that base lacks; base wins, so what was
// registered is never overwritten by an echo.
func mergeMissing(base, extra map[string]any) map[string]any {
	if len(extra) == 0 {
		return base
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range extra {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}

// moreSpecific reports whether candidate names the API resource better than
// current (a video name with its model beats a bare operations/ID).
func moreSpecific(candidate, current string) bool {
	return len(candidate) > len(current)
}

// The door's retries back off linearly, 5 units per attempt, with full
// jitter so that racing retries spread out: conflicts in milliseconds
// (retry n waits up to 5n ms), the DONE commit in tens (up to 50n ms).
// conflictRetrier retries a read-decide-commit round lost to a concurrent
// writer (ErrConflict), up to MaxAttempts, on conflictBackoff.
func (d *Door) conflictRetrier() retry.Retrier {
	return retry.Retrier{MaxAttempts: d.cfg.MaxAttempts, Delay: conflictBackoff().Delay,
		Retryable: func(err error) bool { return errors.Is(err, ledger.ErrConflict) }}
}

func conflictBackoff() retry.Backoff {
	return retry.Backoff{Initial: 5 * time.Millisecond, Increment: 5 * time.Millisecond, Jitter: 1}
}

func doneBackoff() retry.Backoff {
	return retry.Backoff{Initial: 50 * time.Millisecond, Increment: 50 * time.Millisecond, Jitter: 1}
}
