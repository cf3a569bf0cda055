// Package consume turns lrosink's results subscription into effectively-once
// processing for downstream workers.
//
// lrosink publishes one results message per operation, but a message can
// arrive more than once: Pub/Sub redelivers unacknowledged messages, and
// lrosink itself publishes a second copy (same idempotency_key) after a crash
// between its publish and its DONE commit. A Consumer runs the Handler for
// each dedupe key (idempotency_key, plus replay_id for a deliberate
// `lrosink replay`, which is meant to be processed again, once) under the
// pattern lrosink uses for its own publish:
//
//  1. claim the key in a Store with a lease and a fresh fencing token
//     (create if absent; seize if released or its lease ran out);
//  2. run the handler, whose context ends when the lease does;
//  3. commit DONE only if the claim still carries this run's token.
//
// So a key's handler never runs twice at once (while a holder's lease lasts,
// other deliveries are nacked and come back later), a crash mid-handler loses
// nothing (the claim is seized after its lease and the handler runs again:
// at least once), and of all the runs of one key exactly one commits DONE: a
// run whose claim was seized meanwhile is told so (Superseded) and its DONE
// is refused. A handler error releases the claim and nacks the message, so
// the redelivery runs it again at once.
//
// What this cannot do is make the handler's own side effects atomic with the
// DONE commit: a run cut off after its side effect and before DONE is run
// again. Make side effects idempotent on Delivery.Key, or fence them on
// Delivery.Token in the same store.
//
// Minimal worker:
//
//	store := consume.NewFirestoreStore(fsClient, "processed")
//	c := &consume.Consumer{Store: store, Handler: func(ctx context.Context, d consume.Delivery) error {
//		return process(ctx, d.Result)
//	}}
//	err := c.Run(ctx, consume.PubSub(psClient.Subscriber("lrosink-results-worker")))
package consume

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Defaults of the Consumer's settings. DefaultLease is this consumer's own
// claim lease, how long a handler may run before its key is seized: a
// setting of the downstream worker, not lrosink's LROSINK_CLAIM_LEASE, so
// it is not derived from it even though both are 10 minutes.
const (
	DefaultLease     = 10 * time.Minute
	DefaultRetention = 30 * 24 * time.Hour
)

// Message is one delivery of a results message, as a Source hands it over.
type Message struct {
	// ID is the source's message id (Pub/Sub message id; line number).
	ID         string
	Data       []byte
	Attributes map[string]string
	// DeliveryAttempt counts deliveries when the source knows (Pub/Sub
	// with a dead-letter policy); 0 otherwise.
	DeliveryAttempt int
}

// Source delivers messages to handle until ctx ends, acknowledging those
// whose Outcome says Ack and redelivering the others later.
type Source interface {
	Receive(ctx context.Context, handle func(context.Context, Message) Outcome) error
}

// Delivery is what the handler gets.
type Delivery struct {
	Result Result
	// Key is the dedupe key: idempotency_key, or idempotency_key +
	// "#replay:" + replay_id for a deliberate replay.
	Key       string
	ReplayID  string
	MessageID string
	// Token is this run's fencing token: a side effect written with it
	// (in a store that compares it) can be fenced like the DONE commit.
	Token string
	// Attempt is 1 for a key's first run, more after a crash or an error.
	Attempt int
}

// Handler processes one result. Returning an error releases the key and
// nacks the message, so it is delivered and run again.
type Handler func(ctx context.Context, d Delivery) error

// Kind is what became of one delivery.
type Kind string

// Outcome kinds. Processed, Duplicate and Superseded are acknowledged; the
// others are nacked, so the message comes back.
const (
	// Processed: the handler ran and this run committed DONE.
	Processed Kind = "processed"
	// Duplicate: the key is DONE already; the handler did not run.
	Duplicate Kind = "duplicate"
	// Superseded: the handler ran, but its lease ran out and another run
	// seized the key meanwhile, so DONE was refused (the other run's
	// commit counts).
	Superseded Kind = "superseded"
	// Busy: another run holds a live lease on the key; try again later.
	Busy Kind = "busy"
	// Failed: the handler returned an error; the key was released.
	Failed Kind = "failed"
	// StoreError: the store could not be read or written.
	StoreError Kind = "store-error"
	// Invalid: not an lrosink results message (no key, bad JSON, or an
	// idempotency_key attribute that differs from the data's). No
	// redelivery can make it valid, so it is not retried: the lines
	// source skips it, the Pub/Sub source acknowledges it, or, on a
	// subscription with a dead-letter policy, nacks it until Pub/Sub moves
	// it to the dead-letter topic (kept there for inspection). Report it
	// at ERROR from OnOutcome: it means something else publishes to the
	// results topic.
	Invalid Kind = "invalid"
)

