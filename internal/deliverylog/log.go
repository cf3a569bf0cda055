package deliverylog

import "time"

// Log is what the Webhook function and the reconciler write to: the
// per-operation Recorder and the process's Traffic. Either may be nil.
type Log struct {
	Recorder *Recorder
	Traffic  *Traffic
}

// Delivery records a verified delivery or a reconcile observation of
// operation opID (empty: a delivery that named no operation, counted in
// Traffic only).
func (l *Log) Delivery(opID string, e Entry) {
	if l == nil {
		return
	}
	if l.Traffic != nil && e.Source == SourceWebhook {
		l.Traffic.Delivery(e.At, e.Outcome)
	}
	if l.Recorder != nil {
		l.Recorder.Record(opID, e)
	}
}

// Rejected counts a delivery refused before it was trusted (400, 401, 413).
func (l *Log) Rejected(at time.Time, deliveryID, reason string, status int) {
	if l == nil || l.Traffic == nil {
		return
	}
	l.Traffic.Rejected(at, deliveryID, reason, status)
}
