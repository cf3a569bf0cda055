package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Result is the data of an lrosink results message (CONTRACT.md §6).
type Result struct {
	Operation      string          `json:"operation"`
	Kind           string          `json:"kind"`
	State          string          `json:"state"`
	UpdateTime     time.Time       `json:"update_time"`
	SettledBy      string          `json:"settled_by"`
	SettledAt      time.Time       `json:"settled_at"`
	IdempotencyKey string          `json:"idempotency_key"`
	Output         json.RawMessage `json:"output"`
	Error          *ResultError    `json:"error"`
	UserMetadata   map[string]any  `json:"user_metadata"`
}

// ResultError is the error of a failed operation.
type ResultError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Meta is what the handler may want to know about the delivery.
type Meta struct {
	MessageID string
	// DedupeKey is what the run is deduplicated on: the idempotency_key,
	// plus the replay_id for deliberate replays (`lrosink replay`).
	DedupeKey string
	ReplayID  string
	// DeliveryAttempt counts deliveries when the subscription has a
	// dead-letter policy (nil otherwise).
	DeliveryAttempt *int
}

// Handler processes one result. It runs at most once per DedupeKey.
//
// Returning nil, or an error not wrapped by Retryable, ends the key for
// good: the message is acknowledged and the key is never run again (a
// failure is recorded for an operator). Return Retryable(err) only when the
// handler has had NO side effect, to have the key released and the message
// redelivered.
type Handler func(ctx context.Context, r Result, m Meta) error

type retryable struct{ err error }

