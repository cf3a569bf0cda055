package consume

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"cloud.google.com/go/pubsub/v2"
)

// PubSub receives from a pull subscription (terraform output
// results_subscription). Configure sub.ReceiveSettings before Run. A
// message that is not an lrosink result (Invalid) is acknowledged, or on a
// subscription with a dead-letter policy nacked until it is dead-lettered;
// never redelivered forever. The
// subscription should have exactly-once delivery on, so an acknowledged
// message is not delivered again; the Consumer covers the rest (lrosink's
// own duplicate publishes, lost acks). Receive returns nil when ctx ends.
func PubSub(sub *pubsub.Subscriber) Source { return pubsubSource{sub} }

type pubsubSource struct{ sub *pubsub.Subscriber }

func (s pubsubSource) Receive(ctx context.Context, handle func(context.Context, Message) Outcome) error {
	err := s.sub.Receive(ctx, func(ctx context.Context, m *pubsub.Message) {
		msg := Message{ID: m.ID, Data: m.Data, Attributes: m.Attributes}
		if m.DeliveryAttempt != nil {
			msg.DeliveryAttempt = *m.DeliveryAttempt
		}
		// A lost ack is a redelivery, which the claim turns into a
		// Duplicate: nothing to wait for here.
		if o := handle(ctx, msg); o.Ack() || (o.Kind == Invalid && msg.DeliveryAttempt == 0) {
			// An invalid message would come back forever (a poison
			// loop): redelivery cannot make it valid. Pub/Sub sets
			// DeliveryAttempt only on a subscription with a dead-letter
			// policy; there it is nacked instead, so that after the
			// policy's attempts it is kept on the dead-letter topic.
			m.Ack()
		} else {
			m.Nack()
		}
	})
	if err != nil {
		return fmt.Errorf("consume: receive from %s: %w", s.sub.String(), err)
	}
	return nil
}

// LinesSource reads results messages as JSON lines: what lrosink writes
// with LROSINK_RESULTS=stdout or file:PATH (each line the message data plus
// an "attributes" object). Lines are processed one at a time, in order; a
// nacked line is tried again (a failed handler, a key held by a run that
// crashed, until its lease ends) before the next; a line that is not a
// results message is skipped.
type LinesSource struct {
	// RetryDelay is the first wait before a nacked line is tried again
	// (doubling up to a minute); default one second.
	RetryDelay time.Duration
	// Poll is how often a followed file is checked for more lines;
	// default 200 ms.
	Poll time.Duration

	r      io.Reader
	path   string
	follow bool
}

// Lines reads r (for instance os.Stdin under `lrosink serve | worker`)
// until its end, then Receive returns nil. A blocked read is not cut short
// by the context.
func Lines(r io.Reader) *LinesSource { return &LinesSource{r: r} }

// TailFile follows the file at path from its start, like tail -f, until the
// context ends. Keys already DONE in the store are skipped as duplicates, so
// a restarted worker reads the file again at little cost.
func TailFile(path string) *LinesSource { return &LinesSource{path: path, follow: true} }

// Receive implements Source.
func (s *LinesSource) Receive(ctx context.Context, handle func(context.Context, Message) Outcome) error {
	r := s.r
	if s.path != "" {
		f, err := os.Open(s.path)
		if err != nil {
			return fmt.Errorf("consume: %w", err)
		}
		defer f.Close()
		r = f
	}
	poll := s.Poll
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	br := bufio.NewReader(r)
	var partial []byte
	n := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		chunk, err := br.ReadBytes('\n')
		partial = append(partial, chunk...)
		switch {
		case err == nil:
		case err != io.EOF:
			return fmt.Errorf("consume: read results lines: %w", err)
		case s.follow:
			// The rest of a line being written comes later; bufio
			// reads the file again on the next call.
			if !sleep(ctx, poll) {
				return nil
			}
			continue
		case len(partial) == 0:
			return nil
		}
		line := bytes.TrimSpace(partial)
		partial = nil
		n++
		if len(line) > 0 && !s.deliver(ctx, handle, lineMessage(n, line)) {
			return nil
		}
		if err == io.EOF {
			return nil
		}
	}
}

// deliver hands m over until it is acknowledged or invalid; false if ctx
// ended first.
func (s *LinesSource) deliver(ctx context.Context, handle func(context.Context, Message) Outcome, m Message) bool {
	delay := s.RetryDelay
	if delay <= 0 {
		delay = time.Second
	}
	for attempt := 1; ; attempt++ {
		m.DeliveryAttempt = attempt
		if o := handle(ctx, m); o.Ack() || o.Kind == Invalid {
			return true
		}
		if !sleep(ctx, delay) {
			return false
		}
		delay = min(2*delay, time.Minute)
	}
}

// lineMessage splits a line into the message data and its attributes. A
// line that is not a JSON object is passed on as is, to be found Invalid.
func lineMessage(n int, line []byte) Message {
	m := Message{ID: "line " + strconv.Itoa(n), Data: line}
	var l struct {
		Attributes map[string]string `json:"attributes"`
	}
	if json.Unmarshal(line, &l) == nil {
		m.Attributes = l.Attributes
	}
	return m
}

// sleep waits d; false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
