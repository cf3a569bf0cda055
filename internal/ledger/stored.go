package ledger

import "time"

// The forms below are what every adapter keeps and reads back, so an
// operation reads the same from each (ledgertest pins it). An adapter that
// keeps values without a store's own encoding (JSON columns, memory)
// normalizes with them on the way in; one whose encoding already does so
// (Firestore timestamps) need not.

// StoredTime is t as a store keeps it: UTC, microsecond precision (a
// Firestore timestamp's). The zero time, which means "absent", stays zero.
func StoredTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// StoredHistory returns a copy of h as a store keeps it: its times at
// StoredTime. An empty list is nil: a list carries no difference between
// absent and empty (unlike user metadata, which is kept exactly).
func StoredHistory(h []HistoryEntry) []HistoryEntry {
	if len(h) == 0 {
		return nil
	}
	out := make([]HistoryEntry, len(h))
	for i, e := range h {
		e.At, e.UpdateTime = StoredTime(e.At), StoredTime(e.UpdateTime)
		out[i] = e
	}
	return out
}

// StoredReplays is StoredHistory for replays.
func StoredReplays(r []Replay) []Replay {
	if len(r) == 0 {
		return nil
	}
	out := make([]Replay, len(r))
	for i, e := range r {
		e.At = StoredTime(e.At)
		out[i] = e
	}
	return out
}

// StuckKey is the stuck scan's key of o (Operation.StuckFrom): zero (out of
// the scan) once o is terminal, else StuckFrom, or SubmittedAt before the
// first alert. Every store keeps it, derived on every write, in an indexed
// field, and reads it back as StuckFrom.
func StuckKey(o Operation) time.Time {
	switch {
	case o.State.Terminal():
		return time.Time{}
	case !o.StuckFrom.IsZero():
		return StoredTime(o.StuckFrom)
	default:
		return StoredTime(o.SubmittedAt)
	}
}
