// Package gemini reads the authoritative state of a Gemini long-running
// operation (batch job, Veo video operation, Interaction) through the genai
// SDK and maps it to an event.Event for the reconciler.
//
// The SDK is used as-is where it is right and bypassed only where it loses
// information (see GEMINI.md §4): in Gemini mode it never fills
// BatchJob.Error nor the batch statistics, so a batch is read with one raw
// GET of its Operation, mapped as the SDK maps it, and a listed FAILED job
// costs one raw GET for its error.
package gemini

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fetcherr"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/redact"
	"github.com/lrosink/lrosink/internal/retry"
)

// ErrNotFound is wrapped by every error for an operation the API answered
// 404 for: fetcherr.ErrNotFound, so the error's kind is fetcherr.NotFound.
// It is final: retrying will not make the operation appear.
var ErrNotFound = fetcherr.ErrNotFound

// TransientError is returned when the API kept failing with 408, 429 or 5xx,
// the transport kept failing, or the caller's context ended before an answer.
// It never carries a state: the operation's state is simply unknown for now.
// Its kind is fetcherr.Transient.
type TransientError struct {
	// Name is the API name (or "batches" for a list) being fetched.
	Name string
	// Attempts is how many calls were made.
	Attempts int
	// Code is the HTTP status of the last failure; 0 for a transport error
	// or when no call was answered.
	Code int
	// Err is the last failure; when the context ended it wraps the
	// context's error too, so errors.Is(err, context.Canceled) works.
	Err error

	gaveUp bool // the context ended (or Sleep failed) before the retries did
}

func (e *TransientError) Error() string {
	if e.gaveUp {
		return fmt.Sprintf("gemini: %s: gave up after %d attempt(s): %v", e.Name, e.Attempts, e.Err)
	}
	status := "transport error"
	if e.Code != 0 {
		status = fmt.Sprintf("HTTP %d", e.Code)
	}
	return fmt.Sprintf("gemini: %s: still failing after %d attempt(s) (%s): %v", e.Name, e.Attempts, status, e.Err)
}

func (e *TransientError) Unwrap() error { return e.Err }

// Is makes the error's kind fetcherr.Transient.
func (e *TransientError) Is(target error) bool { return target == fetcherr.ErrTransient }

// DefaultOutputWait is Options.OutputWait's default: how long a SUCCEEDED
// batch without a visible output is held RUNNING after Gemini's update
// time (GEMINI.md §10).
const DefaultOutputWait = 10 * time.Minute

// DefaultMaxWait is Options.MaxWait's default: a reconcile pass runs every
// minute, so a longer wait inside one gains nothing.
const DefaultMaxWait = time.Minute

// DefaultMaxAttempts is Options.MaxAttempts' default.
const DefaultMaxAttempts = 4

// defaultBackoff: 500ms doubling up to 8s, with "equal jitter" in [d/2, d].
// The jitter spreads reconcilers that failed together; the ranges of
// consecutive attempts only touch, so the delay never shrinks while it is
// still growing.
func defaultBackoff() retry.Backoff {
	return retry.Backoff{Initial: 500 * time.Millisecond, Multiplier: 2, Max: 8 * time.Second, Jitter: 0.5}
}

// DefaultBackoff is the delay before retry number attempt (1 after the first
// failure): 500ms doubling up to 8s, jittered in [d/2, d].
func DefaultBackoff(attempt int) time.Duration {
	return defaultBackoff().Delay(attempt)
}

// Options configures a Fetcher.
type Options struct {
	// Client is a ready genai client in Gemini API mode. When set, APIKey,
	// BaseURL and HTTPClient must be empty: the raw GET of a batch uses the
	// client's own resolved configuration instead.
	Client *genai.Client
	// APIKey, BaseURL (default https://generativelanguage.googleapis.com/)
	// and HTTPClient build a client when Client is nil. APIKey is required.
	APIKey     string
	BaseURL    string
	HTTPClient *http.Client
	// MaxAttempts bounds the calls per API request, the first included.
	// Default DefaultMaxAttempts.
	MaxAttempts int
	// Backoff gives the delay before retry number attempt (>= 1).
	// Default DefaultBackoff.
	Backoff func(attempt int) time.Duration
	// Sleep waits; it must return ctx's error when ctx ends first. Tests
	// inject it so no retry test sleeps for real. Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock: for the caller's deadline budget (a retry whose
	// wait would pass ctx's deadline is not attempted), a Retry-After
	// date, and how long a SUCCEEDED batch may go without its output
	// (OutputWait). Default time.Now.
	Now func() time.Time
	// MaxWait bounds one wait between tries, whatever the server asks
	// (RetryInfo.retryDelay can say minutes): a longer wait ends the fetch
	// at once as transient, and the caller's next check (the reconciler's
	// backoff, Gemini's redelivery) tries again, instead of holding a pass
	// or a webhook. Default DefaultMaxWait. The caller's deadline bounds
	// every wait as well.
	MaxWait time.Duration
	// OutputWait is how long after Gemini's update time a SUCCEEDED batch
	// that names no output yet (no responsesFile, no inlined responses) is
	// reported RUNNING, waiting for its output to become visible; after it
	// the batch settles without output and a WARNING is logged. Default
	// DefaultOutputWait; negative settles at once.
	OutputWait time.Duration
	// Wait, when set, is waited on before every HTTP attempt of a fetch or
	// list, retries included: a call budget (reconcile.Budget.Wait). Its
	// error ends the call as the context's end would.
	Wait func(ctx context.Context) error
	// Log receives what is worth telling but is no error of the call (a
	// FAILED batch whose error detail could not be read). Default: discard.
	Log *slog.Logger
}

