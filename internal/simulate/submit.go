package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/submit"
)

// The models the simulated submitters create with.
const (
	batchModel       = "gemini-2.5-flash"
	interactionModel = "gemini-2.5-flash"
)

// batchInput is every simulated batch's input: two requests in the batch
// API's JSONL form, sent inline.
const batchInput = `{"key":"q1","request":{"contents":[{"parts":[{"text":"one"}]}]}}
{"key":"q2","request":{"contents":[{"parts":[{"text":"two"}]}]}}
`

// bigInteger is in every submitted operation's metadata: a float64 would
// round it, so it shows the metadata is kept exactly (json.Number).
const bigInteger = "123456789012345678901234567890"

// submission is a plan created through lrosink's own submission path
// (package submit: intent, create, bind) rather than by the user's code
// and registered by hand (Options.Submit).
type submission struct {
	key string
	// meta is the caller's metadata, the same map on every attempt.
	meta map[string]any
	// crash: the first attempt's process is killed between the create and
	// the bind (Options.CrashBeforeBind).
	crash bool
	// retryAt, when set, is when the submission is run again with the same
	// key (Options.DuplicateSubmit); retried once it has been.
	retryAt time.Time
	retried bool
	// attempted: the first attempt ran to its create (or further).
	attempted bool
	// name is the operation Gemini created (canonical), learned when the
	// submission is about to bind it: the world's knowledge, not the
	// submitter's (a killed submitter never prints it).
	name string
	// unbound: the first attempt did not bind (killed, or its bind failed).
	unbound bool
	// accepted counts the webhook deliveries about the operation that
	// lrosink answered 2xx: each one names the intent.
	accepted atomic.Int32
}

// chooseSubmission decides, with the dice, whether plan p (index i) is
// submitted through package submit, and its faults. Poison operations and
// those with metadata over the bound stay hand-registered: the first could
// never be bound, the second is refused before the intent is recorded.
func (r *runner) chooseSubmission(p *plan, i int, delays *rand.Rand) {
	if p.poison || p.bigMeta || !r.dice.roll(r.o.Submit, "submit", p.label) {
		return
	}
	s := &submission{key: fmt.Sprintf("sim-key-%05d", i), crash: r.dice.roll(r.o.CrashBeforeBind, "crash-before-bind", p.label)}
	s.meta = r.metadata(*p, true, "register", "")
	s.meta["big_integer"] = json.Number(bigInteger)
	if r.dice.roll(r.o.DuplicateSubmit, "duplicate-submit", p.label) {
		// At once (a retry loop) or up to 30 min later (a person).
		s.retryAt = p.submit
		if delays.IntN(2) == 0 {
			s.retryAt = p.submit.Add(time.Duration(delays.Int64N(int64(30 * time.Minute))))
		}
		r.counts.DuplicateSubmits.Add(1)
	}
	if s.crash {
		r.counts.CrashBeforeBind.Add(1)
	}
	r.counts.Submitted.Add(1)
	p.sub = s
	r.keyPlan[s.key] = i
}

// simIntents is the submitters' Intents: the embedded intent path over the
// run's ledger (register.Intents, as `lrosink submit` without a Register
// URL), with the fault between create and bind.
type simIntents struct {
	submit.Intents
	r *runner
}

var errKilledBeforeBind = errors.New("simulated process kill between the create and the bind")

// Bind learns which operation Gemini created for the key (the plan's
// name from now on), checks that a key never gets a second one, and kills
// the first attempt of a crashing submission before it binds.
func (s simIntents) Bind(ctx context.Context, key, name string) (submit.IntentStatus, error) {
	pi, ok := s.r.keyPlan[key]
	if !ok {
		return submit.IntentStatus{}, fmt.Errorf("simulate: bind of an unknown key %s", key)
	}
	p := &s.r.plans[pi]
	n, err := opname.Normalize(name, opname.KindUnknown)
	if err != nil {
		return submit.IntentStatus{}, fmt.Errorf("simulate: created name %q: %w", name, err)
	}
	switch {
	case p.sub.name == "":
		p.sub.name, p.name, p.id = n.Canonical, n.Canonical, n.ID
	case p.sub.name != n.Canonical:
		s.r.violate("intent %s: a second Gemini operation %s was created (the first was %s): one create per key", key, n.Canonical, p.sub.name)
	}
	if !p.sub.attempted && p.sub.crash {
		return submit.IntentStatus{}, errKilledBeforeBind
	}
	return s.Intents.Bind(ctx, key, name)
}

