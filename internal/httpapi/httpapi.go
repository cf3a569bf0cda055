// Package httpapi holds the HTTP handlers of the functions (CONTRACT.md §3–§5)
// and GET /healthz. They are thin: verify and parse at the edge, then hand
// the event to the one ingest door (or run a reconcile pass) and translate
// its answer into the contract's status codes. Every JSON answer is written
// by one helper, reply.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/fetcherr"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/register"
	"github.com/lrosink/lrosink/internal/webhook"
)

// Door is the ingest door as the Webhook and Register functions use it.
type Door interface {
	Ingest(ctx context.Context, ev event.Event) (ingest.Result, error)
}

// Verifier checks a delivery's signature on the raw body.
type Verifier interface {
	Verify(ctx context.Context, h http.Header, body []byte) (webhook.Verified, error)
}

// Answer is the JSON body of every answer.
type Answer struct {
	Outcome   string `json:"outcome"`
	Reason    string `json:"reason"`
	Operation string `json:"operation"`
	// Detail explains, in words, a refusal the caller can fix (every 400);
	// Reason stays the stable label.
	Detail string `json:"detail,omitempty"`
}

// unreadableBodyDetail is the detail of a 400 unreadable-body.
const unreadableBodyDetail = "the request body could not be read: malformed chunked framing, or the connection broke mid-body"

// readBody reads at most max bytes. A body it cannot take is named by the
// kind to answer (body-too-large, unreadable-body, or deadline-exceeded
// when a read deadline cut it), with why, for the log; the caller answers
// it (bodyAnswer), so that the Webhook function logs and counts it as
// every other answer.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, kind, error) {
	if r.ContentLength > max {
		return nil, kindBodyTooLarge, fmt.Errorf("Content-Length %d is over the %d-byte limit", r.ContentLength, max)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, kindBodyTooLarge, fmt.Errorf("body over the %d-byte limit", max)
	case errors.Is(err, os.ErrDeadlineExceeded):
		// A slow sender, or a slow network: not a bad request. 503 asks a
		// real sender to try again.
		return nil, kindDeadlineExceeded, fmt.Errorf("read body: %w", err)
	case err != nil:
		return nil, kindUnreadableBody, fmt.Errorf("read body: %w", err)
	}
	return body, "", nil
}

// bodyAnswer is the answer to a body readBody refused with kind k.
func bodyAnswer(k kind) (int, Answer) {
	detail := ""
	if k == kindUnreadableBody {
		// Fixed words: the read error is no business of the sender's, and
		// the body is never quoted.
		detail = unreadableBodyDetail
	}
	return answerOf(k, "", detail)
}

// methodPOST reports whether r is a POST. Otherwise it sets Allow for the
// 405 method-not-allowed the caller answers.
func methodPOST(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodPost {
		return true
	}
	w.Header().Set("Allow", http.MethodPost)
	return false
}

// ingestAnswer maps the door's result to a status and answer: a success is
// 200 with the door's outcome; an error is answered by its kind.
func ingestAnswer(res ingest.Result, err error) (int, Answer) {
	if err == nil {
		return http.StatusOK, Answer{Outcome: string(res.Outcome), Reason: res.Label(), Operation: res.Operation}
	}
	var invalid *event.InvalidError
	if errors.As(err, &invalid) {
		return answerOf(kind(invalid.Reason), "", invalid.Error())
	}
	return answerOf(doorKind(err), res.Operation, "")
}

// doorKind names a door error other than an invalid event.
func doorKind(err error) kind {
	switch {
	case errors.Is(err, ingest.ErrClaimMissing):
		return kindClaimMissing
	case errors.Is(err, ingest.ErrRecalled):
		// Whatever a recent confirmation answered 503 for (a 404 inside
		// the window, a failure), said again without a Gemini call.
		return kindRecalled
	case errors.Is(err, fetcherr.ErrBudgetSpent):
		// Checked before ErrNotConfirmed, which wraps it.
		return kindBudgetSpent
	case errors.Is(err, ingest.ErrNotFoundYet):
		return kindNotFoundYet
	case errors.Is(err, ingest.ErrVideoModelUnknown):
		// A bare operations/ID that Gemini cannot be asked about: 503 so
		// Gemini redelivers (a registration with the model path settles it).
		return kindVideoModelUnknown
	case errors.Is(err, ingest.ErrNotConfirmed):
		// A hint's (v1a, JWT) terminal could not be checked with Gemini; the
		// error (logged by the door) says why. Transient: Gemini is busy or
		// down; otherwise e.g. a rejected API key.
		if fetcherr.KindOf(err) == fetcherr.Transient {
			return kindGeminiUnavailable
		}
		return kindGeminiError
	case errors.Is(err, ingest.ErrSideEffect):
		return kindSideEffectFailed
	case errors.Is(err, ingest.ErrStopping):
		return kindStopping
	default:
		return kindLedgerUnavailable
	}
}

