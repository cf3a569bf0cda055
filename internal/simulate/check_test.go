package simulate

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/clock"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
)

// checkWorld is the end of a run, set by hand: what Gemini did (plans),
// what the ledger holds and what was published. The invariant check runs on
// it directly, so each violation it can report is shown to be reported;
// whole runs only show that a correct system reports none.
type checkWorld struct {
	t     *testing.T
	r     *runner
	store *memledger.Store
	t0    time.Time
}

func newCheckWorld(t *testing.T) *checkWorld {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := Defaults()
	o.WebhookOutage = 0
	store := memledger.New()
	r := &runner{o: o, b: Backend{Name: "memory", Ledger: store}, clock: clock.NewManual(t0.Add(o.Horizon)), t0: t0,
		fake: fakegemini.New(), sink: &recorder{slow: map[string]bool{}}, faults: &faults{afterPublish: map[string]int{}},
		stats: newDecisionStats(nil), ledger: claims.New(store), last: map[string]lifecycle.Current{}}
	return &checkWorld{t: t, r: r, store: store, t0: t0}
}

// finished adds a batch Gemini finished (SUCCEEDED) an hour in.
func (w *checkWorld) finished(id string) plan {
	p := plan{kind: opname.KindBatch, id: id, name: "batches/" + id, submit: w.t0,
		steps: []step{{at: w.t0.Add(time.Hour), state: lifecycle.Succeeded}}, terminal: lifecycle.Succeeded, notify: true}
	w.r.plans = append(w.r.plans, p)
	return p
}

// neverFinished adds an operation still running in Gemini.
func (w *checkWorld) neverFinished(id string) plan {
	p := plan{kind: opname.KindBatch, id: id, name: "batches/" + id, submit: w.t0}
	w.r.plans = append(w.r.plans, p)
	return p
}

// record writes p's operation in state st, settled by webhook 5 minutes
// after Gemini finished; a terminal one with a claim, DONE if done.
func (w *checkWorld) record(p plan, st lifecycle.State, done bool) {
	w.t.Helper()
	ctx := w.t.Context()
	key := opname.KeyPrefix + p.name
	id, err := opname.DocID(key)
	if err != nil {
		w.t.Fatal(err)
	}
	op := ledger.Operation{ID: id, Name: p.name, APIName: p.name, Kind: p.kind, State: st, SubmittedAt: p.submit, UpdateTime: w.t0.Add(time.Hour)}
	if !st.Terminal() {
		if _, _, err := claims.New(w.store).CommitOperation(ctx, op, nil); err != nil {
			w.t.Fatal(err)
		}
		return
	}
	op.SettledAt, op.SettledBy = w.t0.Add(time.Hour+5*time.Minute), "webhook"
	c := &ledger.Claim{ID: id, Key: key, Operation: p.name, Status: ledger.ClaimHeld, Holder: "h1", LeaseUntil: op.SettledAt.Add(time.Minute)}
	_, lease, err := claims.New(w.store).CommitOperation(ctx, op, c)
	if err != nil {
		w.t.Fatal(err)
	}
	if done {
		if err := claims.New(w.store).CompleteClaim(ctx, *lease, op.SettledAt); err != nil {
			w.t.Fatal(err)
		}
	}
}

// publish records a message for p as the sink would have.
func (w *checkWorld) publish(p plan, st lifecycle.State, edit func(*results.Message)) {
	m := results.Message{Operation: p.name, Kind: string(p.kind), State: string(st), GeminiStatus: "batch.succeeded",
		UpdateTime: w.t0.Add(time.Hour), SettledBy: "webhook", SettledAt: w.t0.Add(time.Hour + 5*time.Minute),
		IdempotencyKey: opname.KeyPrefix + p.name}
	if edit != nil {
		edit(&m)
	}
	w.r.sink.msgs = append(w.r.sink.msgs, m)
}

func (w *checkWorld) check() *Report {
	w.r.check(w.t.Context())
	return &w.r.rep
}

func wantViolation(t *testing.T, rep *Report, substr string) {
	t.Helper()
	for _, v := range rep.Violations {
		if strings.Contains(v, substr) {
			return
		}
	}
	t.Errorf("no violation containing %q; got %q", substr, rep.Violations)
}

