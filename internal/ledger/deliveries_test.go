package ledger

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
)

// reference is what EncodeDeliveries must write: EncodeJSON.
func reference(t *testing.T, entries []deliverylog.Entry) []byte {
	t.Helper()
	b, err := EncodeJSON(entries)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func randEntries(rng *rand.Rand, n int, plainOnly bool) []deliverylog.Entry {
	words := []string{"", "webhook", "reconcile", "msg_2mXk9", "batch.succeeded", "JOB_STATE_RUNNING", "v1", "v1a",
		"completed", "duplicate", "first-sighting", "a b-c_d.e/f:g", "<&>"}
	if !plainOnly {
		words = append(words, `q"uote`, `back\\slash`, "tab\t", "caf\u00e9", "\u2028", "bad\xff", "\x7f")
	}
	w := func() string { return words[rng.IntN(len(words))] }
	out := make([]deliverylog.Entry, n)
	for i := range out {
		at := time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).UTC()
		switch rng.IntN(6) {
		case 0:
			at = at.Truncate(time.Second)
		case 1:
			at = at.In(time.FixedZone("", 3600*(rng.IntN(25)-12)))
		}
		out[i] = deliverylog.Entry{At: at, Source: w(), DeliveryID: w(), Status: w(), Actor: w(), Auth: w(), Outcome: w(), Reason: w(),
			Answer: []int{0, 200, 401, 503, -1}[rng.IntN(5)], Latency: time.Duration(rng.Int64N(1e10) - 1e3)}
	}
	return out
}

// TestDeliveriesCodecIsEncodeJSON: EncodeDeliveries writes EncodeJSON's
// bytes and DecodeDeliveries reads DecodeJSON's values, for random logs;
// plain ones take the direct path both ways.
func TestDeliveriesCodecIsEncodeJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	direct := 0
	for i := range 2000 {
		plainOnly := i%3 != 0
		entries := randEntries(rng, rng.IntN(8), plainOnly)
		if i%97 == 0 {
			entries = nil
		}
		want := reference(t, entries)
		got, err := EncodeDeliveries(entries)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("EncodeDeliveries(%+v)\n got %s\nwant %s", entries, got, want)
		}
		var wantEntries []deliverylog.Entry
		if err := DecodeJSON(want, &wantEntries); err != nil {
			t.Fatal(err)
		}
		gotEntries, err := DecodeDeliveries(want)
		if err != nil {
			t.Fatalf("DecodeDeliveries(%s): %v", want, err)
		}
		if !reflect.DeepEqual(gotEntries, wantEntries) {
			t.Fatalf("DecodeDeliveries(%s)\n got %+v\nwant %+v", want, gotEntries, wantEntries)
		}
		if _, ok := parseEntries(want); ok {
			direct++
		} else if plainOnly {
			t.Fatalf("a plain log took the slow path: %s", want)
		}
	}
	if direct < 1000 {
		t.Fatalf("only %d of 2000 logs read directly", direct)
	}
}

// DecodeDeliveries reads any JSON DecodeJSON reads, as it reads it, and
// fails where it fails: the direct path gives way to it on anything but
// EncodeDeliveries' form.
func TestDecodeDeliveriesOtherForms(t *testing.T) {
	for _, in := range []string{
		`[]`, `null`, ` [ ] `,
		`[{"source":"webhook","at":"2026-11-25T13:00:00Z","outcome":"completed","latency_ns":5}]`,
		`[{"at":"2026-11-25T13:00:00Z","source":"webhook","outcome":"completed","latency_ns":5,"extra":1}]`,
		`[{"at":"2026-11-25T13:00:00Z","source":"webhook","outcome":"completed","answer":0,"latency_ns":5}]`,
		`[{"at":"2026-11-25T13:00:00Z","source":"webhook","reason":"","outcome":"completed","latency_ns":5}]`,
		`[{"at":"2026-11-25T13:00:00Z","source":"web\u0068ook","outcome":"completed","latency_ns":5}]`,
		`[{"at":"2026-11-25T13:00:00.000Z","source":"webhook","outcome":"completed","latency_ns":5}]`,
		`[{"at":"2026-11-25T13:00:00Z","source":"webhook","outcome":"completed","latency_ns":05}]`,
		`[{"at":"2026-11-25T13:00:00Z","source":"webhook","outcome":"completed","latency_ns":-0}]`,
		`[{"at":"2026-11-25T13:00:00Z","source":"webhook","outcome":"completed","latency_ns":5},]`,
		`[{"at":"2026-11-25T13:00:00Z","source":"webhook","outcome":"completed","latency_ns":5}] x`,
		`[{"AT":"2026-11-25T13:00:00Z","Source":"webhook","outcome":"completed","latency_ns":5}]`,
		`{"at":"2026-11-25T13:00:00Z"}`, ``, `[`,
	} {
		var want []deliverylog.Entry
		werr := DecodeJSON([]byte(in), &want)
		got, err := DecodeDeliveries([]byte(in))
		// On an error only the error counts (DecodeJSON may have filled
		// part of want).
		if (err != nil) != (werr != nil) || (err == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("DecodeDeliveries(%s) = %+v, %v; DecodeJSON: %+v, %v", in, got, err, want, werr)
		}
	}
}

// Keys written by Encode are the struct's JSON names (a renamed field must
// change both).
func TestEncodeDeliveriesKeysAreTheStructTags(t *testing.T) {
	e := deliverylog.Entry{At: time.Unix(0, 0).UTC(), Source: "s", DeliveryID: "d", Status: "st", Actor: "ac", Auth: "a", Outcome: "o", Reason: "r", Answer: 200, Latency: 1}
	got, err := EncodeDeliveries([]deliverylog.Entry{e})
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(e)
	for i := range typ.NumField() {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if !bytes.Contains(got, []byte(`"`+key+`":`)) {
			t.Errorf("%s does not carry %q", got, key)
		}
	}
}

// A time RFC 3339 cannot express fails EncodeDeliveries as it fails
// EncodeJSON.
func TestEncodeDeliveriesRefusesWhatEncodeJSONRefuses(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 25, 13, 0, 0, 0, time.FixedZone("far", 25*3600)),
		time.Date(2026, 11, 25, 13, 0, 0, 0, time.FixedZone("far", -24*3600)),
	} {
		entries := []deliverylog.Entry{{At: at, Source: "webhook", Outcome: "completed"}}
		_, werr := EncodeJSON(entries)
		if _, err := EncodeDeliveries(entries); err == nil || werr == nil {
			t.Errorf("EncodeDeliveries(at %v): %v; EncodeJSON: %v; want both to fail", at, err, werr)
		}
	}
	near := []deliverylog.Entry{{At: time.Date(2026, 11, 25, 13, 0, 0, 0, time.FixedZone("near", 23*3600+59*60)), Source: "webhook", Outcome: "completed"}}
	if got, err := EncodeDeliveries(near); err != nil || !bytes.Equal(got, reference(t, near)) {
		t.Errorf("EncodeDeliveries(23:59 away) = %s, %v; want %s", got, err, reference(t, near))
	}
}