// WebhookOption adjusts the Webhook function.
type WebhookOption func(*webhookOptions)

type webhookOptions struct {
	deadline      time.Duration
	signatureHint string
	log           DeliveryLog
	now           func() time.Time
}

// WithSignatureHint sets the detail of a 401 no-matching-signature: serve,
// signing with its generated dev secret, says where that secret is, since a
// sender with an older secret otherwise gets no clue.
func WithSignatureHint(detail string) WebhookOption {
	return func(o *webhookOptions) { o.signatureHint = detail }
}

// DeliveryLog is where the Webhook function reports every delivery after
// answering it (deliverylog.Log): verified ones per operation, rejected
// ones (400, 401, 413) by reason. Neither call may block.
type DeliveryLog interface {
	Delivery(opID string, e deliverylog.Entry)
	Rejected(at time.Time, deliveryID, reason string, status int)
}

// WithDeliveryLog reports every delivery to l, stamped with now (time.Now
// when nil).
func WithDeliveryLog(l DeliveryLog, now func() time.Time) WebhookOption {
	return func(o *webhookOptions) {
		o.log = l
		if now != nil {
			o.now = now
		}
	}
}

// WithDeadline sets how long from its arrival a delivery may take to send
// its body and be done by the ingest door before it is answered 503
// deadline-exceeded (webhook.DefaultDeadline when not given or not
// positive).
func WithDeadline(d time.Duration) WebhookOption {
	return func(o *webhookOptions) {
		if d > 0 {
			o.deadline = d
		}
	}
}

// Webhook returns the Webhook function (CONTRACT.md §3). A delivery whose
// body has not arrived, or that the ingest door has not finished, within
// the deadline is answered 503 deadline-exceeded with Retry-After; the
// door's work goes on detached.
func Webhook(door Door, v Verifier, log *slog.Logger, maxBody int64, opts ...WebhookOption) http.Handler {
	o := webhookOptions{deadline: webhook.DefaultDeadline, now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	claims := &claimNames{log: log}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		received, start := o.now(), time.Now()
		status, a, au := webhookAnswer(ctx, w, r, door, v, maxBody, claims, start.Add(o.deadline))
		if a.Reason == webhook.ReasonNoMatchingSignature && o.signatureHint != "" {
			a.Detail = o.signatureHint
		}
		if o.log != nil {
			// After the answer: the log never delays it (the recorder
			// only queues).
			defer func() { noteDelivery(o.log, r, received, time.Since(start), status, a, au) }()
		}
		level := slog.LevelInfo
		switch {
		case a.Reason == string(kindStopping), a.Reason == string(kindNotFoundYet), a.Reason == string(kindBudgetSpent),
			a.Reason == string(kindRecalled):
			// Every deploy and scale-in stops instances; Gemini may not
			// know its operation yet; the hint budget is spent for now; an
			// answer from memory repeats one already logged at its level:
			// expected, each settled by the redelivery, so not an ERROR.
			level = slog.LevelWarn
		case status >= 500:
			level = slog.LevelError
		case status >= 400:
			level = slog.LevelWarn
		}
		// webhook-id is an opaque delivery id, safe to log; the signature
		// and body are not logged.
		// auth is how the delivery was authenticated (v1, v1a, jwt; empty
		// when it was not): v1a and jwt deliveries are hints. A refusal's
		// detail (entry counts, the JWKS error, the body's size or read
		// error) is for operators only: it is built from fixed text and
		// quoted, truncated values, never a signature, a secret or the
		// body, and is not put in the answer.
		// Typed attributes (LogAttrs), as the door's line: one line per
		// delivery, and the key-value form boxes every value.
		// event is the delivered type (once the envelope parsed) and
		// latency_ms the time to this answer: with them the line is the
		// delivery's whole story, as serve's terminal stream shows it
		// (logging.NewText).
		attrs := make([]slog.Attr, 0, 9)
		attrs = append(attrs, slog.Int("status", status), slog.String("outcome", a.Outcome), slog.String("reason", a.Reason),
			slog.String("operation", a.Operation), slog.String("delivery_id", truncate(r.Header.Get(webhook.HeaderID), 128)),
			slog.String("auth", au.method))
		if au.status != "" {
			attrs = append(attrs, slog.String("event", au.status))
		}
		attrs = append(attrs, slog.Int64("latency_ms", time.Since(start).Milliseconds()))
		if au.err != nil {
			attrs = append(attrs, slog.String("detail", au.err.Error()))
		}
		log.LogAttrs(ctx, level, "webhook answer", attrs...)
		reply(w, status, a)
	})
}

