package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/intentmatch"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/opname"
)

// unboundIntents counts the intents bound to no operation past their grace
// (the summary's IntentsUnbound) and raises the intent-unbound alert of
// each whose alert is due, paced like the stuck alert (alertDue): when it
// passes its grace, 1 h, 6 h and 24 h later, then every 24 h, until it is
// bound. An unbound intent is never dropped: a video or an interaction has
// no list to find its operation by, and the alert is how a person learns
// of a create whose answer and deliveries were all lost.
//
// As the stuck scan, the alert scan reads only intents whose alert is due,
// earliest due first: each alert moves the intent's key
// (ledger.IntentAlertKey) to when the next one is due, less the grace. The
// record is written first, fenced on the revision read, and the line is
// raised only by the pass whose record wins.
func (r *Reconciler) unboundIntents(ctx context.Context, now time.Time, t *tally) error {
	cutoff := now.Add(-r.cfg.IntentGrace)
	n, err := r.cfg.Ledger.CountUnboundIntents(ctx, cutoff)
	if err != nil {
		return fmt.Errorf("reconcile: count unbound intents: %w", err)
	}
	t.add(func(s *Summary) { s.IntentsUnbound = int(n) })
	if n == 0 {
		return nil
	}
	due, err := r.cfg.Ledger.IntentAlertsDue(ctx, cutoff, r.cfg.MaxOperations)
	if err != nil {
		return fmt.Errorf("reconcile: intent alerts due: %w", err)
	}
	for _, in := range due {
		if cut(ctx) {
			t.add(func(s *Summary) { s.Partial = true })
			break
		}
		alert, at, next := alertDue(in.CreatedAt.Add(r.cfg.IntentGrace), in.AlertedAt, now)
		if alert && r.findBatch(ctx, t, in) {
			continue // bound now: nothing to alert
		}
		rec := in
		rec.AlertedAt, rec.AlertFrom = at, next.Add(-r.cfg.IntentGrace)
		_, err := r.cfg.Ledger.Apply(ctx, ledger.PutIntent(rec))
		switch {
		case errors.Is(err, ledger.ErrConflict):
			continue // another pass recorded it, or it was bound meanwhile
		case err != nil:
			t.add(func(s *Summary) { s.Errors++ })
			r.cfg.Log.WarnContext(ctx, "reconcile: could not record the intent-unbound alert; it is repeated next pass",
				"intent", in.Key, "error", err.Error())
		}
		if !alert {
			continue
		}
		// Never the metadata's values: they are the caller's.
		attrs := []any{"alert", "intent-unbound", "intent", in.Key, "kind", string(in.Kind), "model", in.Model,
			"display_name", in.DisplayName, "created_at", in.CreatedAt, "unbound_for", now.Sub(in.CreatedAt).Round(time.Second).String(),
			"grace", r.cfg.IntentGrace.String()}
		if !in.AlertedAt.IsZero() {
			attrs = append(attrs, "previous_alert_at", in.AlertedAt)
		}
		r.cfg.Log.ErrorContext(ctx, "intent unbound: its Gemini operation may exist unknown to lrosink (check Gemini; register it with the key, or submit again with --force)", attrs...)
	}
	return nil
}

// findBatch looks for an unbound batch intent's job before the intent is
// alerted, listing back to its record time (less intentmatch's margin):
// adoption reads only the newest jobs each pass (AdoptMaxPages pages, and
// from the newest again while a scan keeps failing), so a job that more
// than that many others followed before adoption took it is out of its
// reach. The intent says what to look for and since when; it is looked for
// at its alert points only (its grace, then 1 h, 6 h, 24 h later...). A job
// found is fed to the door naming the intent, which binds it. It reports
// whether it did; a failed search or ingest is counted and the intent is
// alerted as before.
func (r *Reconciler) findBatch(ctx context.Context, t *tally, in ledger.Intent) bool {
	if in.Kind != opname.KindBatch || r.cfg.Finder == nil || r.cfg.Gemini == nil {
		return false
	}
	want := intentmatch.Intent{Key: in.Key, DisplayName: in.DisplayName, Model: in.Model, CreatedAt: in.CreatedAt}
	lb, ok, err := r.cfg.Finder.FindListedBatch(ctx, intentmatch.Since(want), func(lb event.ListedBatch) bool {
		return intentmatch.Batch(intentmatch.Job{DisplayName: lb.DisplayName, Model: lb.Model, CreateTime: lb.CreateTime, Intent: lb.Intent}, want)
	})
	if err != nil {
		t.add(func(s *Summary) { s.Errors++ })
		r.cfg.Log.WarnContext(ctx, "reconcile: could not search the batch listing for an unbound batch intent; it is alerted",
			"intent", in.Key, "error", err.Error())
		return false
	}
	if !ok {
		return false
	}
	ev := lb.Event
	ev.Source, ev.Intent = event.SourceReconcile, in.Key
	res, err := r.cfg.Door.Ingest(ctx, ev)
	if err != nil || res.Intent != in.Key {
		t.add(func(s *Summary) { s.Errors++ })
		note := res.IntentNote
		if err != nil {
			note = err.Error()
		}
		r.cfg.Log.WarnContext(ctx, "reconcile: found an unbound batch intent's job but could not bind it; it is alerted",
			"intent", in.Key, "operation", ev.Name, "error", note)
		return false
	}
	t.add(func(s *Summary) { s.IntentsBound++ })
	return true
}

// batchIntents are the unbound batch intents a pass's adoption matches the
// listed jobs against (intentmatch.Batch), each taken once.
type batchIntents []ledger.Intent

// unboundBatches reads the unbound batch intents (at most MaxOperations,
// oldest first): normally none, since a submission binds its intent within
// seconds of recording it.
func (r *Reconciler) unboundBatches(ctx context.Context) (batchIntents, error) {
	var out batchIntents
	var after ledger.IntentCursor
	for read := 0; read < r.cfg.MaxOperations; {
		page, err := r.cfg.Ledger.UnboundIntents(ctx, r.cfg.Now(), after, min(r.cfg.PageSize, r.cfg.MaxOperations-read))
		if err != nil {
			return out, err
		}
		for _, in := range page {
			if in.Kind == opname.KindBatch {
				out = append(out, in)
			}
		}
		read += len(page)
		if len(page) < r.cfg.PageSize {
			break
		}
		after = ledger.IntentAfter(page[len(page)-1])
	}
	return out, nil
}

// claim is the event of a listed job with the intent it is: the one its
// echoed metadata names (the listing set Event.Intent), else the first
// unbound batch intent it matches, which no later job of the scan can
// match again. The door binds it (internal/ingest).
func (b *batchIntents) claim(lb event.ListedBatch) event.Event {
	ev := lb.Event
	job := intentmatch.Job{DisplayName: lb.DisplayName, Model: lb.Model, CreateTime: lb.CreateTime, Intent: ev.Intent}
	for i, in := range *b {
		if intentmatch.Batch(job, intentmatch.Intent{Key: in.Key, DisplayName: in.DisplayName, Model: in.Model, CreatedAt: in.CreatedAt}) {
			ev.Intent = in.Key
			*b = append((*b)[:i:i], (*b)[i+1:]...)
			break
		}
	}
	return ev
}
