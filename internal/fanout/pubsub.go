package fanout

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/pubsub/v2"

	"github.com/lrosink/lrosink/internal/sink"
)

// PubSub publishes shard requests to a Pub/Sub topic (no ordering: the
// shard passes of a tick run in parallel).
type PubSub struct {
	topic string
	pub   *pubsub.Publisher
	owned *pubsub.Client // closed by Close when OpenPubSub created it
}

// NewPubSub publishes to topic (projects/P/topics/T) with client, which
// stays the caller's.
func NewPubSub(client *pubsub.Client, topic string) *PubSub {
	return &PubSub{topic: topic, pub: client.Publisher(topic)}
}

// OpenPubSub publishes to topic with a client of its own, closed by Close.
func OpenPubSub(ctx context.Context, topic string) (*PubSub, error) {
	c, err := sink.TopicClient(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("LROSINK_RECONCILE_FANOUT_TOPIC: %q: %w", topic, err)
	}
	p := NewPubSub(c, topic)
	p.owned = c
	return p, nil
}

// Publish sends every request at once and waits for each server id. The
// attribute "range" repeats the data's range, so a dead letter can be read
// without decoding it.
func (p *PubSub) Publish(ctx context.Context, reqs []Request) (int, error) {
	results := make([]*pubsub.PublishResult, len(reqs))
	for i, r := range reqs {
		results[i] = p.pub.Publish(ctx, &pubsub.Message{Data: r.Data(), Attributes: map[string]string{"range": r.Range.String()}})
	}
	n := 0
	var errs []error
	for i, res := range results {
		if _, err := res.Get(ctx); err != nil {
			errs = append(errs, fmt.Errorf("range %s: %w", reqs[i].Range, err))
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("publish to %s: %w", p.topic, errors.Join(errs...))
	}
	return n, nil
}

// Close flushes and stops the publisher and, if OpenPubSub created it,
// closes the client.
func (p *PubSub) Close() error {
	p.pub.Stop()
	if p.owned != nil {
		if err := p.owned.Close(); err != nil {
			return fmt.Errorf("close pubsub client for %s: %w", p.topic, err)
		}
	}
	return nil
}