// Outcome describes one delivery.
type Outcome struct {
	Kind      Kind
	Key       string
	MessageID string
	Attempt   int
	Err       error
}

// Ack reports whether the source should acknowledge the message. An
// Invalid message is not acknowledged here: each source decides (see
// Invalid).
func (o Outcome) Ack() bool {
	return o.Kind == Processed || o.Kind == Duplicate || o.Kind == Superseded
}

// Consumer runs Handler effectively once per dedupe key.
type Consumer struct {
	Store   Store
	Handler Handler
	// Lease is how long a run holds its key before another delivery may
	// seize it (DefaultLease if zero). The handler's context ends when the
	// lease does, so that a slow run stops before another may start: set
	// it well above the handler's longest run and the clock skew between
	// consumers. A delivery that finds a live lease is nacked (Busy) and
	// counts towards a dead-letter policy's attempts: keep Lease well
	// below the retry backoff summed over them (the Terraform
	// subscription's 10 attempts back off over about 40 minutes).
	Lease time.Duration
	// Retention is how long a record is kept (its ExpireAt);
	// DefaultRetention if zero. Keep it far beyond how late a duplicate
	// can arrive (Pub/Sub retains messages 7 days at most).
	Retention time.Duration
	// Now is the clock of leases (time.Now if nil); tests inject one.
	Now func() time.Time
	// OnOutcome, if set, is called with every delivery's outcome.
	OnOutcome func(Outcome)
}

// Run receives from src until ctx ends or src fails.
func (c *Consumer) Run(ctx context.Context, src Source) error {
	if c.Store == nil || c.Handler == nil {
		return errors.New("consume: Consumer needs a Store and a Handler")
	}
	return src.Receive(ctx, c.Process)
}

func (c *Consumer) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Consumer) lease() time.Duration {
	if c.Lease > 0 {
		return c.Lease
	}
	return DefaultLease
}

func (c *Consumer) retention() time.Duration {
	if c.Retention > 0 {
		return c.Retention
	}
	return DefaultRetention
}

// maxContention bounds how often a claim re-reads after losing a race on
// the record; then the delivery is Busy and comes back later.
const maxContention = 5

// Process handles one message and returns its outcome (also given to
// OnOutcome). Sources call it; the caller acks if Outcome.Ack.
func (c *Consumer) Process(ctx context.Context, m Message) Outcome {
	o := c.process(ctx, m)
	if c.OnOutcome != nil {
		c.OnOutcome(o)
	}
	return o
}

