package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

const videoModel = "veo-3.0-generate-001"

// setGemini makes the fake API answer step s for plan p.
func (r *runner) setGemini(p plan, s step) {
	at := s.at
	switch p.kind {
	case opname.KindBatch:
		b := fakegemini.BatchState{State: "BATCH_STATE_" + string(s.state), UpdateTime: at, CreateTime: p.submit,
			ResponsesFile: map[bool]string{true: "files/out-" + p.id}[s.state == lifecycle.Succeeded]}
		if s.state.Terminal() {
			b.Stats = p.stats
		}
		if s.state == lifecycle.Failed {
			b.ErrorCode, b.ErrorMessage = wantError[p.kind].Code, wantError[p.kind].Message
		}
		if cur, ok := r.fake.Batch(p.id); ok && p.sub != nil {
			// What its create made stays: the webhook config, the model, the
			// display name, the create time.
			b.Webhook, b.Model, b.DisplayName, b.CreateTime, b.InputRequests = cur.Webhook, cur.Model, cur.DisplayName, cur.CreateTime, cur.InputRequests
		}
		r.fake.SetBatch(p.id, b)
	case opname.KindInteraction:
		st := map[lifecycle.State]string{lifecycle.Pending: "queued", lifecycle.Running: "in_progress", lifecycle.RequiresAction: "requires_action",
			lifecycle.Succeeded: "completed", lifecycle.Failed: "failed", lifecycle.Cancelled: "cancelled"}[s.state]
		if s.raw != "" {
			st = s.raw
		}
		it := fakegemini.InteractionState{Status: st, Created: p.submit, Updated: at}
		if s.state == lifecycle.Failed {
			// The Interactions API's code is a string.
			it.ErrorCode, it.ErrorMessage = strconv.Itoa(wantError[p.kind].Code), wantError[p.kind].Message
		}
		if cur, ok := r.fake.Interaction(p.id); ok && p.sub != nil {
			it.Webhook, it.Model, it.Agent, it.Created = cur.Webhook, cur.Model, cur.Agent, cur.Created
		}
		r.fake.SetInteraction(p.id, it)
	case opname.KindVideo:
		v := fakegemini.VideoState{Done: s.state.Terminal()}
		switch {
		case s.state == lifecycle.Failed && p.errorObject:
			// A google.rpc.Status with what a tolerant reader must skip.
			v.Error = map[string]any{"code": wantError[p.kind].Code, "message": wantError[p.kind].Message, "status": "INTERNAL",
				"details": []any{map[string]any{"@type": "type.googleapis.com/google.rpc.DebugInfo"}}}
		case s.state == lifecycle.Failed:
			v.ErrorCode, v.ErrorMessage = wantError[p.kind].Code, wantError[p.kind].Message
		case s.state == lifecycle.Succeeded:
			v.VideoURIs = []string{"gs://videos/" + p.id + ".mp4"}
		}
		if cur, ok := r.fake.Video(videoModel, p.id); ok && p.sub != nil {
			v.Webhook, v.Prompt = cur.Webhook, cur.Prompt
		}
		r.fake.SetVideo(videoModel, p.id, v)
	}
}

// wantError is the failure Gemini reports for a failed operation of each
// kind, whichever way it arrives: every FAILED message carries it.
var wantError = map[opname.Kind]results.ErrorInfo{
	opname.KindBatch:       {Code: 3, Message: "invalid request"},
	opname.KindInteraction: {Code: 3, Message: "invalid request"},
	opname.KindVideo:       {Code: 13, Message: "generation failed"},
}

// metadata is what plan p's submitter registers (trimmed: without the
// oversize value) or a webhook for it carries (from "hook", with the
// delivery id): {"sim": id}, plus for the fault arrays inside arrays and
// reserved and empty keys, and a value over the bound.
func (r *runner) metadata(p plan, trimmed bool, from, deliveryID string) map[string]any {
	m := map[string]any{"sim": p.label}
	if !p.hardMeta {
		return m
	}
	m["nested"] = []any{[]any{1.0, 2.0}, []any{[]any{}}}
	m["__name__"], m["__x__"], m[""] = p.label, map[string]any{"__y__": []any{[]any{nil}}}, "empty key"
	if from == "hook" {
		m["hook"] = []any{[]any{deliveryID}}
	}
	if p.bigMeta && !trimmed {
		m["big"] = strings.Repeat("x", ledger.MaxMetadataBytes)
	}
	return m
}

// registerOnce POSTs plan p's registration to the Register function. A
// registration refused for its metadata is retried without the oversize
// value, as a submitter fixing its request would.
func (r *runner) registerOnce(ctx context.Context, p plan, trimmed bool) (registered, trim bool) {
	body, _ := json.Marshal(httpapi.RegisterRequest{Name: registerName(p), Kind: string(p.kind), Metadata: r.metadata(p, trimmed, "register", "")})
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/Register", bytes.NewReader(body))
	w := httptest.NewRecorder()
	r.register.ServeHTTP(w, req)
	var a httpapi.Answer
	_ = json.Unmarshal(w.Body.Bytes(), &a)
	if w.Code == http.StatusBadRequest && a.Reason == "invalid-metadata" {
		r.counts.RegisterRefused.Add(1)
		return false, true
	}
	return w.Code/100 == 2, trimmed
}

