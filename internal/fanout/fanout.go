// Package fanout hands one reconcile tick's bucket ranges to parallel shard
// passes through a managed queue: the Scheduler-triggered pass (the
// coordinator) publishes one shard request per range of shard.Split(n) to a
// Pub/Sub topic, and a push subscription delivers each to the Reconcile
// function, which runs that range's pass.
//
// Pub/Sub push was chosen over Cloud Tasks because the deployment already
// runs Pub/Sub (results) and its emulator in tests, push to Cloud Run with an
// OIDC token is a documented path, and a nacked delivery is retried with
// backoff and then dead-lettered, which is the retry a failed shard needs.
// Push is at-least-once: a request may be delivered twice, so a shard pass
// must be safe to repeat and to overlap another pass of the same range. It
// is: every write of a pass is fenced on the revision it read.
package fanout

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/lrosink/lrosink/internal/shard"
)

// Request is one shard pass handed out: the bucket range it covers and the
// coordinator's tick (when the tick's pass started; zero for a request
// published by hand), which ties the shard passes' log lines to their tick.
type Request struct {
	Range shard.Range
	Tick  time.Time
}

// wire is a Request as the message data carries it (CONTRACT.md §4):
// {"range":"16-32","tick":"2026-11-25T04:00:00Z"}.
type wire struct {
	Range string `json:"range"`
	Tick  string `json:"tick,omitempty"`
}

// Data is the message data of r.
func (r Request) Data() []byte {
	w := wire{Range: r.Range.String()}
	if !r.Tick.IsZero() {
		w.Tick = r.Tick.UTC().Format(time.RFC3339Nano)
	}
	b, _ := json.Marshal(w) // two strings: cannot fail
	return b
}

// ErrBadRequest marks a message that is not a shard request: a push
// envelope that does not parse, data that is not a request, or a range
// outside the buckets. Redelivering it cannot help.
var ErrBadRequest = errors.New("not a shard request")

// ParseRequest reads a request's message data and checks its range.
func ParseRequest(data []byte) (Request, error) {
	var w wire
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Request{}, fmt.Errorf("%w: data %s: want {\"range\":\"LO-HI\",\"tick\":\"RFC 3339 time\"}", ErrBadRequest, jsonProblem(err))
	}
	// One JSON value, nothing after it: Decode reads only the first.
	if _, err := dec.Token(); err != io.EOF {
		return Request{}, fmt.Errorf("%w: data has more after its request object", ErrBadRequest)
	}
	if w.Range == "" {
		return Request{}, fmt.Errorf("%w: data has no \"range\" (want e.g. \"0-16\")", ErrBadRequest)
	}
	r, err := shard.Parse(w.Range)
	if err != nil {
		return Request{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	req := Request{Range: r}
	if w.Tick != "" {
		if req.Tick, err = time.Parse(time.RFC3339Nano, w.Tick); err != nil {
			return Request{}, fmt.Errorf("%w: tick %q is not an RFC 3339 time", ErrBadRequest, w.Tick)
		}
	}
	return req, nil
}

// Delivery is what a push says about the message besides its data.
type Delivery struct {
	MessageID    string
	Subscription string
	// Attempt is Pub/Sub's deliveryAttempt (set only on a subscription
	// with a dead-letter policy; 0 otherwise).
	Attempt int
}

// envelope is a Pub/Sub push request body (wrapped, the default):
// https://cloud.google.com/pubsub/docs/push#receive_push
type envelope struct {
	Message *struct {
		Data       *string           `json:"data"`
		Attributes map[string]string `json:"attributes"`
		MessageID  string            `json:"messageId"`
	} `json:"message"`
	Subscription    string `json:"subscription"`
	DeliveryAttempt int    `json:"deliveryAttempt"`
}

// IsPush reports whether body is a Pub/Sub push envelope (a JSON object
// with a "message" member), not an empty body or another request: only then
// is a /Reconcile call a shard pass.
func IsPush(body []byte) bool {
	var probe struct {
		Message json.RawMessage `json:"message"`
	}
	return json.Unmarshal(body, &probe) == nil && len(probe.Message) > 0
}

// ParsePush reads a push envelope and the shard request in its data.
func ParsePush(body []byte) (Request, Delivery, error) {
	var e envelope
	if err := json.Unmarshal(body, &e); err != nil {
		return Request{}, Delivery{}, fmt.Errorf("%w: push envelope: %s", ErrBadRequest, jsonProblem(err))
	}
	if e.Message == nil || e.Message.Data == nil {
		return Request{}, Delivery{}, fmt.Errorf("%w: push envelope has no message.data", ErrBadRequest)
	}
	d := Delivery{MessageID: e.Message.MessageID, Subscription: e.Subscription, Attempt: e.DeliveryAttempt}
	data, err := base64.StdEncoding.DecodeString(*e.Message.Data)
	if err != nil {
		return Request{}, d, fmt.Errorf("%w: message.data is not base64: %w", ErrBadRequest, err)
	}
	req, err := ParseRequest(data)
	return req, d, err
}

// jsonProblem says what encoding/json found wrong in JSON's words: its
// type errors name Go types ("Go struct field .message.data of type
// string"), which the 400 bad-shard-request detail must not (CONTRACT.md §4).
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := "another type"
		if te.Type != nil {
			switch te.Type.Kind() {
			case reflect.String:
				want = "a string"
			case reflect.Int, reflect.Int64, reflect.Int32:
				want = "an integer"
			case reflect.Struct, reflect.Map, reflect.Pointer:
				want = "a JSON object"
			}
		}
		if te.Field == "" {
			return fmt.Sprintf("must be a JSON object, not a JSON %s", te.Value)
		}
		return fmt.Sprintf("%q must be %s, not a JSON %s", te.Field, want, te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("not JSON (at byte %d: %s)", se.Offset, se.Error())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "not JSON: it ends before its value does"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// Requests are the n shard requests of one tick, in bucket order.
func Requests(n int, tick time.Time) ([]Request, error) {
	rs, err := shard.Split(n)
	if err != nil {
		return nil, err
	}
	out := make([]Request, len(rs))
	for i, r := range rs {
		out[i] = Request{Range: r, Tick: tick}
	}
	return out, nil
}
