package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lrosink/lrosink/internal/app"
	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
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
Gemini webhooks are signed) and print what it sustained: deliveries per second, latency
(p50, p99, p99.9, max), HTTP status counts, and what became of the operations.

By default the endpoint is a throwaway serve that bench starts in this process (serve's
own handlers, app.New and its mux, on a loopback port) on a temporary ledger and
results file, signed with a fresh secret, and deletes afterwards: your ledger, your
results and any serve you run are not touched. --url loads another serve or a
deployment instead: its ledger keeps the operations and its results sink gets their
messages; the report then names their prefix and how to remove them.

Each delivery is an EVENT (--event) about an id of its own (bench_RUN_N, RUN random per
load), except a share --repeat of them, which repeat an id sent earlier in the run (a
new webhook-id each time), as redeliveries and duplicate events do. The report keeps
apart the deliveries sent, the distinct operations they were about, the completions
(operations answered "completed", each counted once) and the duplicates (deliveries
answered "duplicate" or "in-progress-elsewhere", and repeats that raced their first
delivery and were answered "completed" by the same completion): no figure counts an
operation twice. In-process it also counts the throwaway's results messages.

--concurrency senders send back to back (closed loop) until --duration has passed or
--requests have been sent, whichever comes first (at most 10m, 10,000,000 deliveries).
--rate R is an open loop instead: delivery i is due at start + i/R, and its latency is
counted from that due time, not from when a sender got to it, so a stall of the target
shows in every delivery it held back (no coordinated omission, as wrk2 and vegeta
measure); the report adds the service time (from the actual send: what a closed loop
would have shown) and the achieved rate.

--bare first starts, in this process on a loopback port, a bare handler that only verifies
the HMAC (the same verifier serve uses) and answers 200, runs the same load against it, then
against the target, and prints both and their ratio: the ceiling of this machine and this
load generator, measured in the same run, which says more than absolute figures do. Other
work on the machine still moves it (the throwaway serve shares this process with the load
generator; make bench-serve runs serve as a process of its own): --rounds N alternates the
two loads N times (each --duration long); the figures are over all rounds, the ratio is the
median of the rounds' ratios.

Exit status 0 when every delivery was answered 2xx; 1 when any was not (a status or a
transport error, counted in the report); 2 on a bad flag.`,
		Env: `  LROSINK_WEBHOOK_SECRETS  with --url: the first secret signs, when --secret is not given
  Without --url no other variable is read: the throwaway serve has serve's defaults.`,
		Examples: []string{
			"lrosink bench --duration 5s",
			"lrosink bench --rate 500 --duration 10s",
			"lrosink bench --bare --concurrency 500 --duration 20s --repeat 0.3",
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
	rate        float64 // deliveries/s of the open loop; 0: closed loop
	secret      string  // the whsec_ signing secret, never printed
	// drain bounds the open loop's sends past --duration (0: the request
	// timeout); a test shortens it.
	drain time.Duration
}