// registerName is what the submitter registers: the full API name.
func registerName(p plan) string {
	if p.kind == opname.KindVideo {
		return "models/" + videoModel + "/operations/" + p.id
	}
	return p.name
}

// payloadID varies the id forms a webhook carries, to exercise the one
// normalization (bare ids, prefixed ids, full video names).
func payloadID(p plan, n int) string {
	switch {
	case p.kind == opname.KindVideo && n%2 == 0:
		return "models/" + videoModel + "/operations/" + p.id
	case n%3 == 0:
		return p.name
	default:
		return p.id
	}
}

func (r *runner) loop(ctx context.Context) {
	sort.SliceStable(r.queue, func(i, j int) bool { return r.queue[i].at.Before(r.queue[j].at) })
	applied := make([]int, len(r.plans))
	registered := make([]bool, len(r.plans))
	trimmed := make([]bool, len(r.plans)) // registration refused once: retried without the oversize value
	end := r.t0.Add(r.o.Horizon)
	nextPass := r.t0.Add(r.o.ReconcileEvery)
	steps := int(r.o.Horizon / r.o.Step)
	obs := rand.New(rand.NewPCG(uint64(r.o.Seed), 0x0b5))
	outFrom, outTo := r.o.outage(r.t0)
	hookDisabled := false
	for i, now := 0, r.t0; now.Before(end) && ctx.Err() == nil; i, now = i+1, now.Add(r.o.Step) {
		r.clock.Set(now)
		// Gemini disables the project webhook for WebhookOutage, then it
		// is enabled again; meanwhile nothing is delivered.
		outage := r.o.WebhookOutage > 0 && !now.Before(outFrom) && now.Before(outTo)
		if outage != hookDisabled {
			hookDisabled = outage
			state := fakegemini.WebhookEnabled
			if outage {
				state, r.rep.Outage.From = fakegemini.WebhookDisabledDueToFailedDeliveries, now
			} else {
				r.rep.Outage.To = now
			}
			r.fake.SetWebhookState(r.hookID, state)
		}
		// Gemini moves on.
		for pi, p := range r.plans {
			if p.sub != nil && p.sub.name == "" {
				continue // not created yet: its create makes it PENDING
			}
			if p.sub == nil && !registered[pi] && !p.submit.After(now) {
				r.setGemini(p, step{at: p.submit, state: lifecycle.Pending})
			}
			for applied[pi] < len(p.steps) && !p.steps[applied[pi]].at.After(now) {
				r.setGemini(p, p.steps[applied[pi]])
				applied[pi]++
			}
		}
		// Submitters register what they submitted (retrying failures).
		var wg sync.WaitGroup
		sem := make(chan struct{}, r.o.Concurrency)
		for pi, p := range r.plans {
			if p.sub != nil || registered[pi] || p.submit.After(now) {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				registered[pi], trimmed[pi] = r.registerOnce(ctx, p, trimmed[pi])
			}()
		}
		wg.Wait()
		// And those who submit through lrosink, in order (their creates
		// name the operations).
		if r.submitter != nil {
			r.submitDue(ctx, now)
		}
		// Deliveries due now, in concurrent bursts, with a reconcile pass
		// running at the same time.
		due := r.takeDue(now)
		if outage {
			// A disabled webhook delivers nothing: these are lost for
			// good, only polling can settle their operations.
			r.counts.LostToOutage.Add(int64(len(due)))
			due = nil
		}
		if !now.Before(nextPass) {
			nextPass = nextPass.Add(r.o.ReconcileEvery)
			wg.Add(1)
			go func() { defer wg.Done(); r.pass(ctx) }()
		}
		for _, d := range due {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				r.deliver(ctx, d, now)
			}()
		}
		wg.Wait()
		// Invariant 1 on the way: every read is checked against the last.
		for range 10 {
			r.observe(ctx, r.plans[obs.IntN(len(r.plans))])
		}
		r.progress(i+1, steps)
	}
	if r.o.Progress != nil {
		fmt.Fprintln(r.o.Progress)
	}
}

func (r *runner) takeDue(now time.Time) []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	sort.SliceStable(r.queue, func(i, j int) bool { return r.queue[i].at.Before(r.queue[j].at) })
	n := sort.Search(len(r.queue), func(i int) bool { return r.queue[i].at.After(now) })
	due := append([]delivery(nil), r.queue[:n]...)
	r.queue = r.queue[n:]
	return due
}