// Fetcher fetches operation state. It is safe for concurrent use.
type Fetcher struct {
	client      *genai.Client
	raw         *http.Client
	apiRoot     *url.URL // BaseURL joined with the API version
	apiKey      string
	headers     http.Header
	maxAttempts int
	backoff     func(int) time.Duration
	sleep       func(context.Context, time.Duration) error
	now         func() time.Time
	maxWait     time.Duration
	outputWait  time.Duration
	log         *slog.Logger
	wait        func(context.Context) error
}

// New returns a Fetcher.
func New(o Options) (f *Fetcher, err error) {
	// genai.NewClient echoes its whole config (key included) in some errors.
	defer func() { err = scrub(err, o.APIKey) }()

	if o.MaxAttempts < 0 {
		return nil, fmt.Errorf("gemini: MaxAttempts must not be negative (got %d)", o.MaxAttempts)
	}
	client := o.Client
	if client != nil {
		if o.APIKey != "" || o.BaseURL != "" || o.HTTPClient != nil {
			return nil, errors.New("gemini: set either Options.Client or APIKey/BaseURL/HTTPClient, not both")
		}
	} else {
		if o.APIKey == "" {
			return nil, errors.New("gemini: Options.APIKey is required when Options.Client is nil")
		}
		// NewClient does no I/O with an API key, so no caller context is needed.
		client, err = genai.NewClient(context.Background(), &genai.ClientConfig{
			APIKey:      o.APIKey,
			Backend:     genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: o.BaseURL},
			HTTPClient:  o.HTTPClient,
		})
		if err != nil {
			return nil, fmt.Errorf("gemini: create genai client: %w", err)
		}
	}

	// The resolved config has the defaults and environment applied, so the
	// raw GET goes exactly where the SDK's calls go.
	cfg := client.ClientConfig()
	if cfg.Backend == genai.BackendVertexAI {
		return nil, errors.New("gemini: the genai client must use the Gemini API backend, not Vertex AI")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("gemini: the genai client has no API key")
	}
	base, err := url.Parse(cfg.HTTPOptions.BaseURL)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("gemini: invalid base URL %q", cfg.HTTPOptions.BaseURL)
	}
	raw := cfg.HTTPClient
	if raw == nil {
		raw = http.DefaultClient
	}
	f = &Fetcher{
		client:      client,
		raw:         raw,
		apiRoot:     base.JoinPath(cfg.HTTPOptions.APIVersion),
		apiKey:      cfg.APIKey,
		headers:     cfg.HTTPOptions.Headers.Clone(),
		maxAttempts: o.MaxAttempts,
		backoff:     o.Backoff,
		sleep:       o.Sleep,
		now:         o.Now,
		maxWait:     o.MaxWait,
		outputWait:  o.OutputWait,
		log:         o.Log,
		wait:        o.Wait,
	}
	if f.now == nil {
		f.now = time.Now
	}
	if f.outputWait == 0 {
		f.outputWait = DefaultOutputWait
	}
	if f.maxWait <= 0 {
		f.maxWait = DefaultMaxWait
	}
	if f.log == nil {
		f.log = logging.Discard()
	}
	if f.maxAttempts == 0 {
		f.maxAttempts = DefaultMaxAttempts
	}
	if f.backoff == nil {
		f.backoff = DefaultBackoff
	}
	if f.sleep == nil {
		f.sleep = retry.Sleep
	}
	return f, nil
}