// errDeadline is the cause of a webhook context that ran out of time.
var errDeadline = errors.New("webhook deadline exceeded")

// auth is what verification established, for the log line: the method, or
// why the delivery was refused.
type auth struct {
	method string
	err    error
	// status is the delivered event type (set once the envelope parsed).
	status string
}

// noteDelivery reports one answered delivery to the delivery log. A
// delivery refused before it was trusted (400, 401, 413) names nothing:
// only its webhook-id and the reason are kept. 413 is among them because
// it may be a real delivery over LROSINK_MAX_BODY, which Gemini retries
// and then loses: the operator must see it. A 405 is no delivery. A
// verified delivery is logged on its operation; one that named none (an
// unknown event type) is counted only.
func noteDelivery(l DeliveryLog, r *http.Request, at time.Time, latency time.Duration, status int, a Answer, au auth) {
	id := truncate(r.Header.Get(webhook.HeaderID), ledger.MaxDeliveryIDBytes)
	if au.method == "" || (a.Outcome == "rejected" && a.Operation == "") {
		switch status {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusRequestEntityTooLarge:
			l.Rejected(at, id, a.Reason, status)
		}
		return
	}
	opID := ""
	if n, err := opname.Normalize(a.Operation, opname.KindUnknown); a.Operation != "" && err == nil {
		opID, _ = opname.DocID(n.Key())
	}
	l.Delivery(opID, deliverylog.Entry{At: at, Source: deliverylog.SourceWebhook, DeliveryID: id, Status: au.status,
		Auth: au.method, Outcome: a.Outcome, Reason: a.Reason, Answer: status, Latency: latency})
}

