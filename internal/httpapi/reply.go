package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/lrosink/lrosink/internal/action"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/webhook"
)

// RetryAfterSeconds is what a 503 asks the sender to wait.
const RetryAfterSeconds = 30

// reply writes every JSON answer the functions give (CONTRACT.md §3–§5):
// the status, body as JSON and, on a 503, Retry-After, so that Gemini and
// Cloud Scheduler retry after it. Headers particular to one answer (Allow,
// WWW-Authenticate) are set by the caller before.
func reply(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// health is GET /healthz's body.
type health struct {
	Status string `json:"status"`
}

// Healthz answers {"status":"ok"}: the process serves HTTP. It checks
// nothing else, so a slow ledger never takes the instance out of service.
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, health{Status: "ok"})
	})
}

// kind is what an answer reports: a refusal or a failure, named by the
// stable reason label it is answered with (CONTRACT.md §3–§5). Errors carry
// their kind (webhook.Error.Reason, event.InvalidError.Reason); a door error
// is named by ingestAnswer.
type kind string

// The kinds httpapi itself decides (the webhook and invalid-input kinds are
// their packages' Reason constants).
const (
	kindBodyTooLarge      kind = "body-too-large"
	kindUnreadableBody    kind = "unreadable-body"
	kindMethodNotAllowed  kind = "method-not-allowed"
	kindInvalidSignature  kind = "invalid-signature"
	kindUnknownEventType  kind = "unknown-event-type"
	kindBadEnvelope       kind = "bad-envelope"
	kindInvalidJSON       kind = "invalid-json"
	kindClaimMissing      kind = "claim-missing"
	kindVideoModelUnknown kind = "video-model-unknown"
	kindGeminiError       kind = "gemini-error"
	kindGeminiUnavailable kind = "gemini-unavailable"
	kindBudgetSpent       kind = "gemini-budget-spent"
	kindNotFoundYet       kind = "not-found-yet"
	kindRecalled          kind = "answered-from-memory"
	kindSideEffectFailed  kind = "side-effect-failed"
	kindLedgerUnavailable kind = "ledger-unavailable"
	kindDeadlineExceeded  kind = "deadline-exceeded"
	kindSenderGone        kind = "sender-gone"
	kindStopping          kind = "stopping"
	kindMissingToken      kind = "missing-token"
	kindInvalidToken      kind = "invalid-token"
	// A browser's POST from another site (SameOrigin).
	kindCrossOrigin kind = "cross-origin"
	// A /Reconcile push whose envelope or shard request does not parse.
	kindBadShardRequest kind = "bad-shard-request"
	// A check now whose fetch failed for good, or whose answer the door
	// failed on (the reconciler's last_check labels).
	kindFetchError  kind = "fetch-error"
	kindIngestError kind = "ingest-error"
)

// answerSpec is how one kind is answered.
type answerSpec struct {
	Status  int
	Outcome string
}

