package deploy_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/shard"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// The log-based metrics (terraform/monitoring.tf) count lines the code
// writes; a filter that matches no real line counts nothing, and one that
// matches the wrong lines pages for nothing. This test runs the door, the
// reconciler and the Webhook handler with the production JSON logger,
// captures the lines of each scenario, and evaluates every metric filter on
// them as Cloud Logging would (a Cloud Run stdout JSON line becomes
// jsonPayload; its severity field the entry's severity).

// metricScenarios: for each metric (resource name), the scenarios whose
// lines it must count. Every Cloud Run metric needs an entry.
var metricScenarios = map[string][]string{
	"ingest_dropped":        {"dropped"},
	"ingest_duplicates":     {"duplicate"},
	"reconcile_completions": {"reconcile-completed"},
	"claims_recovered":      {"recovered", "recovered-lease-expired"},
	"stuck_operations":      {"stuck"},
	"unbound_intents":       {"intent-unbound"},
	"publish_failures":      {"publish-failed"},
	"webhook_unauthorized":  {"unauthorized"},
	"webhook_disabled":      {"webhook-disabled"},
	"webhook_5xx":           {"webhook-5xx"},
	"claim_missing":         {"claim-missing"},
	"reconcile_passes":      {"reconcile-pass"},
	"reconcile_lateness":    {"reconcile-pass"},
}

// metricNotScenarios: scenarios whose lines a metric must NOT count. The
// publish-failure alert must not fire for a missing claim (whose error says
// "lrosink replay republishes it") nor for a DONE commit that failed after
// a publish that worked.
var metricNotScenarios = map[string][]string{
	"publish_failures":      {"claim-missing", "done-commit-failed", "completed", "recovered", "recovered-lease-expired"},
	"reconcile_completions": {"completed"},
	"webhook_unauthorized":  {"completed", "bad-envelope", "webhook-5xx"},
	// An instance that is stopping answers 503 at every rollout: retried
	// onto a live one, not a failing delivery.
	"webhook_5xx":   {"webhook-stopping", "unauthorized", "bad-envelope"},
	"claim_missing": {"publish-failed"},
}

// logEntry is a captured line as Cloud Logging stores it.
type logEntry struct {
	service  string // resource.labels.service_name
	severity string
	payload  map[string]any
	raw      string
}

// The alert conditions on Pub/Sub's own metrics of the fan-out push
// subscription are checked against the answers the Reconcile handler
// gives shard pushes (checkPubSubAlertFilters).
func TestLogMetricFiltersMatchTheCodesLines(t *testing.T) {
	c := loadConfig(t)
	prefix := c.eval.vars["name_prefix"].AsString()
	lines := generateLines(t, prefix)
	metrics := logMetrics(c.eval)
	for name, m := range metrics {
		filter, ok := m.str(nil, "filter")
		if !ok {
			t.Errorf("%s: filter cannot be evaluated", m)
			continue
		}
		conds, err := parseFilter(filter)
		if err != nil {
			t.Errorf("%s: %v", m, err)
			continue
		}
		if rt := condValue(conds, "resource.type"); rt != "cloud_run_revision" {
			// Not a line lrosink writes (e.g. Cloud Scheduler's own logs).
			continue
		}
		want, ok := metricScenarios[name]
		if !ok {
			t.Errorf("%s: no scenario in metricScenarios generates the lines it counts: add one", m)
			continue
		}
		for _, sc := range want {
			if len(lines[sc]) == 0 {
				t.Fatalf("scenario %s logged nothing", sc)
			}
			n, err := countMatches(conds, lines[sc])
			if err != nil {
				t.Errorf("%s: %v", m, err)
			} else if n == 0 {
				t.Errorf("%s: filter\n  %s\nmatches none of the lines of scenario %q:\n%s", m, filter, sc, rawLines(lines[sc]))
			}
			checkValueExtractor(t, m, conds, lines[sc])
		}
		for _, sc := range metricNotScenarios[name] {
			n, err := countMatches(conds, lines[sc])
			if err != nil {
				t.Errorf("%s: %v", m, err)
			} else if n > 0 {
				t.Errorf("%s: filter\n  %s\nmatches %d line(s) of scenario %q, which it must not count:\n%s", m, filter, n, sc, rawLines(lines[sc]))
			}
		}
	}
	for name := range metricScenarios {
		if _, ok := metrics[name]; !ok {
			t.Errorf("metricScenarios names the log metric %s, which is not declared", name)
		}
	}
	checkPubSubAlertFilters(t, c, generatePushAnswers(t))
}