func (r retryable) Error() string { return "retryable: " + r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// Retryable marks a handler error as "nothing happened, run me again".
func Retryable(err error) error { return retryable{err} }

// ErrSeen is returned by Deduper.Claim for a key claimed before.
var ErrSeen = errors.New("dedupe key already claimed")

// Deduper records which keys have been processed. Claim must be atomic
// across all workers: of any number of concurrent Claims of one key, exactly
// one succeeds, and every later one returns ErrSeen.
type Deduper interface {
	// Claim marks key as taken before the handler runs. A crash after
	// Claim leaves the key taken: the handler then ran at most once (maybe
	// not to its end), never twice; such keys stay in status "processing"
	// for an operator to look at.
	Claim(ctx context.Context, key string, m Meta, r Result) error
	// Finish records how the handler ended (informational: the claim
	// alone already prevents a second run).
	Finish(ctx context.Context, key string, handlerErr error) error
	// Release forgets a claim whose handler had no side effect, so that a
	// redelivery runs it again.
	Release(ctx context.Context, key string) error
}

// FirestoreDeduper keeps one document per key in Collection. Create is
// atomic (AlreadyExists for the second creator), which is the whole
// deduplication; it needs no transaction.
type FirestoreDeduper struct {
	Client     *firestore.Client
	Collection string
}

// DocID maps a dedupe key to a document id: the SHA-256 of the key in hex.
// Keys contain "/" (gemini:batches/abc) and may be long or start with "__",
// none of which a Firestore id may; a fixed-length hex digest is always a
// valid id. The key itself is stored in the document for lookups.
func DocID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func (d *FirestoreDeduper) doc(key string) *firestore.DocumentRef {
	return d.Client.Collection(d.Collection).Doc(DocID(key))
}

// Claim implements Deduper.
func (d *FirestoreDeduper) Claim(ctx context.Context, key string, m Meta, r Result) error {
	_, err := d.doc(key).Create(ctx, map[string]any{
		"key":        key,
		"status":     "processing",
		"operation":  r.Operation,
		"state":      r.State,
		"message_id": m.MessageID,
		"replay_id":  m.ReplayID,
		"claimed_at": firestore.ServerTimestamp,
	})
	if status.Code(err) == codes.AlreadyExists {
		return ErrSeen
	}
	if err != nil {
		return fmt.Errorf("claim %q: %w", key, err)
	}
	return nil
}

// Finish implements Deduper.
func (d *FirestoreDeduper) Finish(ctx context.Context, key string, handlerErr error) error {
	ups := []firestore.Update{{Path: "status", Value: "done"}, {Path: "finished_at", Value: firestore.ServerTimestamp}}
	if handlerErr != nil {
		ups = []firestore.Update{{Path: "status", Value: "failed"}, {Path: "error", Value: handlerErr.Error()},
			{Path: "finished_at", Value: firestore.ServerTimestamp}}
	}
	if _, err := d.doc(key).Update(ctx, ups); err != nil {
		return fmt.Errorf("finish %q: %w", key, err)
	}
	return nil
}

// Release implements Deduper.
func (d *FirestoreDeduper) Release(ctx context.Context, key string) error {
	if _, err := d.doc(key).Delete(ctx); err != nil {
		return fmt.Errorf("release %q: %w", key, err)
	}
	return nil
}

// Kind is what became of one delivery.
type Kind string

const (
	// Processed: the handler ran (successfully); acknowledged.
	Processed Kind = "processed"
	// Duplicate: the key was claimed before (redelivery, duplicate
	// publish, or a concurrent copy); acknowledged without running.
	Duplicate Kind = "duplicate"
	// Failed: the handler ran and failed; acknowledged, never rerun.
	Failed Kind = "failed"
	// Retry: nothing ran (handler said Retryable, or the dedupe store was
	// unavailable); negatively acknowledged, so Pub/Sub redelivers it.
	Retry Kind = "retry"
	// Invalid: not an lrosink results message (no key, bad JSON);
	// negatively acknowledged until it dead-letters.
	Invalid Kind = "invalid"
)

// Outcome describes one delivery, for logs and tests.
type Outcome struct {
	Kind      Kind
	Key       string
	MessageID string
	Err       error
	// AckErr is set when the (n)ack was not confirmed: the message will be
	// redelivered, and deduplicated.
	AckErr error
}

// Worker pulls results and runs Handle at most once per dedupe key.
type Worker struct {
	Dedupe Deduper
	Handle Handler
	// OnOutcome, if set, is called after each delivery is (n)acked.
	OnOutcome func(Outcome)

	// loseAck, in tests, turns an ack into a nack after processing, as if
	// the ack had been lost.
	loseAck func(Outcome) bool
}

// Run receives from sub until ctx is done. The subscription should have
// exactly-once delivery on (then an acknowledged message is not redelivered,
// and AckWithResult reports whether the ack really happened); deduplication
// covers what exactly-once does not: publishes of the same result twice,
// and acks that failed.
func (w *Worker) Run(ctx context.Context, sub *pubsub.Subscriber) error {
	return sub.Receive(ctx, func(ctx context.Context, m *pubsub.Message) {
		meta := Meta{MessageID: m.ID, DeliveryAttempt: m.DeliveryAttempt}
		o := w.process(ctx, meta, m.Attributes, m.Data)
		var res *pubsub.AckResult
		switch {
		case o.Kind == Retry || o.Kind == Invalid:
			res = m.NackWithResult()
		case w.loseAck != nil && w.loseAck(o):
			res = m.NackWithResult()
		default:
			res = m.AckWithResult()
		}
		// With exactly-once, Get reports whether Pub/Sub accepted the
		// (n)ack; without it, it succeeds at once. A failed ack means a
		// redelivery, which the claim turns into a Duplicate.
		st, err := res.Get(context.WithoutCancel(ctx))
		if err == nil && st != pubsub.AcknowledgeStatusSuccess {
			err = fmt.Errorf("acknowledge status %d", st)
		}
		o.AckErr = err
		if w.OnOutcome != nil {
			w.OnOutcome(o)
		}
	})
}

// process decides one delivery and runs the handler if the key is new.
func (w *Worker) process(ctx context.Context, meta Meta, attrs map[string]string, data []byte) Outcome {
	o := Outcome{MessageID: meta.MessageID}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		o.Kind, o.Err = Invalid, fmt.Errorf("data is not a results message: %w", err)
		return o
	}
	key := attrs["idempotency_key"]
	switch {
	case key == "" && r.IdempotencyKey == "":
		o.Kind, o.Err = Invalid, errors.New("no idempotency_key attribute or field")
		return o
	case key == "":
		key = r.IdempotencyKey
	case r.IdempotencyKey != "" && r.IdempotencyKey != key:
		o.Kind, o.Err = Invalid, fmt.Errorf("idempotency_key attribute %q differs from the data's %q", key, r.IdempotencyKey)
		return o
	}
	// A deliberate replay (`lrosink replay NAME`) carries a new replay_id
	// and the same idempotency_key: it is meant to be processed again,
	// once per replay_id.
	meta.ReplayID = attrs["replay_id"]
	meta.DedupeKey = key
	if meta.ReplayID != "" {
		meta.DedupeKey = key + "#replay:" + meta.ReplayID
	}
	o.Key = meta.DedupeKey

	if err := w.Dedupe.Claim(ctx, meta.DedupeKey, meta, r); err != nil {
		if errors.Is(err, ErrSeen) {
			o.Kind = Duplicate
			return o
		}
		o.Kind, o.Err = Retry, err
		return o
	}
	herr := w.Handle(ctx, r, meta)
	// Detached: the outcome must be recorded even if ctx ends meanwhile.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var rt retryable
	if errors.As(herr, &rt) {
		o.Kind, o.Err = Retry, herr
		if err := w.Dedupe.Release(rctx, meta.DedupeKey); err != nil {
			// The key stays claimed: the redelivery becomes a Duplicate
			// and the work is not retried. Prefer that to a double run.
			o.Err = errors.Join(herr, err)
		}
		return o
	}
	o.Kind, o.Err = Processed, herr
	if herr != nil {
		o.Kind = Failed
	}
	if err := w.Dedupe.Finish(rctx, meta.DedupeKey, herr); err != nil {
		o.Err = errors.Join(o.Err, err)
	}
	return o
}