func runBench(ctx context.Context, e *env, args []string) error {
	fs := command.NewFlagSet("bench")
	target := fs.String("url", "", "load the webhook at `URL` (a serve or a deployment: its ledger keeps the operations) instead of a throwaway serve in this process")
	secretFlag := fs.String("secret", "", "sign with `whsec_…` (with --url; default: the first of LROSINK_WEBHOOK_SECRETS, which keeps it out of the process list)")
	event := fs.String("event", "batch.succeeded", "the event `TYPE` of every delivery (one Gemini sends: lrosink send --list)")
	anyType := fs.Bool("any-type", false, "send --event although Gemini sends no such type")
	idPrefix := fs.String("id-prefix", "", "ids are `PREFIX`N (default bench_RUN_, RUN random per load)")
	concurrency := fs.Int("concurrency", 50, "`N` concurrent senders (1–10000)")
	duration := fs.Duration("duration", 10*time.Second, "stop after `D` (at most 10m)")
	requests := fs.Int("requests", 0, "stop after `N` deliveries (0: --duration alone)")
	repeat := fs.Float64("repeat", 0.3, "share `F` (0–0.9) of deliveries that repeat an earlier id")
	rate := fs.Float64("rate", 0, "open loop: send `R` deliveries/s on a fixed schedule, latency from each one's due time (0: closed loop)")
	bare := fs.Bool("bare", false, "measure a bare verifying handler in this process first, then the target; print the ratio")
	rounds := fs.Int("rounds", 1, "run the load (with --bare: the bare, then the target load) `N` times in turn (1–20); figures are over all, the ratio is the median of the rounds'")
	jsonOut := fs.Bool("json", false, "print one JSON line instead of the report")
	if _, err := benchDoc().Parse(e.stdout, fs, args); err != nil {
		return err
	}
	if *target != "" {
		u, err := url.Parse(*target)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return command.Usagef("--url %q: want an absolute http(s) URL", *target)
		}
		*target = u.String()
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
	case math.IsNaN(*rate) || math.IsInf(*rate, 0) || *rate < 0:
		return command.Usagef("--rate %v: want 0 (closed loop) or more", *rate)
	case *rounds < 1 || *rounds > benchMaxRounds:
		return command.Usagef("--rounds %d: want 1–%d", *rounds, benchMaxRounds)
	}
	if err := checkEventType(strings.TrimSpace(*event), *anyType, "--event"); err != nil {
		return err
	}
	var secret string
	var err error
	switch {
	case *target != "" || *secretFlag != "":
		secret, err = signingSecret(*secretFlag, e)
	default:
		secret = webhooktest.NewSecret() // the throwaway's own: nothing to configure
	}
	if err != nil {
		return err
	}
	cfg := benchConfig{event: strings.TrimSpace(*event), idPrefix: *idPrefix, concurrency: *concurrency,
		duration: *duration, requests: *requests, repeat: *repeat, rate: *rate, secret: secret}

	var rep benchReport
	if *target == "" {
		rep, err = e.benchThrowaway(ctx, cfg, *bare, *rounds)
	} else {
		rep, err = benchRounds(ctx, cfg, *target, *bare, *rounds)
		if err == nil {
			rep.Ledger = "url"
			rep.NamePrefixes = namePrefixes(cfg.event, rep.Target.prefixes)
			rep.Cleanup = cleanupHint(rep.NamePrefixes)
		}
	}
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

// benchThrowaway runs the load against a serve of this process on a
// temporary ledger and results file (throwawayServe), then counts the
// results messages it published and deletes it all.
func (e *env) benchThrowaway(ctx context.Context, cfg benchConfig, bare bool, rounds int) (benchReport, error) {
	t, err := e.throwawayServe(ctx, cfg.secret)
	if err != nil {
		return benchReport{}, err
	}
	rep, err := benchRounds(ctx, cfg, t.url, bare, rounds)
	n, serr := t.stop()
	if err != nil {
		return benchReport{}, errors.Join(err, serr)
	}
	if serr != nil {
		return benchReport{}, serr
	}
	rep.Ledger, rep.ResultsMessages = "throwaway", &n
	return rep, nil
}

// throwaway is a serve bench started in this process.
type throwaway struct {
	url  string
	stop func() (messages int, err error)
}

// throwawayServe builds serve's App (the same app.New and mux as `lrosink
// serve`) on a SQLite ledger and a file: results sink in a new temporary
// directory, accepting deliveries signed with secret, and serves it on a
// loopback port. Nothing of the caller's configuration is read: the
// operator's ledger, results sink and serve are not touched. stop stops it
// as serve stops (App.Stop), counts the lines of its results file and
// removes the directory.
func (e *env) throwawayServe(ctx context.Context, secret string) (throwaway, error) {
	dir, err := os.MkdirTemp("", "lrosink-bench-")
	if err != nil {
		return throwaway{}, fmt.Errorf("the throwaway serve's directory: %w", err)
	}
	fail := func(err error) (throwaway, error) { return throwaway{}, errors.Join(err, os.RemoveAll(dir)) }
	resultsPath := filepath.Join(dir, "results.jsonl")
	cfg, err := config.Load(mapGetenv(map[string]string{
		"LROSINK_STORE":           "sqlite:" + filepath.Join(dir, "ledger.db"),
		"LROSINK_RESULTS":         "file:" + resultsPath,
		"LROSINK_WEBHOOK_SECRETS": secret,
	}), config.Serve(openers(false)))
	if err != nil {
		return fail(fmt.Errorf("the throwaway serve's configuration: %w", err))
	}
	// Errors only: under load its per-decision lines would bury the report.
	log := logging.New(e.stderr, slog.LevelError, "")
	a, err := e.newApp(ctx, cfg, log, true, func(o *app.Options) { o.Stdout = io.Discard })
	if err != nil {
		return fail(fmt.Errorf("the throwaway serve: %w", err))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(errors.Join(fmt.Errorf("the throwaway serve's loopback port: %w", err), a.Close()))
	}
	srv := &http.Server{Handler: a.Mux(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() { _ = srv.Serve(ln) }() // ErrServerClosed once stopped
	stop := func() (int, error) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.shutdownTimeout)
		defer cancel()
		var errs []error
		if err := a.Stop(sctx, srv); err != nil {
			errs = append(errs, fmt.Errorf("stop the throwaway serve: %w", err))
		}
		n, err := countLines(resultsPath)
		if err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove the throwaway serve's directory: %w", err))
		}
		return n, errors.Join(errs...)
	}
	return throwaway{url: "http://" + ln.Addr().String() + "/Webhook", stop: stop}, nil
}