// logMetrics are the google_logging_metric instances by their key in
// local.log_metrics (monitoring.tf).
func logMetrics(e *evaluator) map[string]instance {
	out := map[string]instance{}
	for _, m := range e.ofType("google_logging_metric") {
		key := m.key
		if key == "" {
			key = m.Labels[1]
		}
		out[key] = m
	}
	return out
}

// The reason label of lrosink_claims_recovered is described by the values
// the door writes there: a value the description does not name leaves an
// operator reading a chart guessing.
func TestClaimsRecoveredReasonsAreDescribed(t *testing.T) {
	c := loadConfig(t)
	lines := generateLines(t, c.eval.vars["name_prefix"].AsString())
	var desc string
	if m, ok := logMetrics(c.eval)["claims_recovered"]; ok {
		for _, l := range dynBlocks(bodyOf(child(m.Body, "metric_descriptor")), "labels", m.ctx) {
			if k, _ := evalString(attr(l.body, "key"), l.ctx); k == "reason" {
				desc, _ = evalString(attr(l.body, "description"), l.ctx)
			}
		}
	}
	if desc == "" {
		t.Fatal("google_logging_metric.claims_recovered: no description of its reason label")
	}
	seen := 0
	for _, sc := range metricScenarios["claims_recovered"] {
		for _, e := range lines[sc] {
			if e.payload["outcome"] != "recovered" {
				continue
			}
			seen++
			if r, _ := e.payload["reason"].(string); !strings.Contains(desc, r) {
				t.Errorf("claims_recovered: reason %q (scenario %s) is not named in the label's description %q", r, sc, desc)
			}
		}
	}
	if seen < 2 {
		t.Errorf("claims_recovered: %d recovered lines in its scenarios; want one per reason", seen)
	}
}

// checkValueExtractor: a distribution metric's value_extractor
// (EXTRACT(jsonPayload.FIELD)) reads a number from every line its filter
// counts; a renamed or missing field would make it record nothing.
func checkValueExtractor(t *testing.T, m instance, conds []cond, es []logEntry) {
	t.Helper()
	ve, ok := m.str(nil, "value_extractor")
	if !ok {
		return
	}
	field, found := strings.CutPrefix(strings.TrimSuffix(ve, ")"), "EXTRACT(jsonPayload.")
	if !found || strings.Contains(field, ".") {
		t.Errorf("%s: value_extractor %q: want EXTRACT(jsonPayload.FIELD)", m, ve)
		return
	}
	for _, e := range es {
		if ok, _ := matches(conds, e); !ok {
			continue
		}
		if _, isNum := e.payload[field].(float64); !isNum {
			t.Errorf("%s: value_extractor %s: the line it counts has no number %q:\n  %s", m, ve, field, e.raw)
		}
	}
}

func rawLines(es []logEntry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "  [%s] %s\n", e.service, e.raw)
	}
	return b.String()
}

// cond is one `field op value` term of a Logging query.
type cond struct{ field, op, value string }

var condRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.]*)\s*(=~|!~|!=|>=|<=|=|:|>|<)\s*(.+)$`)

// parseFilter reads the subset of the Logging query language the metrics
// use: terms joined by AND. Anything else is an error, so a filter this
// test cannot judge fails instead of passing unchecked.
func parseFilter(f string) ([]cond, error) {
	var out []cond
	for _, term := range strings.Split(f, " AND ") {
		term = strings.TrimSpace(term)
		if strings.Contains(term, " OR ") || strings.HasPrefix(term, "NOT ") || strings.HasPrefix(term, "(") {
			return nil, fmt.Errorf("filter term %q: only AND-joined comparisons are understood here", term)
		}
		m := condRE.FindStringSubmatch(term)
		if m == nil {
			return nil, fmt.Errorf("filter term %q: not a comparison this test understands (e.g. log_id(), which no line lrosink writes answers)", term)
		}
		v := m[3]
		if strings.HasPrefix(v, `"`) {
			u, err := strconv.Unquote(v)
			if err != nil {
				return nil, fmt.Errorf("filter term %q: %v", term, err)
			}
			v = u
		}
		out = append(out, cond{m[1], m[2], v})
	}
	return out, nil
}

func condValue(cs []cond, field string) string {
	for _, c := range cs {
		if c.field == field && c.op == "=" {
			return c.value
		}
	}
	return ""
}

var severities = []string{"DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY"}