// Fetch returns the current state of one operation as an event with Source
// event.SourceReconcile and Name the name the API returned.
//
// apiName must be the API name form (opname.Name.APIName): "batches/ID",
// "models/M/operations/ID" (or "operations/ID"), "interactions/ID". A bare id
// is rejected before any call, even with a kind: the SDK would either refuse
// it or, for batches, match an unanchored pattern, and a bare id here means a
// caller skipped opname.Normalize. The error wraps opname.ErrInvalidName.
// kind may be opname.KindUnknown; a contradicting kind is rejected.
//
// Errors, by fetcherr kind: NotFound (ErrNotFound, wrapped) for a 404;
// Transient (*TransientError) for 408/429/5xx, transport failures and
// context end, after up to MaxAttempts calls; Permanent for any other error
// (other 4xx, undecodable answers), which is plain and not retried.
// A batch costs one GET (retries aside): its error and statistics come in
// the same answer as its state.
func (f *Fetcher) Fetch(ctx context.Context, kind opname.Kind, apiName string) (event.Event, error) {
	ev, err := f.fetch(ctx, kind, apiName)
	return ev, scrub(err, f.apiKey)
}

func (f *Fetcher) fetch(ctx context.Context, kind opname.Kind, apiName string) (event.Event, error) {
	n, err := checkAPIName(kind, apiName)
	if err != nil {
		return event.Event{}, err
	}
	switch n.Kind {
	case opname.KindBatch:
		return f.fetchBatch(ctx, n.APIName)
	case opname.KindVideo:
		return f.fetchVideo(ctx, n.APIName)
	case opname.KindInteraction:
		return f.fetchInteraction(ctx, n.APIName)
	default:
		return event.Event{}, fmt.Errorf("gemini: fetch %q: unsupported kind %q", apiName, n.Kind)
	}
}

// ListBatches returns one page of the project's batch jobs as events, for
// adopting operations lrosink never registered, with what adoption matches
// an unbound intent on (display name, model, create time; the intent key
// the echoed webhook config names, as Event.Intent). pageSize 0 lets the
// server choose; the returned token is "" on the last page. The page is
// one raw GET (the SDK's Batches.List drops the webhook config), each job
// mapped as a fetch maps it. FAILED jobs are enriched with their error (and
// statistics) as Fetch reads them (one raw GET each), because the event
// that settles an operation is the only chance to record why; a job whose
// detail cannot be read is returned without it, with a WARN. Other
// terminal jobs are not: a listing runs every pass, and one GET per listed
// job would cost a call per job per pass.
func (f *Fetcher) ListBatches(ctx context.Context, pageSize int, pageToken string) ([]event.ListedBatch, string, error) {
	evs, next, err := f.listBatches(ctx, pageSize, pageToken)
	return evs, next, scrub(err, f.apiKey)
}

func (f *Fetcher) listBatches(ctx context.Context, pageSize int, pageToken string) ([]event.ListedBatch, string, error) {
	if pageSize < 0 || pageSize > math.MaxInt32 {
		return nil, "", fmt.Errorf("gemini: list batches: invalid page size %d", pageSize)
	}
	ops, next, err := f.listBatchPage(ctx, pageSize, pageToken)
	if err != nil {
		return nil, "", fmt.Errorf("gemini: list batches: %w", err)
	}
	out := make([]event.ListedBatch, 0, len(ops))
	for i, op := range ops {
		if op.name == "" {
			return nil, "", fmt.Errorf("gemini: list batches: item %d has no name", i)
		}
		v := op.view()
		ev := batchEvent(v, "")
		ev.Intent = event.IntentOf(op.userMetadata)
		// The listing holds each job's raw Operation: a terminal one's
		// metadata.batchStats are there, and adoption may be what settles
		// it (a known batch whose end the listing shows first). A FAILED
		// one's error is still read by its own GET (addListedDetail).
		addDetail(&ev, operationDetail{stats: op.detail.stats}, true)
		f.holdUntilOutput(ctx, &ev, v)
		if err := f.addListedDetail(ctx, &ev); err != nil {
			return nil, "", err
		}
		out = append(out, event.ListedBatch{Event: ev, DisplayName: op.displayName, Model: op.model, CreateTime: op.metadata.CreateTime})
	}
	return out, next, nil
}

// checkAPIName accepts only names already in API form (see Fetch).
func checkAPIName(kind opname.Kind, apiName string) (opname.Name, error) {
	n, err := opname.Normalize(apiName, kind)
	if err != nil {
		return n, fmt.Errorf("gemini: fetch: %w", err)
	}
	if n.APIName != apiName {
		return n, fmt.Errorf("gemini: fetch: %w %q: want the API name %q", opname.ErrInvalidName, apiName, n.APIName)
	}
	if n.Kind == opname.KindBatch && !strings.HasPrefix(apiName, "batches/") {
		return n, fmt.Errorf("gemini: fetch: %w %q: only batches/ID is served by the Gemini API (Vertex batch jobs are not)", opname.ErrInvalidName, apiName)
	}
	return n, nil
}