// webhookAnswer answers one request, which must be answered by deadline.
func webhookAnswer(ctx context.Context, w http.ResponseWriter, r *http.Request, door Door, v Verifier, maxBody int64, claims *claimNames, deadline time.Time) (int, Answer, auth) {
	// The deadline runs from the request's arrival: the sender counts a
	// held connection as a failed delivery anyway.
	ctx, cancel := context.WithDeadlineCause(ctx, deadline, errDeadline)
	defer cancel()
	if !methodPOST(w, r) {
		status, a := answerOf(kindMethodNotAllowed, "", "")
		return status, a, auth{}
	}
	// It bounds the body's arrival too: the servers set no ReadTimeout, so
	// a sender trickling its body would hold the handler for ever. Where
	// the connection cannot take a deadline (ErrNotSupported) the read
	// stays unbounded, as before.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(deadline)
	body, k, err := readBody(w, r, maxBody)
	if k != "" {
		// The deadline stays: it also bounds the server's reading of what
		// is left of the body before it answers.
		switch {
		case k == kindDeadlineExceeded:
			err = fmt.Errorf("body not received within the deadline: %w", err)
		case k == kindUnreadableBody && cutShort(ctx) == kindSenderGone:
			// The connection ended mid-body (the server cancels the
			// request then): a sender that left, not a body we refuse.
			k = kindSenderGone
		}
		status, a := bodyAnswer(k)
		return status, a, auth{err: err}
	}
	// Lifted once the body is in: the server's background read, which
	// watches for the sender hanging up, would time out at the deadline and
	// cancel the request's context, and an answer cut by our deadline would
	// then read as sender-gone.
	_ = rc.SetReadDeadline(time.Time{})
	verified, err := v.Verify(ctx, r.Header, body)
	if err != nil {
		var verr *webhook.Error
		if errors.As(err, &verr) {
			k := kind(verr.Reason)
			if k == webhook.ReasonJWKSUnavailable && cutShort(ctx) == kindSenderGone {
				// It stopped waiting for the key set because the sender
				// left: the JWKS did not fail.
				k = kindSenderGone
			}
			status, a := answerOf(k, "", "")
			return status, a, auth{err: verr}
		}
		status, a := answerOf(kindInvalidSignature, "", "")
		return status, a, auth{}
	}
	if verified.Method == webhook.MethodJWT {
		claims.note(ctx, verified.Claims)
	}
	ev, err := webhook.Parse(body, verified)
	var bad *webhook.BadEnvelopeError
	switch {
	case errors.Is(err, webhook.ErrUnknownType):
		status, a := answerOf(kindUnknownEventType, "", "")
		return status, a, auth{method: verified.Method}
	case errors.As(err, &bad):
		// The label is stable (CONTRACT.md §3); what is wrong goes in detail.
		status, a := answerOf(kindBadEnvelope, "", bad.Reason)
		return status, a, auth{method: verified.Method}
	case err != nil:
		status, a := answerOf(kindBadEnvelope, "", err.Error())
		return status, a, auth{method: verified.Method}
	}
	// Only a v1 signature binds a delivery to this deployment (the secret
	// is ours). A JWT does not cover the body, and a v1a key is Google's,
	// shared by every Gemini project: a genuine delivery about another
	// project's operation can be replayed here. Both are hints, whose
	// terminal states the door confirms with Gemini under our key.
	ev.Hint = verified.Method == webhook.MethodJWT || verified.Method == webhook.MethodV1A
	// A v1a body is Google's: the intent it names is used once Gemini has
	// confirmed the operation (CONTRACT.md §5). A JWT covers no body.
	ev.SignedBody = verified.Method == webhook.MethodV1A
	au := auth{method: verified.Method, status: ev.GeminiStatus}
	res, err := door.Ingest(ctx, ev)
	if err != nil && res.Operation == "" {
		// A door error before the door named the operation (our deadline,
		// the sender gone, stopping, a ledger down): the operator still
		// wants to know which.
		if n, nerr := opname.Normalize(ev.Name, ev.Kind); nerr == nil {
			res.Operation = n.Canonical
		}
	}
	if k := cutShort(ctx); err != nil && k != "" {
		// No ledger failure: the door's work goes on detached from this
		// request (it completes, or releases its claim, as it would have);
		// the redelivery finds it done or joins it.
		status, a := answerOf(k, res.Operation, "")
		return status, a, au
	}
	status, a := ingestAnswer(res, err)
	return status, a, au
}

// cutShort names why the webhook's context ctx ended: our deadline
// (deadline-exceeded), or else the request's own context, cancelled when
// the sender hung up (or the server closed its connection): sender-gone.
// "" while it runs.
func cutShort(ctx context.Context) kind {
	switch {
	case ctx.Err() == nil:
		return ""
	case errors.Is(context.Cause(ctx), errDeadline):
		return kindDeadlineExceeded
	default:
		return kindSenderGone
	}
}

// claimNames logs the claim names of the first verified dynamic-webhook
// token, once per handler: Gemini does not document its claim set, and a
// claim binding the token to the body would let JWT deliveries be applied
// as delivered. Values are never logged (a subject or an email is personal
// data, and the token is a credential).
type claimNames struct {
	log  *slog.Logger
	once sync.Once
}

// Bounds on what an unknown token can put in the log line.
const (
	maxClaimNames   = 64
	maxClaimNameLen = 64
)

func (c *claimNames) note(ctx context.Context, claims map[string]any) {
	c.once.Do(func() {
		names := slices.Sorted(maps.Keys(claims))
		if len(names) > maxClaimNames {
			names = names[:maxClaimNames]
		}
		for i, n := range names {
			names[i] = truncate(n, maxClaimNameLen)
		}
		c.log.InfoContext(ctx, "jwt claim names", "claim_names", names, "claim_count", len(claims))
	})
}