// submitDue runs the submissions due now, one after the other in plan
// order: the fake's create ids, and so the whole run, follow the seed.
func (r *runner) submitDue(ctx context.Context, now time.Time) {
	for pi := range r.plans {
		p := &r.plans[pi]
		s := p.sub
		if s == nil || p.submit.After(now) {
			continue
		}
		if !s.attempted {
			r.submitOnce(ctx, pi, false)
		}
		if s.attempted && !s.retryAt.IsZero() && !s.retried && !s.retryAt.After(now) {
			r.submitOnce(ctx, pi, true)
		}
	}
}

// submitOnce runs plan pi's submission through package submit, the first
// time or again with the same key.
func (r *runner) submitOnce(ctx context.Context, pi int, retry bool) {
	p := &r.plans[pi]
	s := p.sub
	var err error
	var sub submit.Submission
	switch p.kind {
	case opname.KindBatch:
		sub, err = r.submitter.Batch(ctx, submit.Batch{Key: s.key, Model: batchModel, Metadata: s.meta,
			Input: strings.NewReader(batchInput), InputSize: int64(len(batchInput))})
	case opname.KindVideo:
		sub, err = r.submitter.Video(ctx, submit.Video{Key: s.key, Model: videoModel, Prompt: "simulated " + p.label, Metadata: s.meta})
	default:
		sub, err = r.submitter.Interaction(ctx, submit.Interaction{Key: s.key, Model: interactionModel, Input: "simulated " + p.label, Metadata: s.meta})
	}
	if !retry {
		if s.name == "" {
			// Nothing created (the intent's record failed): the submitter
			// tries again on the next tick.
			r.counts.SubmitErrors.Add(1)
			return
		}
		s.attempted, s.unbound = true, err != nil
		if err != nil && !errors.Is(err, errKilledBeforeBind) {
			r.counts.BindErrors.Add(1)
		}
		return
	}
	// A retry finds the operation (bound, or the batch by listing) or, for
	// a kind with no list whose intent is unbound, refuses.
	s.retried = true
	switch {
	case err == nil && sub.Existing:
		r.counts.RetriesExisting.Add(1)
	case errors.Is(err, submit.ErrIntentUnbound):
		r.counts.RetriesRefused.Add(1)
	case err == nil:
		r.violate("intent %s: its retry created %s anew without Force", s.key, sub.Operation)
	default:
		r.counts.RetryErrors.Add(1)
	}
}

// echoed is the user metadata Gemini holds for a submitted operation's
// webhook_config, as its deliveries echo it (the intent key beside the
// caller's metadata, as the create sent it).
func (r *runner) echoed(p plan) map[string]any {
	var w map[string]any
	switch p.kind {
	case opname.KindBatch:
		if st, ok := r.fake.Batch(p.id); ok && st.Webhook != nil {
			w = st.Webhook.UserMetadata
		}
	case opname.KindVideo:
		if st, ok := r.fake.Video(videoModel, p.id); ok && st.Webhook != nil {
			w = st.Webhook.UserMetadata
		}
	default:
		if st, ok := r.fake.Interaction(p.id); ok && st.Webhook != nil {
			w = st.Webhook.UserMetadata
		}
	}
	return w
}

// unboundDoor is the planted bug "no-delivery-bind": the webhook path
// ignores the intent a delivery names, as a door without the bind would.
type unboundDoor struct{ httpDoor }

type httpDoor interface {
	Ingest(ctx context.Context, ev event.Event) (ingest.Result, error)
}

func (d unboundDoor) Ingest(ctx context.Context, ev event.Event) (ingest.Result, error) {
	if _, ok := ev.UserMetadata[event.IntentMetadataKey]; ok {
		ev.UserMetadata = maps.Clone(ev.UserMetadata)
		delete(ev.UserMetadata, event.IntentMetadataKey)
	}
	ev.Intent = ""
	return d.httpDoor.Ingest(ctx, ev)
}

