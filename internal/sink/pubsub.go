package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"cloud.google.com/go/pubsub/v2"

	"github.com/lrosink/lrosink/internal/results"
)

// errClosed is returned by Publish after Close.
var errClosed = errors.New("sink is closed")

// PubSub publishes results messages to a Pub/Sub topic, ordered per operation.
type PubSub struct {
	topic string
	pub   *pubsub.Publisher
	owned *pubsub.Client // closed by Close when OpenPubSub created it

	mu     sync.Mutex
	closed bool
	// inflight counts Publish calls, so Close returns only once none of
	// them can touch the publisher.
	inflight  sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// NewPubSub publishes to topic, a full name projects/P/topics/T (a bare id
// would be resolved against the client's project). The client stays owned by
// the caller; one publisher is reused for all messages.
func NewPubSub(client *pubsub.Client, topic string) *PubSub {
	pub := client.Publisher(topic)
	// Must be set before the first Publish, or keyed messages are rejected.
	pub.EnableMessageOrdering = true
	return &PubSub{topic: topic, pub: pub}
}

// Publish returns once Pub/Sub has assigned the message a server id.
func (p *PubSub) Publish(ctx context.Context, m results.Message) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("publish results for %s to %s: %w", m.Operation, p.topic, errClosed)
	}
	p.inflight.Add(1)
	p.mu.Unlock()
	defer p.inflight.Done()

	// A cancelled caller must not have its message published behind its back.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publish results for %s to %s: %w", m.Operation, p.topic, err)
	}
	data, err := m.Data()
	if err != nil {
		return err
	}
	key := m.OrderingKey()
	res := p.pub.Publish(ctx, &pubsub.Message{Data: data, Attributes: m.Attributes(), OrderingKey: key})
	// Once handed over, the message goes out or fails on the publisher's
	// own context and timeout (60 s), whatever ctx does: ctx only bounds
	// the flow control above. So wait for that outcome, not for ctx. An
	// error returned at ctx's end would be a publish that may still be
	// delivered; the door, told it failed, releases the claim and the next
	// attempt publishes the message a second time without any crash
	// (docs/GEMINI.md §11).
	if _, err := res.Get(context.WithoutCancel(ctx)); err != nil {
		// A failed keyed publish pauses its key in the client; left
		// paused, every later publish of the operation would fail.
		p.pub.ResumePublish(key)
		return fmt.Errorf("publish results for %s to %s: %w", m.Operation, p.topic, err)
	}
	return nil
}

// Close flushes outstanding messages, stops the publisher and, if OpenPubSub
// created it, closes the client. Later Publish calls fail.
func (p *PubSub) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.pub.Stop()
		p.inflight.Wait()
		if p.owned != nil {
			if err := p.owned.Close(); err != nil {
				p.closeErr = fmt.Errorf("close pubsub client for %s: %w", p.topic, err)
			}
		}
	})
	return p.closeErr
}