// RegisterRequest is the body of POST /Register (CONTRACT.md §5): a
// registration (name, kind, metadata), an intent's record (intent, kind,
// model, display_name, metadata; no name) or a bind (name and intent).
type RegisterRequest struct {
	Name        string         `json:"name"`
	Kind        string         `json:"kind"`
	Metadata    map[string]any `json:"metadata"`
	Intent      string         `json:"intent"`
	Model       string         `json:"model"`
	DisplayName string         `json:"display_name"`
}

// registerMaxBody bounds a registration: a name, a kind and metadata. It is
// twice the metadata bound, so that any metadata the ledger keeps can be
// registered, and metadata somewhat over it is answered 400
// invalid-metadata with the reason rather than 413.
const registerMaxBody = 2 * ledger.MaxMetadataBytes

// Intents is the intent path as POST /Register speaks it
// (register.Intents).
type Intents interface {
	Record(ctx context.Context, in register.Intent) (register.IntentStatus, bool, error)
	Bind(ctx context.Context, key, name string) (register.IntentStatus, register.Result, error)
}

// RegisterOption adjusts the Register function.
type RegisterOption func(*registerOptions)

type registerOptions struct{ intents Intents }

// WithIntents serves the intent protocol (record, bind) over in; without
// it an intent request is answered 400 invalid-intent.
func WithIntents(in Intents) RegisterOption { return func(o *registerOptions) { o.intents = in } }

// IntentAnswer is the answer to an intent request: Answer plus the
// intent's status.
type IntentAnswer struct {
	Answer
	Intent *IntentStatus `json:"intent,omitempty"`
}

// IntentStatus is the status object of CONTRACT.md §5; the bound fields
// are absent while unbound.
type IntentStatus struct {
	Key         string         `json:"key"`
	Kind        string         `json:"kind"`
	Model       string         `json:"model"`
	DisplayName string         `json:"display_name"`
	Metadata    map[string]any `json:"metadata"`
	State       string         `json:"state"`
	CreatedAt   time.Time      `json:"created_at"`
	GraceUntil  time.Time      `json:"grace_until"`
	Name        string         `json:"name,omitempty"`
	APIName     string         `json:"api_name,omitempty"`
	BoundAt     *time.Time     `json:"bound_at,omitempty"`
	BoundBy     string         `json:"bound_by,omitempty"`
}

func intentStatus(st register.IntentStatus) *IntentStatus {
	out := &IntentStatus{Key: st.Key, Kind: st.Kind, Model: st.Model, DisplayName: st.DisplayName, Metadata: st.Metadata,
		State: st.State, CreatedAt: st.CreatedAt, GraceUntil: st.GraceUntil, Name: st.Name, APIName: st.APIName, BoundBy: st.BoundBy}
	if !st.BoundAt.IsZero() {
		at := st.BoundAt
		out.BoundAt = &at
	}
	return out
}

// Register returns the Register function: 201 created, 200 already known
// (state untouched; the metadata keys it lacked are merged), 400 invalid. Of
// concurrent registrations of one name exactly one answers 201. With
// WithIntents it speaks the intent protocol too (CONTRACT.md §5).
func Register(door Door, log *slog.Logger, opts ...RegisterOption) http.Handler {
	var o registerOptions
	for _, f := range opts {
		f(&o)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !methodPOST(w, r) {
			replyKind(w, kindMethodNotAllowed, "")
			return
		}
		// A refused body is logged as every answer is (WARNING: the
		// caller's to fix), so that serve's stream shows it.
		refused := func(status int, a Answer) {
			log.WarnContext(r.Context(), "register answer", "status", status, "outcome", a.Outcome, "reason", a.Reason, "detail", a.Detail)
			reply(w, status, a)
		}
		body, k, _ := readBody(w, r, registerMaxBody)
		if k != "" {
			refused(bodyAnswer(k))
			return
		}
		req, k, detail := decodeRegister(body)
		if k != "" {
			refused(answerOf(k, "", detail))
			return
		}
		if req.Intent != "" || req.Model != "" || req.DisplayName != "" {
			status, a := intentRequest(r.Context(), o.intents, req)
			log.InfoContext(r.Context(), "register answer", "status", status, "outcome", a.Outcome, "reason", a.Reason,
				"operation", a.Operation, "intent", truncate(req.Intent, register.MaxKeyLen))
			reply(w, status, a)
			return
		}
		// A settled operation's owed results message is left to the next
		// reconcile pass: registering never publishes (the Register
		// service may not publish on Cloud Run, terraform/iam.tf), and a
		// submitter's call is no place to wait on the sink.
		res, err := register.Register(r.Context(), door, register.Request{Name: req.Name, Kind: req.Kind, Metadata: req.Metadata, LeaveOwed: true})
		// An invalid registration is answered by ingestAnswer from its kind
		// (invalid-name, invalid-kind, invalid-metadata), as the webhook's.
		status, a := registerAnswer(res, err)
		log.InfoContext(r.Context(), "register answer", "status", status, "outcome", a.Outcome, "reason", a.Reason, "operation", a.Operation)
		reply(w, status, a)
	})
}