// deliver POSTs one signed webhook; a non-2xx answer is retried later, as
// Gemini retries for 24 h with backoff.
func (r *runner) deliver(ctx context.Context, d delivery, now time.Time) {
	p := r.plans[d.op]
	if p.sub != nil && p.sub.name == "" {
		// Not created yet (its first submission created nothing): Gemini
		// has nothing to deliver about; the next minute, again.
		d.at = now.Add(time.Minute)
		r.mu.Lock()
		r.queue = append(r.queue, d)
		r.mu.Unlock()
		return
	}
	data := fmt.Sprintf(`{"id":%q`, payloadID(p, d.attempt+len(d.id)))
	want := wantError[p.kind]
	switch {
	case (d.typ == "video.generated" && p.terminal == lifecycle.Failed || d.typ == "interaction.failed") && p.errorObject:
		// The error object shape; an interaction's code is a string.
		code := strconv.Quote(strconv.Itoa(want.Code))
		if p.kind == opname.KindVideo {
			code = strconv.Itoa(want.Code)
		}
		data += fmt.Sprintf(`,"error":{"code":%s,"message":%q}`, code, want.Message)
	case d.typ == "video.generated" && p.terminal == lifecycle.Failed, strings.HasSuffix(d.typ, ".failed"):
		data += fmt.Sprintf(`,"error_code":%d,"error_message":%q`, want.Code, want.Message)
	case d.typ == "batch.succeeded":
		data += fmt.Sprintf(`,"output_file_uri":"gs://results/%s.jsonl"`, p.id)
	}
	meta, _ := json.Marshal(r.metadata(p, false, "hook", d.id))
	if p.sub != nil {
		// What Gemini echoes: the create's webhook_config.user_metadata.
		meta, _ = json.Marshal(r.echoed(p))
	}
	body := []byte(fmt.Sprintf(`{"type":%q,"version":"v1","timestamp":%q,"data":%s},"user_metadata":%s}`,
		d.typ, d.eventAt.Format(time.RFC3339Nano), data, meta))
	hook := r.hooks[0]
	if r.dice.roll(0.5, "instance", d.id) {
		hook = r.hooks[1]
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header = webhooktest.Headers(d.id, now, body, r.secret)
	start := time.Now()
	resp, err := hook.Client().Do(req)
	r.stats.httpLatency(time.Since(start))
	status := 0
	if err == nil {
		status = resp.StatusCode
		resp.Body.Close()
	}
	r.stats.status(status)
	if status/100 == 2 {
		if p.sub != nil {
			p.sub.accepted.Add(1)
		}
		return
	}
	// Gemini retries: 1, 2, 4, … minutes, capped at an hour.
	d.attempt++
	d.at = now.Add(min(time.Duration(1<<min(d.attempt-1, 6))*time.Minute, time.Hour))
	r.mu.Lock()
	r.queue = append(r.queue, d)
	r.mu.Unlock()
	r.stats.retry()
}

func (r *runner) pass(ctx context.Context) {
	s, err := r.rec.Pass(ctx)
	r.stats.pass(s, err)
}

// observe reads one operation and checks it never went back.
func (r *runner) observe(ctx context.Context, p plan) {
	id, _ := opname.DocID(opname.KeyPrefix + p.name)
	op, err := r.b.Ledger.GetOperation(ctx, id)
	r.reads.Add(1)
	if err != nil {
		return // not registered yet (or a real read error: nothing to compare)
	}
	cur := op.Current()
	r.lastMu.Lock()
	defer r.lastMu.Unlock()
	if prev, ok := r.last[p.name]; ok && lifecycle.Regressed(prev, cur) {
		r.violate("regression: %s went from %s@%s to %s@%s", p.name, prev.State, prev.UpdateTime.Format(time.RFC3339), cur.State, cur.UpdateTime.Format(time.RFC3339))
	}
	r.last[p.name] = cur
}

func (r *runner) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.rep.Violations) < 50 {
		r.rep.Violations = append(r.rep.Violations, fmt.Sprintf(format, args...))
	}
	r.rep.ViolationCount++
}

func (r *runner) progress(done, total int) {
	if r.o.Progress == nil || (done%max(1, total/40) != 0 && done != total) {
		return
	}
	const width = 40
	filled := done * width / total
	r.mu.Lock()
	queued := len(r.queue)
	r.mu.Unlock()
	fmt.Fprintf(r.o.Progress, "\r[%s%s] %3d%%  t=%-8s queued=%d", strings.Repeat("=", filled), strings.Repeat(" ", width-filled),
		done*100/total, (time.Duration(done) * r.o.Step).String(), queued)
}

// drain turns faults off, lets every retry and lease run out, and runs the
// final reconcile passes: whatever the faults left behind must converge.
func (r *runner) drain(ctx context.Context) {
	r.quiet.Store(true)
	for range 8 {
		now := r.clock.Now().Add(r.o.Lease + r.o.ReconcileEvery + 30*time.Minute)
		r.clock.Set(now)
		var wg sync.WaitGroup
		for _, d := range r.takeDue(now) {
			wg.Add(1)
			go func() { defer wg.Done(); r.deliver(ctx, d, now) }()
		}
		wg.Wait()
		r.pass(ctx)
	}
}
