package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// Bounds of one bench run: it always stops by itself.
const (
	benchMaxDuration    = 10 * time.Minute
	benchMaxRequests    = 10_000_000
	benchMaxConcurrency = 10_000
	benchMaxRounds      = 20
	benchRequestTimeout = 30 * time.Second
)

func benchDoc() command.Doc {
	return command.Doc{
		Path: "bench",
		Args: "[--url URL] [--secret S] [--event TYPE] [--concurrency N] [--duration D | --requests N] [--repeat F] [--rate R] [--bare] [--rounds N] [--json]",
		Summary: `Load a webhook endpoint with signed Standard Webhooks deliveries (v1 HMAC, as static
Gemini webhooks are signed) and print what it sustained: deliveries per second, p50/p99/max
latency, HTTP status counts, answer outcomes and the number of distinct ids sent.

Each delivery is an EVENT (--event) about an id of its own (bench_RUN_N, RUN random per run),
except a share --repeat of them, which repeat an id sent earlier in the run (a new
webhook-id each time), as redeliveries and duplicate events do. --concurrency senders send
back to back until --duration has passed or --requests have been sent, whichever comes first
(at most 10m, 10,000,000 deliveries); --rate caps the total rate.

--bare first starts, in this process on a loopback port, a bare handler that only verifies
the HMAC (the same verifier serve uses) and answers 200, runs the same load against it, then
against --url, and prints both and their ratio: the ceiling of this machine and this load
generator, measured in the same run, which says more than absolute figures do. Other work
on the machine still moves it (it slows the CPU-bound bare handler more than a server that
waits on its storage): --rounds N alternates the two loads N times (each --duration long);
the figures are over all rounds, the ratio is the median of the rounds' ratios.

Exit status 0 when every delivery was answered 2xx; 1 when any was not (a status or a
transport error, counted in the report); 2 on a bad flag.`,
		Env: `  LROSINK_WEBHOOK_SECRETS  the first secret signs, when --secret is not given`,
		Examples: []string{
			"lrosink bench --duration 20s --concurrency 50",
			"lrosink bench --bare --concurrency 500 --duration 20s --repeat 0.3",
			"lrosink bench --bare --rounds 5 --duration 5s --json",
			"lrosink bench --url http://127.0.0.1:9000/Webhook --requests 10000 --rate 500 --json",
			"lrosink bench --event video.generated --id-prefix models/veo-3.0-generate-001/operations/bench_",
		},
	}
}

// benchConfig is one bench run's load, the same for the bare handler and
// the target.
type benchConfig struct {
	event       string
	idPrefix    string // "" → bench_RUN_ with a random RUN per load
	concurrency int
	duration    time.Duration
	requests    int // 0: until duration
	repeat      float64
	rate        float64 // deliveries/s cap; 0: none
	secret      string  // the whsec_ signing secret, never printed
}