// answers is the one table from an answer's kind to its HTTP status
// (CONTRACT.md §3–§5): every refusal or failure of Webhook, Register,
// Reconcile's 405 and the admin token is looked up here, so a label is
// answered with one status wherever it is decided. Read-only.
var answers = map[kind]answerSpec{
	kindBodyTooLarge:     {http.StatusRequestEntityTooLarge, "rejected"},
	kindUnreadableBody:   {http.StatusBadRequest, "rejected"},
	kindMethodNotAllowed: {http.StatusMethodNotAllowed, "rejected"},
	kindMissingToken:     {http.StatusUnauthorized, "rejected"},
	kindInvalidToken:     {http.StatusUnauthorized, "rejected"},
	kindCrossOrigin:      {http.StatusForbidden, "rejected"},

	// Verification (webhook.Error): every failure refuses the delivery,
	// except that a JWKS that could not be fetched leaves it unchecked
	// (it may be valid; Gemini retries after the 503).
	kindInvalidSignature:              {http.StatusUnauthorized, "rejected"},
	webhook.ReasonMissingHeaders:      {http.StatusUnauthorized, "rejected"},
	webhook.ReasonBadTimestamp:        {http.StatusUnauthorized, "rejected"},
	webhook.ReasonTimestampTooOld:     {http.StatusUnauthorized, "rejected"},
	webhook.ReasonTimestampTooNew:     {http.StatusUnauthorized, "rejected"},
	webhook.ReasonNoMatchingSignature: {http.StatusUnauthorized, "rejected"},
	webhook.ReasonNoSecretsConfigured: {http.StatusUnauthorized, "rejected"},
	webhook.ReasonNoJWKSConfigured:    {http.StatusUnauthorized, "rejected"},
	webhook.ReasonBadToken:            {http.StatusUnauthorized, "rejected"},
	webhook.ReasonTokenExpired:        {http.StatusUnauthorized, "rejected"},
	webhook.ReasonTokenNotYetValid:    {http.StatusUnauthorized, "rejected"},
	webhook.ReasonWrongAudience:       {http.StatusUnauthorized, "rejected"},
	webhook.ReasonUnknownKID:          {http.StatusUnauthorized, "rejected"},
	webhook.ReasonJWKSUnavailable:     {http.StatusServiceUnavailable, "error"},

	// The body, once trusted.
	kindUnknownEventType:        {http.StatusOK, "ignored"},
	kindBadEnvelope:             {http.StatusBadRequest, "rejected"},
	kindInvalidJSON:             {http.StatusBadRequest, "rejected"},
	event.ReasonInvalidName:     {http.StatusBadRequest, "rejected"},
	event.ReasonInvalidKind:     {http.StatusBadRequest, "rejected"},
	event.ReasonInvalidMetadata: {http.StatusBadRequest, "rejected"},
	// The intent protocol (CONTRACT.md §5): a bad key or intent field; the
	// key recorded with other fields, or the intent bound to another
	// operation (conflicts); a key never recorded.
	event.ReasonInvalidIntent:        {http.StatusBadRequest, "rejected"},
	event.ReasonIntentMismatch:       {http.StatusConflict, "rejected"},
	event.ReasonIntentBoundElsewhere: {http.StatusConflict, "rejected"},
	event.ReasonIntentUnknown:        {http.StatusNotFound, "rejected"},
	// Reconcile: a push that is no shard request. 400 is a nack to
	// Pub/Sub; the subscription's max delivery attempts end it.
	kindBadShardRequest: {http.StatusBadRequest, "rejected"},
	// Reconcile: an operator's action (CONTRACT.md §4, "Actions") that was
	// refused, nothing done: a bad request, an unknown operation, or one
	// whose state does not allow it. Its failures share the labels below
	// (a check's own: fetch-error, ingest-error).
	action.ReasonInvalidAction:    {http.StatusBadRequest, "refused"},
	action.ReasonUnknownOperation: {http.StatusNotFound, "refused"},
	action.ReasonNotSettled:       {http.StatusConflict, "refused"},
	action.ReasonAlreadySettled:   {http.StatusConflict, "refused"},
	action.ReasonNothingOwed:      {http.StatusConflict, "refused"},
	action.ReasonClaimHeld:        {http.StatusConflict, "refused"},
	action.ReasonNoGeminiKey:      {http.StatusConflict, "refused"},
	kindFetchError:                {http.StatusServiceUnavailable, "error"},
	kindIngestError:               {http.StatusServiceUnavailable, "error"},

	// The door: try again later.
	kindClaimMissing:      {http.StatusServiceUnavailable, "error"},
	kindVideoModelUnknown: {http.StatusServiceUnavailable, "error"},
	kindGeminiError:       {http.StatusServiceUnavailable, "error"},
	kindGeminiUnavailable: {http.StatusServiceUnavailable, "error"},
	// A hint's confirmation found LROSINK_GEMINI_QPS spent: no call made.
	kindBudgetSpent: {http.StatusServiceUnavailable, "error"},
	// Gemini does not know the operation yet (ingest.NotFoundWindow):
	// Gemini redelivers, and the door asks again.
	kindNotFoundYet: {http.StatusServiceUnavailable, "error"},
	// The 503 a recent confirmation gave, answered again from the door's
	// memory with no Gemini call (a 200 from memory keeps its outcome, with
	// this reason).
	kindRecalled:          {http.StatusServiceUnavailable, "error"},
	kindSideEffectFailed:  {http.StatusServiceUnavailable, "error"},
	kindLedgerUnavailable: {http.StatusServiceUnavailable, "error"},
	kindDeadlineExceeded:  {http.StatusServiceUnavailable, "error"},
	// The process is stopping (a deploy, a scale-in): the work goes on and
	// is drained; the redelivery finds it done.
	kindStopping: {http.StatusServiceUnavailable, "error"},
	// The sender hung up before its answer: nobody reads it, but the log
	// line and the status count must not read as an outage (a 503).
	kindSenderGone: {statusSenderGone, "error"},
}

// statusSenderGone answers a request whose sender went away: 499, the
// status Google's APIs pair with CANCELLED (internal/gemini's
// statusCancelled), and what proxies log for a client that closed the
// request. No 4xx/5xx class fits: the request was neither bad nor failed.
const statusSenderGone = 499

// answerOf is the status and answer of kind k about operation op, with an
// optional detail. A kind missing from the table is a bug; it is answered
// 500 rather than with a guessed status.
func answerOf(k kind, op, detail string) (int, Answer) {
	s, ok := answers[k]
	if !ok {
		return http.StatusInternalServerError, Answer{Outcome: "error", Reason: string(k), Operation: op, Detail: detail}
	}
	return s.Status, Answer{Outcome: s.Outcome, Reason: string(k), Operation: op, Detail: detail}
}

// replyKind writes the answer of kind k.
func replyKind(w http.ResponseWriter, k kind, detail string) {
	status, a := answerOf(k, "", detail)
	reply(w, status, a)
}