// mapGetenv is a getenv over a fixed map.
func mapGetenv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// countLines counts the lines of the file at path (0 when it was never
// written: nothing was published).
func countLines(path string) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the throwaway results: %w", err)
	}
	return bytes.Count(b, []byte("\n")), nil
}

// namePrefixes are the operation names the loads' id prefixes stand for,
// as the target stores them (batches/bench_RUN_ for a batch event).
func namePrefixes(eventType string, idPrefixes []string) []string {
	family, _, _ := strings.Cut(eventType, ".")
	kind, _ := opname.ParseKind(family)
	out := make([]string, 0, len(idPrefixes))
	for _, p := range idPrefixes {
		name := opname.Collection(kind) + p
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// cleanupHint says how to remove what a --url run left in the target's
// ledger. There is no delete command: the settled operations go with
// LROSINK_RETENTION when it is set (unset keeps them), or by hand on SQLite.
func cleanupHint(prefixes []string) string {
	if len(prefixes) == 0 {
		return ""
	}
	var ops, claims []string
	for _, p := range prefixes {
		// substr, not LIKE: "_" in the prefix would be a wildcard.
		lit := fmt.Sprintf("substr(%%s, 1, %d) = '%s'", len(p), strings.ReplaceAll(p, "'", "''"))
		ops = append(ops, fmt.Sprintf(lit, "name"))
		claims = append(claims, fmt.Sprintf(lit, "operation"))
	}
	return "they are settled operations like any other: if LROSINK_RETENTION is set, it deletes them in time (unset, the ledger keeps them for ever); " +
		"on a SQLite ledger, now, with the target's serve stopped: sqlite3 LEDGER.db \"DELETE FROM operations WHERE " +
		strings.Join(ops, " OR ") + "; DELETE FROM claims WHERE " + strings.Join(claims, " OR ") + "\"; " +
		"their results messages went to the target's results sink: its consumers should ignore these names"
}

// benchRounds runs the load rounds times against target, each time after
// the bare handler when bare is set. Alternating keeps the two measured
// under the same conditions when other work shares the machine.
func benchRounds(ctx context.Context, cfg benchConfig, target string, bare bool, rounds int) (benchReport, error) {
	var bareURL string
	if bare {
		u, stop, err := startBare(cfg.secret)
		if err != nil {
			return benchReport{}, err
		}
		defer stop()
		bareURL = u
	}
	var (
		bares, targets       []benchResult
		bareLats, targetLats []benchSamples
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
func mergeResults(rs []benchResult, lats []benchSamples) *benchResult {
	m := benchResult{Target: rs[0].Target, URL: rs[0].URL, OpenLoop: rs[0].OpenLoop, RateTarget: rs[0].RateTarget,
		Status: map[string]int{}, Outcomes: map[string]int{}}
	var all benchSamples
	for i, r := range rs {
		m.Deliveries += r.Deliveries
		m.DistinctIDs += r.DistinctIDs
		m.Operations += r.Operations
		m.Repeats += r.Repeats
		m.Completions += r.Completions
		m.Duplicates += r.Duplicates
		m.RacedRepeats += r.RacedRepeats
		m.Seconds += r.Seconds
		m.Failed += r.Failed
		m.Unsent += r.Unsent
		for k, n := range r.Status {
			m.Status[k] += n
		}
		for k, n := range r.Outcomes {
			m.Outcomes[k] += n
		}
		if m.FirstError == "" {
			m.FirstError = r.FirstError
		}
		m.prefixes = append(m.prefixes, r.prefixes...)
		all.lat = append(all.lat, lats[i].lat...)
		all.svc = append(all.svc, lats[i].svc...)
	}
	if m.Seconds > 0 {
		m.Rate = float64(m.Deliveries) / m.Seconds
	}
	m.setLatencies(all)
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
	Target string `json:"target"` // "bare" or "target"
	URL    string `json:"url"`
	// Deliveries were sent (and answered, or failed); Operations (also
	// DistinctIDs, its older name) the distinct ids they were about;
	// Repeats the deliveries about an id sent before.
	Deliveries  int `json:"deliveries"`
	DistinctIDs int `json:"distinct_ids"`
	Operations  int `json:"operations"`
	Repeats     int `json:"repeats"`
	// Completions are the operations answered "completed", each counted
	// once; Duplicates the deliveries that found their operation completed
	// or being completed: answered "duplicate" or "in-progress-elsewhere",
	// or RacedRepeats, repeats that raced their id's first delivery and
	// were answered "completed" by that same completion.
	Completions  int     `json:"completions"`
	Duplicates   int     `json:"duplicates"`
	RacedRepeats int     `json:"raced_repeats"`
	Seconds      float64 `json:"seconds"`
	Rate         float64 `json:"rate"` // achieved deliveries/s
	// OpenLoop: --rate scheduled the sends (RateTarget a second) and the
	// latency figures count from each one's due time; the Service figures
	// from the actual send, as a closed loop sees it. Without --rate the
	// two are the same.
	OpenLoop    bool           `json:"open_loop"`
	RateTarget  float64        `json:"rate_target,omitempty"`
	P50ms       float64        `json:"p50_ms"`
	P99ms       float64        `json:"p99_ms"`
	P999ms      float64        `json:"p999_ms"`
	MaxMs       float64        `json:"max_ms"`
	ServiceP50  float64        `json:"service_p50_ms"`
	ServiceP99  float64        `json:"service_p99_ms"`
	ServiceP999 float64        `json:"service_p999_ms"`
	ServiceMax  float64        `json:"service_max_ms"`
	Status      map[string]int `json:"status"`   // "200": n; "error": transport errors
	Outcomes    map[string]int `json:"outcomes"` // the answers' outcome field
	Failed      int            `json:"failed"`   // no 2xx answer
	// Unsent (open loop) were due before the deadline but not sent by the
	// drain's end (--duration plus the request timeout): not Deliveries,
	// but in the latency figures, waiting until the end.
	Unsent     int    `json:"unsent,omitempty"`
	FirstError string `json:"first_error,omitempty"`
	// prefixes are the loads' id prefixes (bench_RUN_).
	prefixes []string
}

// setLatencies sets the percentiles from the samples (sorted here).
func (r *benchResult) setLatencies(s benchSamples) {
	slices.Sort(s.lat)
	slices.Sort(s.svc)
	r.P50ms, r.P99ms, r.P999ms = percentileMs(s.lat, 0.50), percentileMs(s.lat, 0.99), percentileMs(s.lat, 0.999)
	r.ServiceP50, r.ServiceP99, r.ServiceP999 = percentileMs(s.svc, 0.50), percentileMs(s.svc, 0.99), percentileMs(s.svc, 0.999)
	if len(s.lat) > 0 {
		r.MaxMs = ms(s.lat[len(s.lat)-1])
	}
	if len(s.svc) > 0 {
		r.ServiceMax = ms(s.svc[len(s.svc)-1])
	}
}

// benchSamples are one load's latencies: lat from each delivery's due time
// (open loop) or its send (closed loop), svc from its send.
type benchSamples struct{ lat, svc []time.Duration }

// benchReport is the whole run: the target, and with --bare the bare
// handler and target/bare.
type benchReport struct {
	// Ledger is where the operations went: "throwaway" (bench's own serve,
	// deleted) or "url" (the target's ledger keeps them).
	Ledger string       `json:"ledger"`
	Bare   *benchResult `json:"bare,omitempty"`
	Target *benchResult `json:"target"`
	Ratio  *float64     `json:"ratio,omitempty"` // the median of RoundRatios
	// RoundRatios are each round's target/bare, in order (--rounds > 1).
	RoundRatios []float64 `json:"round_ratios,omitempty"`
	// ResultsMessages is what the throwaway serve published (one per
	// operation); unknown with --url.
	ResultsMessages *int `json:"results_messages,omitempty"`
	// NamePrefixes (with --url) are the names of the operations the run
	// left in the target's ledger; Cleanup says how to remove them.
	NamePrefixes []string `json:"name_prefixes,omitempty"`
	Cleanup      string   `json:"cleanup,omitempty"`
}

func (r benchReport) write(w io.Writer) {
	for _, res := range []*benchResult{r.Bare, r.Target} {
		if res == nil {
			continue
		}
		name := "target"
		switch {
		case res.Target == "bare":
			name = "bare verifying handler"
		case r.Ledger == "throwaway":
			name = "throwaway serve (this process; temporary ledger and results file, deleted)"
		}
		fmt.Fprintf(w, "%s %s\n", name, res.URL)
		rate := fmt.Sprintf("%.0f/s", res.Rate)
		if res.OpenLoop {
			rate = fmt.Sprintf("%.0f/s achieved of %.0f/s scheduled (open loop)", res.Rate, res.RateTarget)
		}
		fmt.Fprintf(w, "  deliveries   %d sent in %.1fs: %s\n", res.Deliveries, res.Seconds, rate)
		if res.Unsent > 0 {
			fmt.Fprintf(w, "  unsent       %d were due before the deadline but not sent within the request timeout after it (in the latency figures, waiting until the end)\n", res.Unsent)
		}
		fmt.Fprintf(w, "  operations   %d distinct (%d deliveries repeated an earlier id, as redeliveries do)\n", res.Operations, res.Repeats)
		if res.Target != "bare" {
			msgs := ""
			if r.ResultsMessages != nil && res == r.Target {
				msgs = fmt.Sprintf("; results messages published: %d", *r.ResultsMessages)
			}
			fmt.Fprintf(w, "  completions  %d operations completed, each once%s\n", res.Completions, msgs)
			fmt.Fprintf(w, "  duplicates   %d deliveries found their operation completed (%d of them repeats that raced the first delivery, answered by its completion)\n",
				res.Duplicates, res.RacedRepeats)
		}
		if res.OpenLoop {
			fmt.Fprintf(w, "  latency      p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms (from each delivery's scheduled time)\n",
				res.P50ms, res.P99ms, res.P999ms, res.MaxMs)
			fmt.Fprintf(w, "  service time p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms (from the send: a closed loop's figure, which hides queueing)\n",
				res.ServiceP50, res.ServiceP99, res.ServiceP999, res.ServiceMax)
		} else {
			fmt.Fprintf(w, "  latency      p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms (closed loop)\n", res.P50ms, res.P99ms, res.P999ms, res.MaxMs)
		}
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
	if len(r.NamePrefixes) > 0 {
		// Only a 2xx answer says the target took the delivery: a run
		// that was refused throughout left nothing known there.
		names := strings.Join(r.NamePrefixes, ", ")
		switch answered := r.Target.Deliveries - r.Target.Failed; {
		case answered <= 0:
			fmt.Fprintf(w, "\nNo delivery was answered 2xx: none of this run's operations is known to have reached the target's ledger (their names would start with %s)\n", names)
			fmt.Fprintf(w, "Should any have: %s\n", r.Cleanup)
		case r.Target.Failed > 0:
			fmt.Fprintf(w, "\nThe operations of this run's %d deliveries answered 2xx went to the target's ledger (not those of the %d that failed): their names start with %s\n",
				answered, r.Target.Failed, names)
			fmt.Fprintf(w, "To remove them: %s\n", r.Cleanup)
		default:
			fmt.Fprintf(w, "\nThis run's operations went to the target's ledger: their names start with %s\n", names)
			fmt.Fprintf(w, "To remove them: %s\n", r.Cleanup)
		}
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
	lat, svc  []time.Duration
	unsent    []time.Time // open loop: the due times of slots not sent by the drain's end
	completed []int64     // the ids (their number k) answered "completed"
	status    map[string]int
	outcomes  map[string]int
	failed    int
	firstErr  string
}

// benchLoad sends cfg's load to target and measures it; round (r0_, or
// "") keeps the ids of rounds apart under one --id-prefix. It returns the
// latencies too, for merging rounds.
func benchLoad(ctx context.Context, cfg benchConfig, target, name, round string) (benchResult, benchSamples, error) {
	prefix := cfg.idPrefix + round
	if cfg.idPrefix == "" {
		prefix = "bench_" + randomHex(4) + "_"
	}
	eventJSON, err := json.Marshal(cfg.event)
	if err != nil {
		return benchResult{}, benchSamples{}, fmt.Errorf("encode the event type: %w", err)
	}
	// Closed loop: new deliveries stop at the deadline; those in flight
	// finish (within the request timeout), so every id counted was sent
	// and answered. Open loop: the schedule ends at the deadline, not the
	// sends: every slot due before it is sent when a sender is free, even
	// after the deadline, or a stall at the end would hide its backlog
	// (coordinated omission). The drain is bounded by the request timeout;
	// a slot still unsent then counts as unsent, its latency up to the end.
	stopCtx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	tr := &http.Transport{MaxIdleConns: cfg.concurrency, MaxIdleConnsPerHost: cfg.concurrency, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: benchRequestTimeout}

	var slot, distinct atomic.Int64 // deliveries taken; new ids sent
	senders := make([]benchSender, cfg.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	drain := cfg.drain
	if drain <= 0 {
		drain = benchRequestTimeout
	}
	drainEnd := start.Add(cfg.duration + drain)
	for s := range senders {
		snd := &senders[s]
		snd.status, snd.outcomes = map[string]int{}, map[string]int{}
		wg.Go(func() {
			for cfg.rate > 0 || stopCtx.Err() == nil {
				i := slot.Add(1) - 1
				if cfg.requests > 0 && i >= int64(cfg.requests) {
					return
				}
				// Open loop: delivery i is due at its slot of the schedule,
				// whenever a sender gets to it; its latency counts from then,
				// so a stall shows in every delivery it held back.
				var due time.Time
				if cfg.rate > 0 {
					offset := time.Duration(float64(i) / cfg.rate * float64(time.Second))
					if offset >= cfg.duration {
						return // the schedule's end
					}
					due = start.Add(offset)
					if time.Now().After(drainEnd) {
						snd.unsent = append(snd.unsent, due)
						continue
					}
					if !sleepUntil(ctx, due) {
						return
					}
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
				if due.IsZero() {
					due = now // closed loop: due when sent
				}
				// A body of its own: the transport may still read it after
				// an early answer.
				body := benchBody(make([]byte, 0, 192), eventJSON, prefix+strconv.FormatInt(k, 10), now)
				snd.send(ctx, client, target, cfg.secret, "msg_"+prefix+strconv.FormatInt(i, 10), body, now, due, k)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return benchResult{}, benchSamples{}, fmt.Errorf("bench %s stopped: %w", name, err)
	}
	res := benchResult{Target: name, URL: target, Seconds: elapsed.Seconds(), DistinctIDs: int(distinct.Load()),
		OpenLoop: cfg.rate > 0, RateTarget: cfg.rate, Status: map[string]int{}, Outcomes: map[string]int{}, prefixes: []string{prefix}}
	var samples benchSamples
	completed := map[int64]bool{}
	for _, s := range senders {
		samples.lat = append(samples.lat, s.lat...)
		samples.svc = append(samples.svc, s.svc...)
		res.Unsent += len(s.unsent)
		for _, k := range s.completed {
			completed[k] = true
		}
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
	res.Deliveries = len(samples.svc)
	// An unsent due slot waited until the end: it counts in the latency
	// figures (never in the service time: it was never sent).
	end := start.Add(elapsed)
	for _, s := range senders {
		for _, due := range s.unsent {
			samples.lat = append(samples.lat, end.Sub(due))
		}
	}
	res.Operations, res.Repeats = res.DistinctIDs, res.Deliveries-res.DistinctIDs
	res.Completions = len(completed)
	res.RacedRepeats = res.Outcomes["completed"] - res.Completions
	res.Duplicates = res.Outcomes["duplicate"] + res.Outcomes["in-progress-elsewhere"] + res.RacedRepeats
	if elapsed > 0 {
		res.Rate = float64(res.Deliveries) / elapsed.Seconds()
	}
	res.setLatencies(samples)
	return res, samples, nil
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

// send posts one delivery about id k, signed at now and due at due, and
// tallies the answer: its latency from due, its service time from the send.
func (s *benchSender) send(ctx context.Context, client *http.Client, target, secret, msgID string, body []byte, now, due time.Time, k int64) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		s.fail("error", err.Error())
		return
	}
	// Signed as `lrosink send` signs.
	req.Header = webhooktest.Headers(msgID, now, body, secret)
	t0 := time.Now()
	done := func() {
		end := time.Now()
		s.lat, s.svc = append(s.lat, end.Sub(due)), append(s.svc, end.Sub(t0))
	}
	resp, err := client.Do(req)
	if err != nil {
		done()
		s.fail("error", err.Error())
		return
	}
	var ans struct {
		Outcome string `json:"outcome"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer)) // a cut answer has no outcome
	resp.Body.Close()
	done()
	s.status[strconv.Itoa(resp.StatusCode)]++
	if json.Unmarshal(raw, &ans) != nil || ans.Outcome == "" {
		ans.Outcome = "(none)"
	}
	s.outcomes[ans.Outcome]++
	if ans.Outcome == "completed" {
		s.completed = append(s.completed, k)
	}
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