func runBench(ctx context.Context, e *env, args []string) error {
	fs := command.NewFlagSet("bench")
	target := fs.String("url", defaultSendURL, "send to `URL`")
	secretFlag := fs.String("secret", "", "sign with `whsec_…` (default: the first of LROSINK_WEBHOOK_SECRETS, which keeps it out of the process list)")
	event := fs.String("event", "batch.succeeded", "the event `TYPE` of every delivery")
	idPrefix := fs.String("id-prefix", "", "ids are `PREFIX`N (default bench_RUN_, RUN random per load)")
	concurrency := fs.Int("concurrency", 50, "`N` concurrent senders (1–10000)")
	duration := fs.Duration("duration", 10*time.Second, "stop after `D` (at most 10m)")
	requests := fs.Int("requests", 0, "stop after `N` deliveries (0: --duration alone)")
	repeat := fs.Float64("repeat", 0.3, "share `F` (0–0.9) of deliveries that repeat an earlier id")
	rate := fs.Float64("rate", 0, "cap the total rate at `R` deliveries/s (0: no cap)")
	bare := fs.Bool("bare", false, "measure a bare verifying handler in this process first, then --url; print the ratio")
	rounds := fs.Int("rounds", 1, "run the load (with --bare: the bare, then the target load) `N` times in turn (1–20); figures are over all, the ratio is the median of the rounds'")
	jsonOut := fs.Bool("json", false, "print one JSON line instead of the report")
	if _, err := benchDoc().Parse(e.stdout, fs, args); err != nil {
		return err
	}
	u, err := url.Parse(*target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return command.Usagef("--url %q: want an absolute http(s) URL", *target)
	}
	switch {
	case strings.TrimSpace(*event) == "":
		return command.Usagef("--event: want an event type, e.g. batch.succeeded")
	case *concurrency < 1 || *concurrency > benchMaxConcurrency:
		return command.Usagef("--concurrency %d: want 1–%d", *concurrency, benchMaxConcurrency)
	case *duration <= 0 || *duration > benchMaxDuration:
		return command.Usagef("--duration %s: want more than 0 and at most %s", *duration, benchMaxDuration)
	case *requests < 0 || *requests > benchMaxRequests:
		return command.Usagef("--requests %d: want 0–%d", *requests, benchMaxRequests)
	case math.IsNaN(*repeat) || *repeat < 0 || *repeat > 0.9:
		return command.Usagef("--repeat %v: want a share from 0 to 0.9", *repeat)
	case math.IsNaN(*rate) || *rate < 0:
		return command.Usagef("--rate %v: want 0 (no cap) or more", *rate)
	case *rounds < 1 || *rounds > benchMaxRounds:
		return command.Usagef("--rounds %d: want 1–%d", *rounds, benchMaxRounds)
	}
	secret, err := signingSecret(*secretFlag, e)
	if err != nil {
		return err
	}
	cfg := benchConfig{event: strings.TrimSpace(*event), idPrefix: *idPrefix, concurrency: *concurrency,
		duration: *duration, requests: *requests, repeat: *repeat, rate: *rate, secret: secret}

	rep, err := benchRounds(ctx, cfg, u.String(), secret, *bare, *rounds)
	if err != nil {
		return err
	}
	if *jsonOut {
		b, err := json.Marshal(rep)
		if err != nil {
			return fmt.Errorf("encode the report: %w", err)
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
	} else {
		rep.write(e.stdout)
	}
	if rep.Target.Failed > 0 || (rep.Bare != nil && rep.Bare.Failed > 0) {
		return command.ExitStatus(command.ExitError)
	}
	return nil
}

// benchRounds runs the load rounds times against target, each time after
// the bare handler when bare is set. Alternating keeps the two measured
// under the same conditions when other work shares the machine.
func benchRounds(ctx context.Context, cfg benchConfig, target, secret string, bare bool, rounds int) (benchReport, error) {
	var bareURL string
	if bare {
		u, stop, err := startBare(secret)
		if err != nil {
			return benchReport{}, err
		}
		defer stop()
		bareURL = u
	}
	var (
		bares, targets       []benchResult
		bareLats, targetLats [][]time.Duration
		ratios               []float64
	)
	for r := range rounds {
		round := ""
		if rounds > 1 {
			round = "r" + strconv.Itoa(r) + "_"
		}
		if bare {
			res, lat, err := benchLoad(ctx, cfg, bareURL, "bare", round)
			if err != nil {
				return benchReport{}, err
			}
			bares, bareLats = append(bares, res), append(bareLats, lat)
		}
		res, lat, err := benchLoad(ctx, cfg, target, "target", round)
		if err != nil {
			return benchReport{}, err
		}
		targets, targetLats = append(targets, res), append(targetLats, lat)
		if bare && bares[r].Rate > 0 {
			ratios = append(ratios, res.Rate/bares[r].Rate)
		}
	}
	rep := benchReport{Target: mergeResults(targets, targetLats)}
	if bare {
		rep.Bare = mergeResults(bares, bareLats)
		if len(ratios) == len(targets) {
			m := median(ratios)
			rep.Ratio = &m
			if rounds > 1 {
				rep.RoundRatios = ratios
			}
		}
	}
	return rep, nil
}

// startBare serves the bare handler on a loopback port of this process:
// the webhook verifier with secret, and 200.
func startBare(secret string) (url string, stop func(), err error) {
	v, err := webhook.NewVerifier(webhook.Config{Secrets: []string{secret}, Now: time.Now})
	if err != nil {
		return "", nil, fmt.Errorf("the bare handler's verifier: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("the bare handler's loopback port: %w", err)
	}
	srv := &http.Server{Handler: bareHandler(v), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // returns ErrServerClosed on Close
	return "http://" + ln.Addr().String() + "/Webhook", func() { _ = srv.Close() }, nil
}

// mergeResults sums the rounds of one target; percentiles come from
// every latency of every round.
func mergeResults(rs []benchResult, lats [][]time.Duration) *benchResult {
	m := benchResult{Target: rs[0].Target, URL: rs[0].URL, Status: map[string]int{}, Outcomes: map[string]int{}}
	var all []time.Duration
	for i, r := range rs {
		m.Deliveries += r.Deliveries
		m.DistinctIDs += r.DistinctIDs
		m.Seconds += r.Seconds
		m.Failed += r.Failed
		for k, n := range r.Status {
			m.Status[k] += n
		}
		for k, n := range r.Outcomes {
			m.Outcomes[k] += n
		}
		if m.FirstError == "" {
			m.FirstError = r.FirstError
		}
		all = append(all, lats[i]...)
	}
	if m.Seconds > 0 {
		m.Rate = float64(m.Deliveries) / m.Seconds
	}
	slices.Sort(all)
	m.P50ms, m.P99ms = percentileMs(all, 0.50), percentileMs(all, 0.99)
	if len(all) > 0 {
		m.MaxMs = ms(all[len(all)-1])
	}
	return &m
}

// median of xs (not empty); xs is sorted in place.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// bareHandler verifies a delivery and answers as serve's webhook does, with
// nothing behind the verification.
func bareHandler(v *webhook.Verifier) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, `{"outcome":"error"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if _, err := v.Verify(r.Context(), r.Header, body); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"outcome":"rejected"}`+"\n")
			return
		}
		_, _ = io.WriteString(w, `{"outcome":"verified"}`+"\n")
	})
}