// registerAnswer is the answer to a registration (and a bind): 201 created,
// 200 known, or the error's.
func registerAnswer(res register.Result, err error) (int, Answer) {
	status, a := ingestAnswer(res.Result, err)
	if status == http.StatusOK {
		if res.Created {
			status, a.Outcome = http.StatusCreated, "created"
		} else {
			a.Outcome, a.Reason = "known", "state-untouched"
		}
	}
	return status, a
}

// intentRequest answers an intent's record (no name) or bind (a name).
func intentRequest(ctx context.Context, in Intents, req RegisterRequest) (int, IntentAnswer) {
	refuse := func(k kind, detail string) (int, IntentAnswer) {
		status, a := answerOf(k, "", detail)
		return status, IntentAnswer{Answer: a}
	}
	switch {
	case in == nil:
		return refuse(event.ReasonInvalidIntent, "this Register function keeps no intents")
	case req.Intent == "":
		return refuse(event.ReasonInvalidIntent, "model and display_name belong to an intent's record: give its key as \"intent\"")
	case req.Name == "":
		st, created, err := in.Record(ctx, register.Intent{Key: req.Intent, Kind: req.Kind, Model: req.Model,
			DisplayName: req.DisplayName, Metadata: req.Metadata})
		if err != nil {
			status, a := ingestAnswer(ingest.Result{}, err)
			return status, IntentAnswer{Answer: a}
		}
		a := IntentAnswer{Answer: Answer{Outcome: "intent-known", Reason: "same-fields"}, Intent: intentStatus(st)}
		if created {
			a.Outcome, a.Reason = "intent-recorded", "intent-recorded"
			return http.StatusCreated, a
		}
		return http.StatusOK, a
	case req.Metadata != nil:
		return refuse(event.ReasonInvalidMetadata, "a bind carries no metadata: the intent's is used")
	case req.Kind != "" || req.Model != "" || req.DisplayName != "":
		return refuse(event.ReasonInvalidIntent, "a bind carries only name and intent: the intent's kind, model and display name are used")
	}
	st, res, err := in.Bind(ctx, req.Intent, req.Name)
	status, a := registerAnswer(res, err)
	out := IntentAnswer{Answer: a}
	if err == nil {
		out.Intent = intentStatus(st)
	}
	return status, out
}

// registerField is how one field of a Register body is read: the JSON
// type it needs and the reason a value of another type is refused with
// (CONTRACT.md §5), and where it goes.
type registerField struct {
	reason kind
	object bool // a JSON object (metadata); else a string
	set    func(r *RegisterRequest, s string)
}

// registerFields are the fields of a Register body, by their exact JSON
// key. Any other key is ignored, as in every body lrosink reads.
var registerFields = map[string]registerField{
	"name":         {reason: event.ReasonInvalidName, set: func(r *RegisterRequest, s string) { r.Name = s }},
	"kind":         {reason: event.ReasonInvalidKind, set: func(r *RegisterRequest, s string) { r.Kind = s }},
	"metadata":     {reason: event.ReasonInvalidMetadata, object: true},
	"intent":       {reason: event.ReasonInvalidIntent, set: func(r *RegisterRequest, s string) { r.Intent = s }},
	"model":        {reason: event.ReasonInvalidIntent, set: func(r *RegisterRequest, s string) { r.Model = s }},
	"display_name": {reason: event.ReasonInvalidIntent, set: func(r *RegisterRequest, s string) { r.DisplayName = s }},
}