// sameJSON reports whether a and b encode to the same JSON (keys sorted,
// numbers as their literals): metadata kept exactly.
func sameJSON(a, b map[string]any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// checkSubmission checks a submitted plan at the end of the run (after
// the grace): its intent is bound to the one operation Gemini created for
// it, which is in the ledger, names the intent and carries the caller's
// metadata exactly; or, only for a video or an interaction that no path
// could have shown lrosink (its bind was killed and none of its deliveries
// reached lrosink: no list API to find it by), the intent is unbound and
// alerted. It reports whether the operation's usual checks apply (it is in
// the ledger).
func (r *runner) checkSubmission(ctx context.Context, p plan) bool {
	s := p.sub
	fi := &r.rep.Submissions
	if s.name == "" {
		r.violate("intent %s (%s): its submission never created an operation", s.key, p.kind)
		return false
	}
	in, err := r.b.Ledger.GetIntent(ctx, s.key)
	if err != nil {
		r.violate("intent %s (%s, %s): not in the ledger: %v", s.key, p.kind, p.name, err)
		return false
	}
	id, _ := opname.DocID(opname.KeyPrefix + p.name)
	op, opErr := r.b.Ledger.GetOperation(ctx, id)
	r.reads.Add(2)
	if !in.Bound() {
		alerted := r.stats.intentAlerted(s.key)
		switch {
		case opErr == nil:
			r.violate("intent %s: unbound at the end though its operation %s is in the ledger (recorded by %s)", s.key, p.name, firstSource(op))
		case p.kind == opname.KindBatch:
			r.violate("batch %s, created for intent %s, has no ledger entry after the grace (adoption lists batches)", p.name, s.key)
		case s.accepted.Load() > 0:
			r.violate("%s, created for intent %s, has no ledger entry though lrosink accepted %d of its deliveries", p.name, s.key, s.accepted.Load())
		case !alerted:
			r.violate("intent %s (%s) is unbound past its grace but was never alerted (intent-unbound)", s.key, p.kind)
		default:
			fi.UnboundAlerted++
		}
		return false
	}
	fi.Bound++
	fi.BoundBy[in.BoundBy]++
	if in.Name != p.name {
		r.violate("intent %s is bound to %s, but Gemini created %s for it", s.key, in.Name, p.name)
	}
	if !sameJSON(in.Metadata, s.meta) {
		r.violate("intent %s: its metadata was not kept exactly", s.key)
	}
	if opErr != nil {
		r.violate("intent %s is bound to %s, which has no ledger entry: %v", s.key, p.name, opErr)
		return false
	}
	if op.Intent != s.key {
		r.violate("%s: the operation names intent %q, want %s", p.name, op.Intent, s.key)
	}
	if !sameJSON(op.UserMetadata, s.meta) {
		r.violate("%s: the caller's metadata is not exact on the bound operation", p.name)
	} else {
		fi.MetadataExact++
	}
	return true
}

func firstSource(op ledger.Operation) string {
	if len(op.History) == 0 {
		return "unknown"
	}
	return op.History[0].Source
}

// checkCreates: exactly one Gemini create per key (the simulator never
// forces), counted at the fake: every create request names its intent in
// webhook_config.user_metadata, and the fake's own tally of creates
// matches the submissions.
func (r *runner) checkCreates() {
	perKey := map[string]int{}
	for _, q := range r.fake.Requests() {
		if q.Method != "POST" || !(strings.HasSuffix(q.Path, ":batchGenerateContent") || strings.HasSuffix(q.Path, ":predictLongRunning") ||
			strings.HasSuffix(q.Path, "/interactions")) {
			continue
		}
		perKey[createKey(q.Body)]++
	}
	want := 0
	for _, p := range r.plans {
		if p.sub == nil {
			continue
		}
		want++
		if n := perKey[p.sub.key]; n != 1 {
			r.violate("intent %s: %d Gemini creates, want exactly 1", p.sub.key, n)
		}
		delete(perKey, p.sub.key)
	}
	for k, n := range perKey {
		r.violate("%d Gemini creates naming intent %q, which no submission used", n, k)
	}
	got := r.fake.Creates("batch") + r.fake.Creates("video") + r.fake.Creates("interaction")
	r.rep.Submissions.Creates = got
	if got != want {
		r.violate("the fake made %d creates for %d submissions", got, want)
	}
}

// createKey is the intent key a create request's webhook_config names.
func createKey(body []byte) string {
	var b struct {
		Batch struct {
			Webhook struct {
				Meta map[string]any `json:"user_metadata"`
			} `json:"webhook_config"`
		} `json:"batch"`
		Webhook struct {
			Meta map[string]any `json:"user_metadata"`
		} `json:"webhook_config"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return ""
	}
	if k := event.IntentOf(b.Batch.Webhook.Meta); k != "" {
		return k
	}
	return event.IntentOf(b.Webhook.Meta)
}