// benchResult is what one load measured.
type benchResult struct {
	Target      string         `json:"target"` // "bare" or "target"
	URL         string         `json:"url"`
	Deliveries  int            `json:"deliveries"`
	DistinctIDs int            `json:"distinct_ids"`
	Seconds     float64        `json:"seconds"`
	Rate        float64        `json:"rate"` // deliveries/s
	P50ms       float64        `json:"p50_ms"`
	P99ms       float64        `json:"p99_ms"`
	MaxMs       float64        `json:"max_ms"`
	Status      map[string]int `json:"status"`   // "200": n; "error": transport errors
	Outcomes    map[string]int `json:"outcomes"` // the answers' outcome field
	Failed      int            `json:"failed"`   // no 2xx answer
	FirstError  string         `json:"first_error,omitempty"`
}

// benchReport is the whole run: the target, and with --bare the bare
// handler and target/bare.
type benchReport struct {
	Bare   *benchResult `json:"bare,omitempty"`
	Target *benchResult `json:"target"`
	Ratio  *float64     `json:"ratio,omitempty"` // the median of RoundRatios
	// RoundRatios are each round's target/bare, in order (--rounds > 1).
	RoundRatios []float64 `json:"round_ratios,omitempty"`
}

func (r benchReport) write(w io.Writer) {
	for _, res := range []*benchResult{r.Bare, r.Target} {
		if res == nil {
			continue
		}
		name := "target"
		if res.Target == "bare" {
			name = "bare verifying handler"
		}
		fmt.Fprintf(w, "%s %s\n", name, res.URL)
		fmt.Fprintf(w, "  deliveries   %d in %.1fs: %.0f/s\n", res.Deliveries, res.Seconds, res.Rate)
		fmt.Fprintf(w, "  distinct ids %d\n", res.DistinctIDs)
		fmt.Fprintf(w, "  latency      p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", res.P50ms, res.P99ms, res.MaxMs)
		fmt.Fprintf(w, "  status       %s\n", counts(res.Status))
		fmt.Fprintf(w, "  outcomes     %s\n", counts(res.Outcomes))
		if res.FirstError != "" {
			fmt.Fprintf(w, "  first error  %s\n", res.FirstError)
		}
	}
	if len(r.RoundRatios) > 0 {
		parts := make([]string, len(r.RoundRatios))
		for i, x := range r.RoundRatios {
			parts[i] = fmt.Sprintf("%.3f", x)
		}
		fmt.Fprintf(w, "round ratios      %s\n", strings.Join(parts, ", "))
	}
	if r.Ratio != nil {
		fmt.Fprintf(w, "ratio target/bare %.3f (%.1f %% of the same-run ceiling)\n", *r.Ratio, *r.Ratio*100)
	}
}

// counts writes "k: n, k: n" in key order; "none" when empty.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// benchSender is one sender's tally, merged after the run (no shared
// counters on the hot path but the slot counters).
type benchSender struct {
	lat      []time.Duration
	status   map[string]int
	outcomes map[string]int
	failed   int
	firstErr string
}