func countMatches(cs []cond, es []logEntry) (int, error) {
	n := 0
	for _, e := range es {
		ok, err := matches(cs, e)
		if err != nil {
			return 0, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

func matches(cs []cond, e logEntry) (bool, error) {
	for _, c := range cs {
		var got string
		var present bool
		switch {
		case c.field == "resource.type":
			got, present = "cloud_run_revision", true
		case c.field == "resource.labels.service_name":
			got, present = e.service, true
		case c.field == "severity":
			got, present = e.severity, true
		case strings.HasPrefix(c.field, "jsonPayload."):
			var v any = e.payload
			present = true
			for _, p := range strings.Split(strings.TrimPrefix(c.field, "jsonPayload."), ".") {
				m, ok := v.(map[string]any)
				if !ok {
					present = false
					break
				}
				if v, ok = m[p]; !ok {
					present = false
					break
				}
			}
			if present {
				got = fmt.Sprint(v)
			}
		default:
			return false, fmt.Errorf("field %s: no line lrosink writes has it", c.field)
		}
		if !present {
			return false, nil
		}
		ok, err := compare(c, got)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func compare(c cond, got string) (bool, error) {
	switch c.op {
	case "=":
		return got == c.value, nil
	case "!=":
		return got != c.value, nil
	case ":":
		return strings.Contains(strings.ToLower(got), strings.ToLower(c.value)), nil
	case "=~", "!~":
		re, err := regexp.Compile(c.value)
		if err != nil {
			return false, fmt.Errorf("%s %s: %v", c.field, c.op, err)
		}
		return re.MatchString(got) == (c.op == "=~"), nil
	case ">=", "<=", ">", "<":
		var a, b int
		if c.field == "severity" {
			a, b = slices.Index(severities, got), slices.Index(severities, c.value)
			if b < 0 {
				return false, fmt.Errorf("severity %q unknown", c.value)
			}
		} else {
			x, err1 := strconv.ParseFloat(got, 64)
			y, err2 := strconv.ParseFloat(c.value, 64)
			if err1 != nil || err2 != nil {
				return false, nil
			}
			a, b = int(x), int(y)
		}
		switch c.op {
		case ">=":
			return a >= b, nil
		case "<=":
			return a <= b, nil
		case ">":
			return a > b, nil
		default:
			return a < b, nil
		}
	}
	return false, fmt.Errorf("operator %s not understood", c.op)
}

// switchWriter sends the log to the current scenario's buffer (setup steps
// write to io.Discard).
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *switchWriter) to(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w = w
}

// faultySink fails every publish while fail is set.
type faultySink struct {
	mu   sync.Mutex
	fail bool
}

func (s *faultySink) Publish(ctx context.Context, m results.Message) error {
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail {
		return errors.New("rpc error: code = Unavailable desc = the topic is unreachable")
	}
	return nil
}

func (s *faultySink) set(fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = fail
}

// lossyStore is the memory ledger with two faults: claims that are gone
// (deleted out of band) and DONE commits that fail.
type lossyStore struct {
	*claims.Ledger
	mu           sync.Mutex
	lost         map[string]bool
	failComplete bool
	failQueries  bool // a pass's due and stuck queries fail
}

func (s *lossyStore) queriesFail() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failQueries {
		return errors.New("rpc error: code = Unavailable desc = firestore unreachable")
	}
	return nil
}

func (s *lossyStore) DueOperations(ctx context.Context, rg shard.Range, now time.Time, after ledger.DueCursor, limit int) ([]ledger.Operation, error) {
	if err := s.queriesFail(); err != nil {
		return nil, err
	}
	return s.Ledger.DueOperations(ctx, rg, now, after, limit)
}

func (s *lossyStore) StuckOperations(ctx context.Context, rg shard.Range, cutoff time.Time, limit int) ([]ledger.Operation, error) {
	if err := s.queriesFail(); err != nil {
		return nil, err
	}
	return s.Ledger.StuckOperations(ctx, rg, cutoff, limit)
}

func (s *lossyStore) GetClaim(ctx context.Context, id string) (ledger.Claim, error) {
	s.mu.Lock()
	lost := s.lost[id]
	s.mu.Unlock()
	if lost {
		return ledger.Claim{}, ledger.ErrNotFound
	}
	return s.Ledger.GetClaim(ctx, id)
}

func (s *lossyStore) CompleteClaim(ctx context.Context, l ledger.Lease, now time.Time) error {
	s.mu.Lock()
	fail := s.failComplete
	s.mu.Unlock()
	if fail {
		return errors.New("rpc error: code = Unavailable desc = firestore unreachable")
	}
	return s.Ledger.CompleteClaim(ctx, l, now)
}

// disabledHooks is the project webhook list as Gemini reports it with one
// webhook disabled.
type disabledHooks struct{}

func (disabledHooks) ListWebhooks(context.Context) ([]event.Webhook, error) {
	return []event.Webhook{{ID: "wh_1", Name: "webhooks/wh_1", URI: "https://example.invalid/", State: "disabled", Disabled: true}}, nil
}

// generateLines runs each scenario and returns its lines by scenario name.
func generateLines(t *testing.T, prefix string) map[string][]logEntry {
	t.Helper()
	ctx := t.Context()
	sw := &switchWriter{w: io.Discard}
	log := logging.New(sw, slog.LevelInfo, "p")
	clock := testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	store := &lossyStore{Ledger: claims.New(memledger.New()), lost: map[string]bool{}}
	sink := &faultySink{}
	door, err := ingest.New(ingest.Config{Store: store, Sink: sink, Log: log, Now: clock.Now,
		Lease: 10 * time.Minute, ClaimTTL: 30 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]logEntry{}
	tDone := time.Date(2026, 11, 21, 11, 30, 0, 0, time.UTC)
	ev := func(name string, st lifecycle.State, src event.Source) event.Event {
		return event.Event{Name: name, State: st, UpdateTime: tDone, Source: src}
	}
	ingestStep := func(e event.Event) { _, _ = door.Ingest(ctx, e) }
	// run captures what step logs as scenario name, from the given service.
	run := func(name, service string, step func()) {
		var buf bytes.Buffer
		sw.to(&buf)
		step()
		sw.to(io.Discard)
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if l == "" {
				continue
			}
			var p map[string]any
			if err := json.Unmarshal([]byte(l), &p); err != nil {
				t.Fatalf("scenario %s: a log line is not JSON: %q", name, l)
			}
			sev, _ := p["severity"].(string)
			out[name] = append(out[name], logEntry{service: prefix + "-" + service, severity: sev, payload: p, raw: l})
		}
	}

	run("completed", "webhook", func() { ingestStep(ev("batches/a", lifecycle.Succeeded, event.SourceWebhook)) })
	run("duplicate", "webhook", func() { ingestStep(ev("batches/a", lifecycle.Succeeded, event.SourceWebhook)) })
	run("dropped", "webhook", func() { ingestStep(ev("batches/a", lifecycle.Running, event.SourceWebhook)) })
	run("reconcile-completed", "reconcile", func() { ingestStep(ev("batches/b", lifecycle.Failed, event.SourceReconcile)) })

	sink.set(true)
	run("publish-failed", "webhook", func() { ingestStep(ev("batches/c", lifecycle.Succeeded, event.SourceWebhook)) })
	sink.set(false)
	run("recovered", "webhook", func() { ingestStep(ev("batches/c", lifecycle.Succeeded, event.SourceWebhook)) })

	// Released by a failed publish, then its claim is lost.
	sink.set(true)
	ingestStep(ev("batches/d", lifecycle.Succeeded, event.SourceWebhook))
	sink.set(false)
	store.mu.Lock()
	store.lost["gemini:batches%2Fd"] = true
	store.mu.Unlock()
	run("claim-missing", "webhook", func() { ingestStep(ev("batches/d", lifecycle.Succeeded, event.SourceWebhook)) })

	store.mu.Lock()
	store.failComplete = true
	store.mu.Unlock()
	run("done-commit-failed", "webhook", func() { ingestStep(ev("batches/e", lifecycle.Succeeded, event.SourceWebhook)) })
	store.mu.Lock()
	store.failComplete = false
	store.mu.Unlock()
	// The claim the failed DONE commit left held is seized once its lease
	// has run out.
	clock.Advance(11 * time.Minute)
	run("recovered-lease-expired", "webhook", func() { ingestStep(ev("batches/e", lifecycle.Succeeded, event.SourceWebhook)) })

	// A registered operation pending for longer than StuckAfter, and a
	// project webhook Gemini reports disabled: one pass logs both alerts
	// and its summary line.
	ingestStep(event.Event{Name: "batches/f", State: lifecycle.Pending, Source: event.SourceRegister})
	// And an intent no operation was bound to (its create's answer and
	// deliveries lost): the same pass alerts it past its grace.
	if _, err := store.Apply(ctx, ledger.PutIntent(ledger.Intent{Key: "orphan", Kind: "video", Model: "models/veo", CreatedAt: clock.Now()})); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Hour)
	rec, err := reconcile.New(reconcile.Config{Ledger: store, Door: door, Log: log, Now: clock.Now,
		StuckAfter: time.Hour, IntentGrace: time.Hour, Webhooks: disabledHooks{}})
	if err != nil {
		t.Fatal(err)
	}
	run("reconcile", "reconcile", func() {
		if _, err := rec.Pass(ctx); err != nil {
			t.Errorf("reconcile pass: %v", err)
		}
	})
	for _, e := range out["reconcile"] {
		switch {
		case e.payload["alert"] == "stuck":
			out["stuck"] = append(out["stuck"], e)
		case e.payload["alert"] == "intent-unbound":
			out["intent-unbound"] = append(out["intent-unbound"], e)
		case e.payload["alert"] == "webhook-disabled":
			out["webhook-disabled"] = append(out["webhook-disabled"], e)
		case e.payload["message"] == "reconcile pass":
			out["reconcile-pass"] = append(out["reconcile-pass"], e)
		}
	}

	// The Webhook function over real HTTP: a delivery signed with a secret
	// it does not know is refused 401; a body that is no envelope, 400.
	secret := webhooktest.NewSecret()
	v, err := webhook.NewVerifier(webhook.Config{Secrets: []string{secret}, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.Webhook(door, v, log, 1<<20))
	defer srv.Close()
	post := func(body []byte, secret string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = webhooktest.Headers("msg_1", time.Now(), body, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	body := []byte(`{"type":"batch.succeeded","data":{"id":"batches/g"}}`)
	run("unauthorized", "webhook", func() { post(body, webhooktest.NewSecret()) })
	run("bad-envelope", "webhook", func() { post([]byte(`{"not":"an envelope"}`), secret) })
	// A signed delivery whose results message cannot be published: 503,
	// and Gemini retries it.
	sink.set(true)
	run("webhook-5xx", "webhook", func() { post([]byte(`{"type":"batch.succeeded","data":{"id":"batches/h"}}`), secret) })
	sink.set(false)
	// An instance that is stopping takes no new work: 503 stopping. Last,
	// the door takes nothing after it.
	door.StopTaking()
	run("webhook-stopping", "webhook", func() { post([]byte(`{"type":"batch.succeeded","data":{"id":"batches/i"}}`), secret) })
	for _, sc := range []string{"webhook-5xx", "webhook-stopping"} {
		answered := false
		for _, e := range out[sc] {
			answered = answered || e.payload["message"] == "webhook answer" && e.payload["status"] == float64(http.StatusServiceUnavailable)
		}
		if !answered {
			t.Fatalf("scenario %s: no webhook answer 503:\n%s", sc, rawLines(out[sc]))
		}
	}
	return out
}

// generatePushAnswers runs the Reconcile function with shard passes over
// real HTTP, as the fan-out push subscription calls it, and returns the
// status it answers in each scenario: a shard request it runs, a message
// that is no shard request, and a pass whose ledger query fails.
func generatePushAnswers(t *testing.T) map[string]int {
	t.Helper()
	ctx := t.Context()
	log := logging.New(io.Discard, slog.LevelInfo, "p")
	clock := testutil.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	store := &lossyStore{Ledger: claims.New(memledger.New()), lost: map[string]bool{}}
	door, err := ingest.New(ingest.Config{Store: store, Sink: &faultySink{}, Log: log, Now: clock.Now,
		Lease: 10 * time.Minute, ClaimTTL: 30 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(reconcile.Config{Ledger: store, Door: door, Log: log, Now: clock.Now, StuckAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.Reconcile(rec, log, time.Minute, nil, httpapi.WithShardPasses(rec)))
	defer srv.Close()
	push := func(data string) int {
		env, err := json.Marshal(map[string]any{
			"message":      map[string]any{"data": base64.StdEncoding.EncodeToString([]byte(data)), "messageId": "42"},
			"subscription": "projects/p/subscriptions/lrosink-reconcile-fanout-push",
		})
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(env))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	out := map[string]int{}
	out["shard-pass"] = push(`{"range":"0-64"}`)
	out["shard-not-a-request"] = push(`{"range":"oops"}`)
	store.mu.Lock()
	store.failQueries = true
	store.mu.Unlock()
	out["shard-ledger-down"] = push(`{"range":"0-64"}`)
	return out
}

// pubsubMetrics are the Pub/Sub subscription metrics an alert may use,
// with the labels a filter may name: push_request_count by response_class
// ("ack" for a 2xx answer; https://cloud.google.com/pubsub/docs/push-troubleshooting)
// and response_code; dead_letter_message_count, the messages forwarded to
// the dead-letter topic (https://cloud.google.com/pubsub/docs/monitoring).
var pubsubMetrics = map[string][]string{
	"pubsub.googleapis.com/subscription/push_request_count":        {"response_class", "response_code"},
	"pubsub.googleapis.com/subscription/dead_letter_message_count": {},
}

// responseClass is the push_request_count class of an HTTP answer (the
// troubleshooting page above): Pub/Sub acknowledges a push answered 102,
// 200, 201, 202 or 204.
func responseClass(status int) string {
	switch {
	case slices.Contains([]int{102, 200, 201, 202, 204}, status):
		return "ack"
	case status >= 500:
		return "remote_server_5xx"
	default:
		return "remote_server_4xx"
	}
}

// checkPubSubAlertFilters: every alert condition on a Pub/Sub metric
// watches a push subscription that delivers to a Cloud Run service of this
// configuration, names only labels the metric has, and (push errors)
// counts the answers of the scenarios that fail and not the one that
// runs; the fan-out subscription has both a dead-letter and a push-error
// condition.
func checkPubSubAlertFilters(t *testing.T, c *config, answers map[string]int) {
	t.Helper()
	if answers["shard-pass"] != http.StatusOK || answers["shard-not-a-request"] != http.StatusBadRequest || answers["shard-ledger-down"] != http.StatusServiceUnavailable {
		t.Fatalf("shard push answers %v: want 200, 400, 503", answers)
	}
	pushSubs := map[string]string{} // subscription name -> address
	for _, s := range c.eval.ofType("google_pubsub_subscription") {
		if ep, _ := s.str(bodyOf(child(s.Body, "push_config")), "push_endpoint"); strings.HasPrefix(ep, "google_cloud_run_v2_service.") {
			name, _ := s.str(nil, "name")
			pushSubs[name] = s.addr()
			if child(s.Body, "dead_letter_policy") == nil {
				t.Errorf("%s: no dead_letter_policy: its dead-letter count stays 0", s)
			}
		}
	}
	if len(pushSubs) == 0 {
		t.Fatal("no push subscription delivers to a Cloud Run service")
	}
	watched := map[string]map[string]bool{} // subscription -> metric types
	for _, p := range alertPolicies(c) {
		for _, cb := range children(p.Body, "conditions") {
			f, _ := p.str(bodyOf(child(cb.Body, "condition_threshold")), "filter")
			conds, err := parseFilter(f)
			if err != nil || !strings.HasPrefix(condValue(conds, "metric.type"), "pubsub.googleapis.com/") {
				continue
			}
			metric := condValue(conds, "metric.type")
			labels, known := pubsubMetrics[metric]
			if !known {
				t.Errorf("%s: %s is not among the Pub/Sub metrics this test knows (pubsubMetrics): add it with its source", p, metric)
				continue
			}
			if rt := condValue(conds, "resource.type"); rt != "pubsub_subscription" {
				t.Errorf("%s: %s on resource.type %q, want pubsub_subscription", p, metric, rt)
			}
			sub := resolveName(c.eval, condValue(conds, "resource.labels.subscription_id"))
			if _, ok := pushSubs[sub]; !ok {
				t.Errorf("%s: %s on subscription %q, which is no push subscription to a service here (%v)", p, metric, sub, slices.Sorted(maps.Keys(pushSubs)))
				continue
			}
			if watched[sub] == nil {
				watched[sub] = map[string]bool{}
			}
			watched[sub][metric] = true
			var labelConds []cond
			for _, x := range conds {
				if l, ok := strings.CutPrefix(x.field, "metric.labels."); ok {
					if !slices.Contains(labels, l) {
						t.Errorf("%s: %s has no label %q", p, metric, l)
					}
					labelConds = append(labelConds, x)
				}
			}
			if !strings.HasSuffix(metric, "/push_request_count") {
				continue
			}
			for sc, status := range answers {
				series := map[string]string{"metric.labels.response_class": responseClass(status), "metric.labels.response_code": fmt.Sprint(status)}
				counted := true
				for _, x := range labelConds {
					ok, err := compare(x, series[x.field])
					if err != nil {
						t.Fatalf("%s: %v", p, err)
					}
					counted = counted && ok
				}
				if want := status >= 300; counted != want {
					t.Errorf("%s: filter\n  %s\ncounts the push answered %d (scenario %s): %v, want %v", p, f, status, sc, counted, want)
				}
			}
		}
	}
	for sub, addr := range pushSubs {
		for metric := range pubsubMetrics {
			if !watched[sub][metric] {
				t.Errorf("%s (%s): no alert condition on %s", addr, sub, metric)
			}
		}
	}
}
