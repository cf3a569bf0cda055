package ledger

import (
	"bytes"
	"strconv"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
)

// The stored form of a delivery log document is the JSON array of its
// entries, as EncodeJSON writes it: Firestore's deliveries/{id} (read,
// merged and written back on every later delivery to its operation), and
// the version-8 SQLite table that schema version 9 moves to a row per
// entry. encoding/json's reflection and time handling were 11 % of the
// SQLite writer goroutine's time under load when it merged such logs
// (docs/BENCHMARKS.md).
//
// EncodeDeliveries and DecodeDeliveries write and read that same form
// directly for entries whose text needs no escaping (ids, event types,
// reasons are plain ASCII), and hand anything else to EncodeJSON and
// DecodeJSON; TestDeliveriesCodecIsEncodeJSON holds them to those two's
// bytes and values.

// EncodeDeliveries returns a delivery log's stored form: EncodeJSON(entries).
func EncodeDeliveries(entries []deliverylog.Entry) ([]byte, error) {
	if b, ok := appendEntries(make([]byte, 0, 160*len(entries)+2), entries); ok {
		return b, nil
	}
	return EncodeJSON(entries)
}

// appendEntries appends entries as encoding/json would, or reports false
// when one needs what only encoding/json does (an escape, or a time it
// refuses).
func appendEntries(b []byte, entries []deliverylog.Entry) ([]byte, bool) {
	if entries == nil {
		return append(b, "null"...), true
	}
	b = append(b, '[')
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		// encoding/json refuses what RFC 3339 cannot say: a year outside
		// 0–9999, a zone 24 hours or more away.
		if _, off := e.At.Zone(); off <= -24*3600 || off >= 24*3600 {
			return b, false
		}
		if y := e.At.Year(); y < 0 || y > 9999 {
			return b, false
		}
		b = append(b, `{"at":"`...)
		b = e.At.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
		ok := true
		str := func(key, v string, omitEmpty bool) {
			if omitEmpty && v == "" {
				return
			}
			ok = ok && plainText(v)
			b = append(b, `,"`...)
			b = append(b, key...)
			b = append(b, `":"`...)
			b = append(b, v...)
			b = append(b, '"')
		}
		str("source", e.Source, false)
		str("delivery_id", e.DeliveryID, true)
		str("status", e.Status, true)
		str("actor", e.Actor, true)
		str("auth", e.Auth, true)
		str("outcome", e.Outcome, false)
		str("reason", e.Reason, true)
		if !ok {
			return b, false
		}
		if e.Answer != 0 {
			b = append(b, `,"answer":`...)
			b = strconv.AppendInt(b, int64(e.Answer), 10)
		}
		b = append(b, `,"latency_ns":`...)
		b = strconv.AppendInt(b, int64(e.Latency), 10)
		b = append(b, '}')
	}
	return append(b, ']'), true
}

// plainText reports whether encoding/json writes s between quotes as it is:
// printable ASCII other than the quote and the backslash.
func plainText[S ~string | ~[]byte](s S) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// DecodeDeliveries reads a stored delivery log: what DecodeJSON reads
// into []deliverylog.Entry.
func DecodeDeliveries(data []byte) ([]deliverylog.Entry, error) {
	if out, ok := parseEntries(data); ok {
		return out, nil
	}
	var out []deliverylog.Entry
	if err := DecodeJSON(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// parseEntries reads exactly what appendEntries writes, or reports false.
func parseEntries(data []byte) ([]deliverylog.Entry, bool) {
	if string(data) == "null" {
		return nil, true
	}
	p := parser{b: data}
	out := []deliverylog.Entry{}
	if p.lit("[") && p.lit("]") {
		return out, p.end()
	}
	for !p.bad {
		var e deliverylog.Entry
		at := p.str(`{"at":`, false)
		t, err := time.Parse(time.RFC3339Nano, at)
		if p.bad || err != nil || t.Format(time.RFC3339Nano) != at {
			return nil, false // not the form appendEntries writes
		}
		e.At = t
		e.Source = p.str(`,"source":`, false)
		e.DeliveryID = p.str(`,"delivery_id":`, true)
		e.Status = p.str(`,"status":`, true)
		e.Actor = p.str(`,"actor":`, true)
		e.Auth = p.str(`,"auth":`, true)
		e.Outcome = p.str(`,"outcome":`, false)
		e.Reason = p.str(`,"reason":`, true)
		if p.lit(`,"answer":`) {
			n := p.int()
			if n == 0 || int64(int(n)) != n {
				return nil, false // omitted when 0
			}
			e.Answer = int(n)
		}
		p.need(`,"latency_ns":`)
		e.Latency = time.Duration(p.int())
		p.need("}")
		if p.bad {
			return nil, false
		}
		out = append(out, e)
		if p.lit("]") {
			return out, p.end()
		}
		p.need(",")
	}
	return nil, false
}

// parser reads b from the front (parseEntries); once a step fails, bad is
// set and every later step fails too.
type parser struct {
	b   []byte
	bad bool
}

func (p *parser) end() bool { return !p.bad && len(p.b) == 0 }

// lit consumes s if b starts with it.
func (p *parser) lit(s string) bool {
	if p.bad || !bytes.HasPrefix(p.b, []byte(s)) {
		return false
	}
	p.b = p.b[len(s):]
	return true
}

// need consumes s, or fails the parse.
func (p *parser) need(s string) {
	if !p.lit(s) {
		p.bad = true
	}
}

// str consumes key and the plain string after it. An optional key may be
// missing (""); one present with an empty value is not what appendEntries
// writes (it omits those), and fails the parse.
func (p *parser) str(key string, optional bool) string {
	if !p.lit(key) {
		if !optional {
			p.bad = true
		}
		return ""
	}
	p.need(`"`)
	end := bytes.IndexByte(p.b, '"')
	if p.bad || end < 0 || (optional && end == 0) || !plainText(p.b[:end]) {
		p.bad = true
		return ""
	}
	s := string(p.b[:end])
	p.b = p.b[end+1:]
	return s
}

// int consumes a JSON integer that fits an int64.
func (p *parser) int() int64 {
	end := 0
	for end < len(p.b) && (p.b[end] == '-' || p.b[end] >= '0' && p.b[end] <= '9') {
		end++
	}
	digits := string(p.b[:end])
	n, err := strconv.ParseInt(digits, 10, 64)
	if p.bad || err != nil || strconv.FormatInt(n, 10) != digits {
		p.bad = true // not JSON's one form of the number (a leading zero, "-0")
		return 0
	}
	p.b = p.b[end:]
	return n
}