func (c *Consumer) process(ctx context.Context, m Message) Outcome {
	o := Outcome{MessageID: m.ID}
	d, err := parse(m)
	if err != nil {
		o.Kind, o.Err = Invalid, err
		return o
	}
	o.Key = d.Key
	// The handler's deadline is on the machine's clock from before the
	// claim, so it ends no later than the lease another consumer sees.
	deadline := time.Now().Add(c.lease())
	l, kind, err := c.claim(ctx, d.Key)
	if kind != "" {
		o.Kind, o.Err = kind, err
		return o
	}
	d.Token, d.Attempt = l.rec.Holder, l.rec.Attempts
	o.Attempt = d.Attempt

	hctx, cancel := context.WithDeadline(ctx, deadline)
	herr := c.Handler(hctx, d)
	cancel()
	// Detached: the outcome must be written even if ctx ended meanwhile
	// (a shutdown); a process that dies instead leaves the lease to expire.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer wcancel()
	now := c.now()
	if herr != nil {
		o.Kind, o.Err = Failed, herr
		rel := l.rec
		rel.Status, rel.LeaseUntil, rel.UpdatedAt, rel.ExpireAt = Released, now, now, now.Add(c.retention())
		if _, err := c.Store.Update(wctx, d.Key, l.rev, rel); err != nil && !errors.Is(err, ErrConflict) {
			// Not released: the key is taken again once the lease runs out.
			o.Err = errors.Join(herr, fmt.Errorf("release %s: %w", d.Key, err))
		}
		return o
	}
	done := l.rec
	done.Status, done.UpdatedAt, done.ExpireAt = Done, now, now.Add(c.retention())
	switch _, err := c.Store.Update(wctx, d.Key, l.rev, done); {
	case errors.Is(err, ErrConflict):
		o.Kind, o.Err = Superseded, fmt.Errorf("commit DONE for %s: the claim was seized after its lease: %w", d.Key, err)
	case err != nil:
		// The claim stays held; it is seized after its lease and run again.
		o.Kind, o.Err = StoreError, fmt.Errorf("commit DONE for %s: %w", d.Key, err)
	default:
		o.Kind = Processed
	}
	return o
}

type held struct {
	rec Record
	rev Revision
}

// claim takes key for a new run: creates its record, or seizes one that was
// released or whose lease ran out. A non-empty Kind means no run.
func (c *Consumer) claim(ctx context.Context, key string) (held, Kind, error) {
	token, err := newToken()
	if err != nil {
		return held{}, StoreError, err
	}
	for range maxContention {
		cur, rev, err := c.Store.Get(ctx, key)
		now := c.now()
		rec := Record{Status: Claimed, Holder: token, LeaseUntil: now.Add(c.lease()), Attempts: 1,
			UpdatedAt: now, ExpireAt: now.Add(c.retention())}
		switch {
		case errors.Is(err, ErrNotFound):
			rev, err = c.Store.Create(ctx, key, rec)
		case err != nil:
			return held{}, StoreError, fmt.Errorf("read claim %s: %w", key, err)
		case cur.Status == Done:
			return held{}, Duplicate, nil
		case cur.Status == Claimed && now.Before(cur.LeaseUntil):
			return held{}, Busy, fmt.Errorf("claim %s is held until %s", key, cur.LeaseUntil.Format(time.RFC3339))
		default:
			rec.Attempts = cur.Attempts + 1
			rev, err = c.Store.Update(ctx, key, rev, rec)
		}
		switch {
		case err == nil:
			return held{rec: rec, rev: rev}, "", nil
		case !errors.Is(err, ErrConflict):
			return held{}, StoreError, fmt.Errorf("claim %s: %w", key, err)
		}
	}
	return held{}, Busy, fmt.Errorf("claim %s: contended", key)
}

func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("fencing token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// parse decodes a message into a Delivery (without token and attempt).
func parse(m Message) (Delivery, error) {
	d := Delivery{MessageID: m.ID, ReplayID: m.Attributes["replay_id"]}
	// Numbers stay json.Number: a job id over 2^53 in user metadata must
	// reach the handler exactly as lrosink published it.
	dec := json.NewDecoder(bytes.NewReader(m.Data))
	dec.UseNumber()
	if err := dec.Decode(&d.Result); err != nil {
		return d, fmt.Errorf("data is not a results message: %w", err)
	}
	key := m.Attributes["idempotency_key"]
	switch {
	case key == "" && d.Result.IdempotencyKey == "":
		return d, errors.New("no idempotency_key attribute or field")
	case key == "":
		key = d.Result.IdempotencyKey
	case d.Result.IdempotencyKey != "" && d.Result.IdempotencyKey != key:
		return d, fmt.Errorf("idempotency_key attribute %q differs from the data's %q", key, d.Result.IdempotencyKey)
	}
	d.Key = DedupeKey(key, d.ReplayID)
	return d, nil
}

// DedupeKey is what a delivery is deduplicated on: the idempotency key, and
// for a deliberate replay the replay id too, so a replay runs once more.
func DedupeKey(idempotencyKey, replayID string) string {
	if replayID == "" {
		return idempotencyKey
	}
	return idempotencyKey + "#replay:" + replayID
}