// noSDKRetries turns the genai SDK's own retries off for one request, so
// the Fetcher's loop is the only one and call counts stay exact even when a
// caller-supplied client sets HTTPOptions.RetryOptions. A fresh value per
// call: the SDK writes into the options it is given.
func noSDKRetries() *genai.HTTPOptions {
	one := int32(1)
	return &genai.HTTPOptions{RetryOptions: &genai.HTTPRetryOptions{Attempts: &one}}
}

// call runs fn with retries on transient failures. name labels errors.
// Each transient failure is a ready *TransientError, so the one that uses
// up the attempts is returned as it is.
func (f *Fetcher) call(ctx context.Context, name string, fn func(context.Context) error) error {
	var last error
	calls, lastCode := 0, 0
	gaveUp := func(err error) error {
		return &TransientError{Name: name, Attempts: calls, Code: lastCode, Err: withCause(err, last), gaveUp: true}
	}
	// After: a 429's RetryInfo.retryDelay (or a Retry-After) is waited
	// out, never undercut by the backoff, unless it is over MaxWait
	// (MayWait); Now: within the caller's deadline, so a delay the pass
	// cannot afford ends the loop at once instead of sleeping into a
	// cancelled context. After runs just before MayWait in the loop.
	var asked time.Duration
	r := retry.Retrier{MaxAttempts: f.maxAttempts, Delay: f.backoff, Sleep: f.sleep, Retryable: retryAgain,
		After:   func(err error) time.Duration { asked = serverDelay(err, f.now()); return asked },
		MayWait: func(time.Duration) bool { return asked <= f.maxWait },
		Now:     f.now}
	_, err := r.Do(ctx, func(ctx context.Context) error {
		if err := ctx.Err(); err != nil {
			return gaveUp(err)
		}
		if f.wait != nil {
			if err := f.wait(ctx); err != nil {
				return gaveUp(err)
			}
		}
		calls++
		err := fn(ctx)
		if err == nil {
			return nil
		}
		code := statusCode(err)
		if ctxErr := ctx.Err(); ctxErr != nil {
			// The failure may just be the cancellation showing through.
			last, lastCode = err, code
			return gaveUp(ctxErr)
		}
		if kerr, ok := asKeyError("get "+name, err); ok {
			return kerr
		}
		switch {
		case code == http.StatusNotFound:
			return fmt.Errorf("gemini: get %s: %w: %w", name, ErrNotFound, err)
		case !retryable(code, err):
			return fmt.Errorf("gemini: get %s: %w", name, err)
		}
		last, lastCode = err, code
		return &TransientError{Name: name, Attempts: calls, Code: code, Err: err}
	})
	if we := (*retry.WaitError)(nil); errors.As(err, &we) {
		return gaveUp(we.Err)
	}
	if be := (*retry.BudgetError)(nil); errors.As(err, &be) {
		// The last *TransientError, with why no further try was made.
		return &TransientError{Name: name, Attempts: calls, Code: lastCode,
			Err: fmt.Errorf("%w (the next try, in %v, would pass the caller's deadline)", last, be.Wait)}
	}
	if asked > f.maxWait && retryAgain(err) {
		return &TransientError{Name: name, Attempts: calls, Code: lastCode,
			Err: fmt.Errorf("%w (Gemini asked to wait %v, over the %v a fetch waits)", last, asked, f.maxWait)}
	}
	return err
}

// retryAgain: only a transient failure is retried, and not once the
// context has ended.
func retryAgain(err error) bool {
	var te *TransientError
	return errors.As(err, &te) && !te.gaveUp
}

// withCause wraps the context error and, when there was one, the failure
// that was being retried.
func withCause(ctxErr, last error) error {
	if last == nil {
		return ctxErr
	}
	return fmt.Errorf("%w (last failure: %w)", ctxErr, last)
}

// scrub keeps the API key out of error strings whatever layer put it there
// (an SDK echoing its config, a proxy echoing headers), also one cut short
// by a bounded error text (redact.Mask). The chain is kept for
// errors.Is/As.
func scrub(err error, key string) error {
	if err == nil || key == "" {
		return err
	}
	msg := err.Error()
	masked := redact.Mask(msg, key)
	if masked == msg {
		return err
	}
	return &redactedError{msg: masked, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