// decodeRegister reads a Register body field by field, numbers as written
// (a job id over 2^53 must not become a float). A body that is no UTF-8
// JSON object is invalid-json; a field's value of the wrong JSON type, or
// one nested past the decoder's depth, is refused with its field's reason
// (registerFields), with a detail that names the field and the JSON type
// it needs, never a Go type. null is a field's absence.
func decodeRegister(body []byte) (RegisterRequest, kind, string) {
	var req RegisterRequest
	if !utf8.Valid(body) {
		// encoding/json would store U+FFFD in its place: the caller's
		// metadata would not come back as sent.
		return req, kindInvalidJSON, "the body is not valid UTF-8"
	}
	if t := jsonType(body); t != jsonObject {
		return req, kindInvalidJSON, fmt.Sprintf("the body must be a JSON object %s, not %s", registerShape, t)
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if _, err := d.Token(); err != nil { // the '{' jsonType saw
		return req, kindInvalidJSON, syntaxDetail(err)
	}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return req, kindInvalidJSON, syntaxDetail(err)
		}
		key, _ := tok.(string) // an object's key is always a string
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			if f, ok := registerFields[key]; ok && strings.Contains(err.Error(), "exceeded max depth") {
				return req, f.reason, fmt.Sprintf("%q nests deeper than JSON decoding allows (10000 levels)", key)
			}
			return req, kindInvalidJSON, syntaxDetail(err)
		}
		f, ok := registerFields[key]
		if !ok {
			continue
		}
		if k, detail := f.read(&req, key, raw); k != "" {
			return req, k, detail
		}
	}
	if _, err := d.Token(); err != nil { // the closing '}'
		return req, kindInvalidJSON, syntaxDetail(err)
	}
	if _, err := d.Token(); err != io.EOF {
		return req, kindInvalidJSON, "the body holds more than one JSON value"
	}
	return req, "", ""
}

// read stores the field key's value raw in req, or names why it cannot.
func (f registerField) read(req *RegisterRequest, key string, raw json.RawMessage) (kind, string) {
	t := jsonType(raw)
	switch {
	case t == "null":
		return "", ""
	case f.object && t == jsonObject:
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&req.Metadata); err != nil {
			// raw decoded once already: not reached but for a decoder limit.
			return f.reason, fmt.Sprintf("%q could not be read as a JSON object", key)
		}
		return "", ""
	case f.object:
		return f.reason, fmt.Sprintf("%q must be a JSON object, not %s", key, t)
	case t == jsonString:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return f.reason, fmt.Sprintf("%q could not be read as a JSON string", key)
		}
		f.set(req, s)
		return "", ""
	default:
		return f.reason, fmt.Sprintf("%q must be a string, not %s", key, t)
	}
}

// jsonType names the JSON type of the value b starts with, as a detail
// says it ("a JSON array", "null", ...).
func jsonType(b []byte) string {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return "an empty body"
	}
	switch c := b[0]; {
	case c == '{':
		return jsonObject
	case c == 'n':
		return "null"
	case c == '"':
		return jsonString
	case c == '[':
		return "a JSON array"
	case c == 't' || c == 'f':
		return "a JSON boolean"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a JSON number"
	default:
		return "no JSON value"
	}
}

// The JSON types decodeRegister compares jsonType's answer with.
const (
	jsonObject = "a JSON object"
	jsonString = "a JSON string"
)

// syntaxDetail says why a body is not JSON, in the decoder's words (they
// name bytes and offsets, never a Go type).
func syntaxDetail(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("the body is not a JSON object (at byte %d: %s)", se.Offset, se.Error())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the body is not a JSON object: it ends before its value does"
	}
	return "the body is not a JSON object"
}

// registerShape is what a Register body holds, for details.
const registerShape = `{"name","kind","metadata"} (or an intent's {"intent","kind","model","display_name","metadata"}, or {"name","intent"})`

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