// benchLoad sends cfg's load to target and measures it; round (r0_, or
// "") keeps the ids of rounds apart under one --id-prefix. It returns the
// latencies too, sorted, for merging rounds.
func benchLoad(ctx context.Context, cfg benchConfig, target, name, round string) (benchResult, []time.Duration, error) {
	prefix := cfg.idPrefix + round
	if cfg.idPrefix == "" {
		prefix = "bench_" + randomHex(4) + "_"
	}
	eventJSON, err := json.Marshal(cfg.event)
	if err != nil {
		return benchResult{}, nil, fmt.Errorf("encode the event type: %w", err)
	}
	// New deliveries stop at the deadline; those in flight finish (within
	// the request timeout), so every id counted was sent and answered.
	stopCtx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	tr := &http.Transport{MaxIdleConns: cfg.concurrency, MaxIdleConnsPerHost: cfg.concurrency, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: benchRequestTimeout}

	var slot, distinct atomic.Int64 // deliveries taken; new ids sent
	senders := make([]benchSender, cfg.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for s := range senders {
		snd := &senders[s]
		snd.status, snd.outcomes = map[string]int{}, map[string]int{}
		wg.Go(func() {
			for stopCtx.Err() == nil {
				i := slot.Add(1) - 1
				if cfg.requests > 0 && i >= int64(cfg.requests) {
					return
				}
				if cfg.rate > 0 && !sleepUntil(stopCtx, start.Add(time.Duration(float64(i)/cfg.rate*float64(time.Second)))) {
					return
				}
				// Ids follow from the slot alone: a new one is the count of
				// new ones before it; a repeat picks one of those.
				k := i - repeatsBefore(i, cfg.repeat)
				if isRepeat(i, cfg.repeat) {
					k = (i * 7919) % k // k ≥ 1: slot 0 is never a repeat
				} else {
					distinct.Add(1)
				}
				now := time.Now()
				// A body of its own: the transport may still read it after
				// an early answer.
				body := benchBody(make([]byte, 0, 192), eventJSON, prefix+strconv.FormatInt(k, 10), now)
				snd.send(ctx, client, target, cfg.secret, "msg_"+prefix+strconv.FormatInt(i, 10), body, now)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return benchResult{}, nil, fmt.Errorf("bench %s stopped: %w", name, err)
	}
	res := benchResult{Target: name, URL: target, Seconds: elapsed.Seconds(), DistinctIDs: int(distinct.Load()),
		Status: map[string]int{}, Outcomes: map[string]int{}}
	var lat []time.Duration
	for _, s := range senders {
		lat = append(lat, s.lat...)
		for k, n := range s.status {
			res.Status[k] += n
		}
		for k, n := range s.outcomes {
			res.Outcomes[k] += n
		}
		res.Failed += s.failed
		if res.FirstError == "" {
			res.FirstError = s.firstErr
		}
	}
	res.Deliveries = len(lat)
	if elapsed > 0 {
		res.Rate = float64(res.Deliveries) / elapsed.Seconds()
	}
	slices.Sort(lat)
	res.P50ms, res.P99ms = percentileMs(lat, 0.50), percentileMs(lat, 0.99)
	if len(lat) > 0 {
		res.MaxMs = ms(lat[len(lat)-1])
	}
	return res, lat, nil
}

// repeatsBefore is how many of deliveries 0..i-1 repeat an earlier id:
// floor(i*share), so the share holds exactly, evenly spread.
func repeatsBefore(i int64, share float64) int64 { return int64(math.Floor(float64(i) * share)) }

// isRepeat says whether delivery i repeats an earlier id.
func isRepeat(i int64, share float64) bool {
	return repeatsBefore(i+1, share) > repeatsBefore(i, share)
}

// sleepUntil waits for t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// benchBody appends the event about id to b, as send's deliveryBody writes
// it, without a map per delivery.
func benchBody(b, eventJSON []byte, id string, now time.Time) []byte {
	b = append(b, `{"type":`...)
	b = append(b, eventJSON...)
	b = append(b, `,"version":"v1","timestamp":"`...)
	b = now.UTC().AppendFormat(b, time.RFC3339)
	b = append(b, `","data":{"id":`...)
	b = strconv.AppendQuote(b, id) // ids are ASCII: a JSON string too
	return append(b, "}}"...)
}

// send posts one delivery signed with key and tallies the answer.
func (s *benchSender) send(ctx context.Context, client *http.Client, target, secret, msgID string, body []byte, now time.Time) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		s.fail("error", err.Error())
		return
	}
	// Signed as `lrosink send` signs.
	req.Header = webhooktest.Headers(msgID, now, body, secret)
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		s.lat = append(s.lat, time.Since(t0))
		s.fail("error", err.Error())
		return
	}
	var ans struct {
		Outcome string `json:"outcome"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer)) // a cut answer has no outcome
	resp.Body.Close()
	s.lat = append(s.lat, time.Since(t0))
	s.status[strconv.Itoa(resp.StatusCode)]++
	if json.Unmarshal(raw, &ans) != nil || ans.Outcome == "" {
		ans.Outcome = "(none)"
	}
	s.outcomes[ans.Outcome]++
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		s.failed++
		if s.firstErr == "" {
			s.firstErr = fmt.Sprintf("HTTP %d %s", resp.StatusCode, bytes.TrimSpace(raw))
		}
	}
}

func (s *benchSender) fail(status, msg string) {
	s.status[status]++
	s.failed++
	if s.firstErr == "" {
		s.firstErr = msg
	}
}

// percentileMs is the nearest-rank percentile p of sorted, in ms.
func percentileMs(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return ms(sorted[max(0, int(math.Ceil(p*float64(len(sorted))))-1)])
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
