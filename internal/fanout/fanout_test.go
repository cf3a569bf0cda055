package fanout_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fanout"
	"github.com/lrosink/lrosink/internal/shard"
)

func push(data string) []byte {
	return fmt.Appendf(nil, `{"message":{"data":%q,"attributes":{"range":"x"},"messageId":"m1"},"subscription":"projects/p/subscriptions/s","deliveryAttempt":2}`,
		base64.StdEncoding.EncodeToString([]byte(data)))
}

func TestRequestRoundTrip(t *testing.T) {
	tick := time.Date(2026, 11, 25, 4, 0, 0, 123, time.UTC)
	reqs, err := fanout.Requests(4, tick)
	if err != nil || len(reqs) != 4 {
		t.Fatalf("Requests(4) = %v, %v", reqs, err)
	}
	for _, r := range reqs {
		got, d, err := fanout.ParsePush(push(string(r.Data())))
		if err != nil || got.Range != r.Range || !got.Tick.Equal(tick) {
			t.Errorf("ParsePush(%s) = %+v, %v; want %+v", r.Data(), got, err, r)
		}
		if d.MessageID != "m1" || d.Subscription != "projects/p/subscriptions/s" || d.Attempt != 2 {
			t.Errorf("delivery %+v", d)
		}
	}
	// Published by hand: no tick.
	got, _, err := fanout.ParsePush(push(`{"range":"16-32"}`))
	if err != nil || got.Range != (shard.Range{Lo: 16, Hi: 32}) || !got.Tick.IsZero() {
		t.Errorf("a request without a tick: %+v, %v", got, err)
	}
}

// Every push that is not a shard request is ErrBadRequest (answered 400):
// redelivering it cannot make it one.
func TestParsePushRefuses(t *testing.T) {
	for name, body := range map[string][]byte{
		"not JSON":          []byte(`{"message":`),
		"no message":        []byte(`{"subscription":"s"}`),
		"no data":           []byte(`{"message":{"messageId":"m"}}`),
		"data not base64":   []byte(`{"message":{"data":"%%%"}}`),
		"data not JSON":     push(`range=0-16`),
		"no range":          push(`{"tick":"2026-11-25T04:00:00Z"}`),
		"empty range":       push(`{"range":"8-8"}`),
		"range too high":    push(`{"range":"32-65"}`),
		"range not numbers": push(`{"range":"a-b"}`),
		"bad tick":          push(`{"range":"0-16","tick":"yesterday"}`),
		"unknown field":     push(`{"range":"0-16","shards":4}`),
	} {
		if _, _, err := fanout.ParsePush(body); !errors.Is(err, fanout.ErrBadRequest) {
			t.Errorf("%s: err = %v, want ErrBadRequest", name, err)
		}
	}
}

func TestIsPush(t *testing.T) {
	for body, want := range map[string]bool{
		"":                               false,
		"{}":                             false,
		`{"message":{"data":"e30="}}`:    true,
		`{"message":null}`:               true, // a push, and a bad one (400), not a whole pass
		"not json":                       false,
		`{"subscription":"s","data":""}`: false,
	} {
		if got := fanout.IsPush([]byte(body)); got != want {
			t.Errorf("IsPush(%q) = %v, want %v", body, got, want)
		}
	}
}

// TestRequestIsOneValue: data with anything after its request object is
// not a request (Decode read the first value and ran its range).
func TestRequestIsOneValue(t *testing.T) {
	for _, d := range []string{`{"range":"0-16"}garbage`, `{"range":"0-16"}{"range":"16-32"}`} {
		if r, err := fanout.ParseRequest([]byte(d)); !errors.Is(err, fanout.ErrBadRequest) {
			t.Errorf("ParseRequest(%s) = %v, %v; want ErrBadRequest", d, r.Range, err)
		}
	}
	if _, err := fanout.ParseRequest([]byte(`{"range":"0-16"}` + "\n")); err != nil {
		t.Errorf("a request and a newline: %v", err)
	}
}