// TestCheckCleanWorld: a settled operation with its one message, DONE
// claim and matching state, and a running one not yet stuck, break
// nothing; the report counts and times them.
func TestCheckCleanWorld(t *testing.T) {
	w := newCheckWorld(t)
	p := w.finished("ok")
	w.record(p, lifecycle.Succeeded, true)
	w.publish(p, lifecycle.Succeeded, nil)
	running := w.neverFinished("running")
	running.submit = w.t0.Add(3 * time.Hour) // pending 5 h at the end: not stuck
	w.r.plans[1] = running
	w.record(running, lifecycle.Running, false)
	w.r.stats.outcomes["applied"] = 2
	w.r.counts.CrashAfterPublish.Add(2)
	rep := w.check()
	if !rep.OK() {
		t.Fatalf("violations in a clean world: %v", rep.Violations)
	}
	f := rep.Final
	if f.Terminal != 1 || f.SettledWebhook != 1 || f.NeverFinished != 1 || f.StuckUnresolved != 0 || f.Messages != 1 || f.DistinctKeys != 1 {
		t.Errorf("final %+v", f)
	}
	if rep.Latency.SettleMax != "5m0s" || rep.Options.Horizon != "8h0m0s" || rep.Outcomes["applied"] != 2 || rep.Ops != 1000 ||
		rep.Faults.CrashAfterPublish != 2 {
		t.Errorf("latency %+v, options %+v, outcomes %v, ops %d, faults %+v", rep.Latency, rep.Options, rep.Outcomes, rep.Ops, rep.Faults)
	}
}

// TestCheckReportsEachViolation: every invariant check of the end state
// reports its violation.
func TestCheckReportsEachViolation(t *testing.T) {
	for _, c := range []struct {
		name  string
		world func(w *checkWorld)
		want  []string
	}{
		{"operation missing from the ledger", func(w *checkWorld) { w.finished("gone") }, []string{"batches/gone is not in the ledger"}},
		{"ledger state differs from Gemini's", func(w *checkWorld) {
			p := w.finished("x")
			w.record(p, lifecycle.Failed, true)
			w.publish(p, lifecycle.Failed, nil)
		}, []string{"ended SUCCEEDED in Gemini but FAILED in the ledger"}},
		{"settled without a message", func(w *checkWorld) { w.record(w.finished("x"), lifecycle.Succeeded, true) },
			[]string{"settled SUCCEEDED but no results message was published"}},
		{"claim left HELD", func(w *checkWorld) {
			p := w.finished("x")
			w.record(p, lifecycle.Succeeded, false)
			w.publish(p, lifecycle.Succeeded, nil)
		}, []string{"claim not DONE at the end"}},
		{"an unexplained second message that differs", func(w *checkWorld) {
			p := w.finished("x")
			w.record(p, lifecycle.Succeeded, true)
			w.publish(p, lifecycle.Succeeded, nil)
			w.publish(p, lifecycle.Succeeded, func(m *results.Message) { m.SettledBy = "reconcile" })
		}, []string{"2 results messages, at most 1 explained", "two different messages for one key"}},
		{"message state differs from Gemini's", func(w *checkWorld) {
			p := w.finished("x")
			w.record(p, lifecycle.Succeeded, true)
			w.publish(p, lifecycle.Failed, nil)
		}, []string{"message says FAILED, Gemini SUCCEEDED"}},
		{"message metadata over the bound", func(w *checkWorld) {
			p := w.finished("x")
			w.record(p, lifecycle.Succeeded, true)
			w.publish(p, lifecycle.Succeeded, func(m *results.Message) {
				m.UserMetadata = map[string]any{"big": strings.Repeat("x", ledger.MaxMetadataBytes)}
			})
		}, []string{"a message carries metadata over the bound"}},
		{"message for an operation nobody submitted", func(w *checkWorld) {
			w.publish(plan{kind: opname.KindBatch, name: "batches/stranger"}, lifecycle.Succeeded, nil)
		}, []string{"a message for an unknown operation gemini:batches/stranger"}},
		{"closed though Gemini never finished", func(w *checkWorld) {
			p := w.neverFinished("x")
			p.submit = w.t0.Add(3 * time.Hour) // not stuck: only the closing is wrong
			w.r.plans[0] = p
			w.record(p, lifecycle.Succeeded, true)
			w.publish(p, lifecycle.Succeeded, nil)
		}, []string{"never finished in Gemini but the ledger says SUCCEEDED", "never finished but 1 results messages were published"}},
		{"stuck and never alerted", func(w *checkWorld) { w.record(w.neverFinished("x"), lifecycle.Running, false) },
			[]string{"batches/x is stuck (pending since 2026-01-01T00:00:00Z) but was never alerted"}},
		{"webhook outage without its alert", func(w *checkWorld) { w.r.o.WebhookOutage = time.Hour },
			[]string{"want 1 webhook-disabled alert and 1 recovery line, got 0 and 0"}},
		{"webhook alerts without an outage", func(w *checkWorld) { w.r.stats.hookAlerts = 1 },
			[]string{"no webhook outage, yet 1 webhook-disabled alerts and 0 recovery lines"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newCheckWorld(t)
			c.world(w)
			rep := w.check()
			for _, want := range c.want {
				wantViolation(t, rep, want)
			}
			if rep.ViolationCount != len(c.want) {
				t.Errorf("%d violations, want %d: %q", rep.ViolationCount, len(c.want), rep.Violations)
			}
		})
	}
}

