// Package sink publishes results messages (CONTRACT.md §6) to where
// LROSINK_RESULTS points: a Pub/Sub topic, a JSON-lines file, or stdout.
//
// Publish returns nil only once the message is durably accepted (Pub/Sub: the
// server returned a message id; file: the line is written and fsynced). The
// ingest door treats any error as "side effect failed", releases the claim
// and retries the event, so an error must mean "not published": a sink
// never reports failure for a message that may still go out (Pub/Sub waits
// for the publisher's own outcome, not for the caller's context). Where the
// outcome cannot be known (an answer lost after Pub/Sub accepted the
// message) a message may be delivered twice, and consumers deduplicate on
// the idempotency_key attribute.
//
// Pub/Sub: data is the message JSON (results.Message.Data), attributes are
// results.Message.Attributes, and the ordering key is the operation's
// canonical name.
//
// file: and stdout: one line per message. The line is the same JSON object as
// the Pub/Sub message data, with one extra top-level field "attributes"
// holding the attributes map, so replay_id is visible on replays:
//
//	{"operation":"batches/123","kind":"batch",...,"attributes":{"idempotency_key":"…","operation":"batches/123",…}}
//
// The ordering key is not repeated: it is the "operation" field.
package sink

import (
	"context"
	"fmt"
	"strings"

	"cloud.google.com/go/pubsub/v2"

	"github.com/lrosink/lrosink/internal/results"
)

// Sink publishes results messages. Publish returns nil only once the message
// is accepted durably.
type Sink interface {
	Publish(ctx context.Context, m results.Message) error
	Close() error
}

var (
	_ Sink = (*PubSub)(nil)
	_ Sink = (*File)(nil)
	_ Sink = (*Writer)(nil)
)

// OpenPubSub publishes to a full topic name (projects/P/topics/T) with a
// client of its own for P, closed by Close. Parsing LROSINK_RESULTS is
// internal/urlopen's job; this checks the name again so no caller can open
// a topic Pub/Sub would refuse at the first publish.
func OpenPubSub(ctx context.Context, topic string) (*PubSub, error) {
	c, err := TopicClient(ctx, topic)
	if err != nil {
		return nil, err
	}
	p := NewPubSub(c, topic)
	p.owned = c
	return p, nil
}

// TopicClient checks a full topic name (ParseTopic) and opens a Pub/Sub
// client for its project; the caller closes it.
func TopicClient(ctx context.Context, topic string) (*pubsub.Client, error) {
	project, err := ParseTopic(topic)
	if err != nil {
		return nil, err
	}
	c, err := pubsub.NewClient(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("pubsub client for project %s: %w", project, err)
	}
	return c, nil
}

// ParseTopic checks a full topic name against Pub/Sub's naming rules and
// returns its project, so a typo fails at start-up rather than at the first
// publish (which would only surface as retried events).
func ParseTopic(name string) (project string, err error) {
	p := strings.Split(name, "/")
	if len(p) != 4 || p[0] != "projects" || p[2] != "topics" {
		return "", fmt.Errorf("want projects/P/topics/T")
	}
	if !validProject(p[1]) {
		return "", fmt.Errorf("project %q: want lowercase letters, digits, '-', optionally domain-scoped (example.com:p)", p[1])
	}
	if !validTopicID(p[3]) {
		return "", fmt.Errorf("topic %q: want 3-255 of [A-Za-z0-9-_.~+%%], starting with a letter, not with \"goog\"", p[3])
	}
	return p[1], nil
}

// validProject accepts project ids, including legacy domain-scoped ones
// ("example.com:proj"), without pinning the exact length rules.
func validProject(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.', r == ':':
		default:
			return false
		}
	}
	return true
}

// validTopicID follows the documented resource-name rules for topic ids.
func validTopicID(s string) bool {
	if len(s) < 3 || len(s) > 255 || strings.HasPrefix(strings.ToLower(s), "goog") {
		return false
	}
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if i == 0 && !letter {
			return false
		}
		if !letter && !(r >= '0' && r <= '9') && !strings.ContainsRune("-_.~+%", r) {
			return false
		}
	}
	return true
}

// jsonLine renders m as one JSON line: the message data object with an extra
// "attributes" field. It splices into the encoded data rather than re-encoding
// through a map so the field order matches the Pub/Sub data exactly.
func jsonLine(m results.Message) ([]byte, error) {
	data, err := m.Data()
	if err != nil {
		return nil, err
	}
	if len(data) < 2 || data[0] != '{' || data[len(data)-1] != '}' {
		return nil, fmt.Errorf("encode results line for %s: data is not a JSON object", m.Operation)
	}
	line := make([]byte, 0, len(data)+256)
	line = append(line, data[:len(data)-1]...)
	if len(data) > 2 {
		line = append(line, ',')
	}
	line = append(line, `"attributes":`...)
	line = m.AppendAttributesJSON(line)
	line = append(line, '}', '\n')
	return line, nil
}