// TestCheckStuckButAlerted: a stuck operation that was alerted is counted,
// not a violation.
func TestCheckStuckButAlerted(t *testing.T) {
	w := newCheckWorld(t)
	p := w.neverFinished("x")
	w.record(p, lifecycle.Running, false)
	w.r.stats.alerts[p.name] = 1
	rep := w.check()
	if !rep.OK() || rep.Final.StuckUnresolved != 1 || rep.Reconcile.StuckAlerts != 1 || rep.Reconcile.StuckAlerted != 1 {
		t.Fatalf("violations %q, final %+v, reconcile %+v", rep.Violations, rep.Final, rep.Reconcile)
	}
}

// submitted adds a submitted plan of kind whose operation Gemini created
// as name, its intent recorded (unbound) an hour in.
func (w *checkWorld) submitted(kind opname.Kind, id, name string) plan {
	w.t.Helper()
	p := plan{kind: kind, id: id, name: name, label: id, submit: w.t0, notify: true,
		sub: &submission{key: "key-" + id, name: name, meta: map[string]any{"sim": id, "big_integer": json.Number(bigInteger)}}}
	in := ledger.Intent{Key: p.sub.key, Kind: kind, Model: "models/m", Metadata: p.sub.meta, CreatedAt: w.t0}
	if _, err := w.store.Apply(w.t.Context(), ledger.PutIntent(in)); err != nil {
		w.t.Fatal(err)
	}
	w.r.plans = append(w.r.plans, p)
	return p
}

// TestCheckReportsEachSubmissionViolation: every check of a submission at
// the end of a run reports its violation, and an unknowable, alerted
// intent is counted, not reported.
func TestCheckReportsEachSubmissionViolation(t *testing.T) {
	for _, c := range []struct {
		name  string
		world func(w *checkWorld)
		want  string
	}{
		{"a batch with no ledger entry", func(w *checkWorld) { w.submitted(opname.KindBatch, "b", "batches/b") },
			"batch batches/b, created for intent key-b, has no ledger entry after the grace"},
		{"an unbound video never alerted", func(w *checkWorld) { w.submitted(opname.KindVideo, "v", "operations/v") },
			"intent key-v (video) is unbound past its grace but was never alerted"},
		{"an unbound video whose delivery lrosink accepted", func(w *checkWorld) {
			w.submitted(opname.KindVideo, "v", "operations/v").sub.accepted.Add(1)
		}, "has no ledger entry though lrosink accepted 1 of its deliveries"},
		{"an operation in the ledger, its intent unbound", func(w *checkWorld) {
			w.record(w.submitted(opname.KindInteraction, "i", "interactions/i"), lifecycle.Running, false)
		}, "intent key-i: unbound at the end though its operation interactions/i is in the ledger"},
		{"bound, but the operation lost the caller's metadata", func(w *checkWorld) {
			p := w.submitted(opname.KindBatch, "m", "batches/m")
			w.record(p, lifecycle.Running, false)
			in, _ := w.store.GetIntent(w.t.Context(), p.sub.key)
			in.Name, in.APIName, in.BoundAt, in.BoundBy = p.name, p.name, w.t0, "submit"
			if _, err := w.store.Apply(w.t.Context(), ledger.PutIntent(in)); err != nil {
				w.t.Fatal(err)
			}
		}, "batches/m: the caller's metadata is not exact on the bound operation"},
		{"a submission that created nothing", func(w *checkWorld) {
			w.submitted(opname.KindVideo, "n", "operations/n").sub.name = ""
		}, "intent key-n (video): its submission never created an operation"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newCheckWorld(t)
			c.world(w)
			rep := w.check()
			wantViolation(t, rep, c.want)
		})
	}
	t.Run("alerted and unknowable", func(t *testing.T) {
		w := newCheckWorld(t)
		p := w.submitted(opname.KindVideo, "v", "operations/v")
		w.r.stats.intentAlerts[p.sub.key] = 1
		if rep := w.check(); !rep.OK() || rep.Submissions.UnboundAlerted != 1 {
			t.Fatalf("violations %q, submissions %+v: an alerted intent nothing could show lrosink is no violation", rep.Violations, rep.Submissions)
		}
	})
}
