// Package config reads lrosink's configuration (CONTRACT.md §2) from the
// environment and validates it at start-up: a bad value fails with one line
// naming the variable, never later at the first request.
package config

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/shard"
	"github.com/lrosink/lrosink/internal/sink"
	"github.com/lrosink/lrosink/internal/urlopen"
	"github.com/lrosink/lrosink/internal/webhook"
)

// Config is the validated configuration.
type Config struct {
	// Store is LROSINK_STORE, e.g. "firestore" or "sqlite:PATH".
	Store             string
	FirestoreDatabase string
	Project           string
	// Results is LROSINK_RESULTS, e.g. "pubsub:projects/P/topics/T",
	// "file:PATH" or "stdout".
	Results        string
	WebhookSecrets []string
	// WebhookPublicKeys are whpk_… Ed25519 keys: when set, the only keys
	// v1a signatures are checked against (the JWKS is not fetched for v1a).
	WebhookPublicKeys []string
	JWKSURL           string
	JWTAudience       string
	// GeminiAPIKey is a secret: never log it.
	GeminiAPIKey   string
	GeminiBaseURL  string
	Grace          time.Duration
	StuckAfter     time.Duration
	ClaimLease     time.Duration
	ReconcileEvery time.Duration
	MaxBody        int64
	// WebhookDeadline bounds how long a webhook request waits for the
	// ingest door; past it the answer is 503 and the work goes on.
	WebhookDeadline time.Duration
	// StoreTimeout bounds every call to a networked store (Firestore).
	StoreTimeout time.Duration
	// ReconcileDeadline is one Reconcile request's budget: the pass stops
	// early within it, keeping time for stuck alerting, and answers what it
	// did. Below Cloud Scheduler's attempt deadline (Terraform's
	// reconcile_attempt_deadline, 300 s), which cuts the connection.
	ReconcileDeadline time.Duration
	// DeliveryLogTTL is how long an operation's delivery log keeps an
	// entry (LROSINK_DELIVERY_LOG_TTL).
	DeliveryLogTTL time.Duration
	// GeminiQPS is LROSINK_GEMINI_QPS: the Gemini requests a second the
	// reconcile passes of the deployment may send in all (0: unlimited);
	// ReconcileShards (LROSINK_RECONCILE_SHARDS) is how many passes run at
	// once, each getting GeminiQPS/ReconcileShards.
	GeminiQPS       float64
	ReconcileShards int
	// FanOutTopic is LROSINK_RECONCILE_FANOUT_TOPIC (projects/P/topics/T):
	// with ReconcileShards > 1 (where it is required), a /Reconcile call
	// without a shard request coordinates: it publishes one shard request
	// per bucket range there, which a push subscription delivers back to
	// /Reconcile, and runs the shared duties itself.
	FanOutTopic string
	// ReconcileURL is LROSINK_RECONCILE_URL (https://…, the Reconcile
	// service's URL): the Console service's actions (Replay, Check now,
	// Publish now) are POSTed there with the Console's own ID token, so
	// that the Console itself never writes. Unset: the console acts in
	// process (serve), or, serving the Console alone, offers no actions.
	ReconcileURL string
	// Retention is LROSINK_RETENTION: how long a settled operation is
	// kept (0: for ever). At least MinRetention.
	Retention time.Duration
	// IntentGrace is LROSINK_INTENT_GRACE: how long an intent may stay
	// bound to no operation before it is alerted (intent-unbound); a
	// retried submission of it is refused meanwhile. At least
	// MinIntentGrace.
	IntentGrace time.Duration
	// AdminToken, when set, is the bearer token /Register and /Reconcile
	// require. A secret: never log it.
	AdminToken string

	// Openers are the schemes this binary can open for Store and Results:
	// Validate checks both against them, internal/app opens them.
	Openers               urlopen.Openers
	FirestoreEmulatorHost string
}

// Defaults differ between `lrosink serve` (embedded) and the container.
type Defaults struct {
	Store   string
	Results string // empty: LROSINK_RESULTS is required
	// Openers are the schemes the binary can open (required).
	Openers urlopen.Openers
}

// Serve is the embedded default of `lrosink serve`; o is cmd/lrosink's set
// of schemes, which adds sqlite: (a package config does not link, so the
// container stays without SQLite).
func Serve(o urlopen.Openers) Defaults {
	return Defaults{Store: "sqlite:lrosink.db", Results: "stdout", Openers: o}
}

// Container is the default of cmd/server (Cloud Run): no sqlite:.
func Container() Defaults { return Defaults{Store: "firestore", Openers: urlopen.Cloud()} }

// DefaultReconcileDeadline is LROSINK_RECONCILE_DEADLINE's default: 30 s
// below Terraform's reconcile_attempt_deadline (300 s), so the answer is
// written before Cloud Scheduler gives up on the request.
const DefaultReconcileDeadline = 270 * time.Second

// DefaultJWKSURL is where Gemini publishes the keys of dynamic webhooks
// (RS256 for the documented JWTs, Ed25519 for the v1a signatures sent live).
const DefaultJWKSURL = "https://generativelanguage.googleapis.com/.well-known/jwks.json"

// Load reads the configuration through getenv (os.Getenv in production).
// Every problem is reported, one line each, in the order of the steps.
func Load(getenv func(string) string, d Defaults) (Config, error) {
	e := &envReader{getenv: getenv}
	c := e.locations(d)
	c.WebhookSecrets = splitSecrets(getenv("LROSINK_WEBHOOK_SECRETS"))
	c.WebhookPublicKeys = splitSecrets(getenv("LROSINK_WEBHOOK_PUBLIC_KEYS"))
	e.fail(c.Validate())
	e.checkURLs(c)
	c.Grace = e.duration("LROSINK_GRACE", 90*time.Second)
	c.StuckAfter = e.duration("LROSINK_STUCK_AFTER", reconcile.DefaultStuckAfter)
	c.ClaimLease = e.duration("LROSINK_CLAIM_LEASE", ingest.DefaultLease)
	c.ReconcileEvery = e.duration("LROSINK_RECONCILE_EVERY", time.Minute)
	c.WebhookDeadline = e.duration("LROSINK_WEBHOOK_DEADLINE", webhook.DefaultDeadline)
	c.StoreTimeout = e.duration("LROSINK_STORE_TIMEOUT", ledger.DefaultCallTimeout)
	c.ReconcileDeadline = e.duration("LROSINK_RECONCILE_DEADLINE", DefaultReconcileDeadline)
	if floor := ClaimLeaseFloor(c.WebhookDeadline); c.ClaimLease < floor {
		e.fail(fmt.Errorf("LROSINK_CLAIM_LEASE: %s is under its floor %s (twice LROSINK_WEBHOOK_DEADLINE, at least 1s): a shorter lease lets a redelivery seize a claim whose holder is still publishing", c.ClaimLease, floor))
	}
	c.DeliveryLogTTL = e.duration("LROSINK_DELIVERY_LOG_TTL", deliverylog.DefaultTTL)
	c.GeminiQPS = e.number("LROSINK_GEMINI_QPS", 0, 0, 1e6)
	// A shard is a range of the fixed buckets: there are no more shards.
	shards := e.number("LROSINK_RECONCILE_SHARDS", 1, 1, shard.Buckets)
	if shards != math.Trunc(shards) {
		e.fail(fmt.Errorf("LROSINK_RECONCILE_SHARDS: %v is not a whole number", shards))
		shards = 1
	}
	c.ReconcileShards = int(shards)
	c.Retention = e.retention()
	c.IntentGrace = e.intentGrace()
	c.AdminToken = e.adminToken()
	c.FanOutTopic = e.fanOutTopic(c)
	c.ReconcileURL = e.reconcileURL()
	c.MaxBody = e.maxBody()
	return c, errors.Join(e.errs...)
}

// ClaimLeaseFloor is the shortest LROSINK_CLAIM_LEASE accepted with the
// given webhook deadline: twice the deadline, and never under 1s. The door's
// work for a webhook is expected to end within the deadline; a lease that
// runs out sooner lets the redelivery Gemini sends after a 503 seize a claim
// whose holder is still at work, and each such seizure is one more results
// message. Twice leaves room for the DONE retries after a slow publish.
func ClaimLeaseFloor(webhookDeadline time.Duration) time.Duration {
	return max(2*webhookDeadline, time.Second)
}

// envReader reads variables and collects what is wrong with them.
type envReader struct {
	getenv func(string) string
	errs   []error
}

func (e *envReader) fail(err error) { e.errs = append(e.errs, err) }

// get returns k's trimmed value, or def when it is unset or blank.
func (e *envReader) get(k, def string) string {
	if v := strings.TrimSpace(e.getenv(k)); v != "" {
		return v
	}
	return def
}

// locations reads where lrosink keeps and sends things, and the
// endpoints and credentials it talks to.
func (e *envReader) locations(d Defaults) Config {
	return Config{
		Store:                 e.get("LROSINK_STORE", d.Store),
		FirestoreDatabase:     e.get("LROSINK_FIRESTORE_DATABASE", "(default)"),
		Project:               e.get("GOOGLE_CLOUD_PROJECT", ""),
		Results:               e.get("LROSINK_RESULTS", d.Results),
		JWKSURL:               e.get("LROSINK_JWKS_URL", DefaultJWKSURL),
		JWTAudience:           e.get("LROSINK_JWT_AUDIENCE", ""),
		GeminiAPIKey:          e.get("GEMINI_API_KEY", ""),
		GeminiBaseURL:         e.get("GOOGLE_GEMINI_BASE_URL", ""),
		Openers:               d.Openers,
		FirestoreEmulatorHost: e.get("FIRESTORE_EMULATOR_HOST", ""),
	}
}

// splitSecrets reads the comma-separated secret list, skipping blanks.
func splitSecrets(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// checkURLs: the JWKS URL is http(s) or file:///path; a Gemini base URL,
// if set, has a host.
func (e *envReader) checkURLs(c Config) {
	if _, err := webhook.ParseJWKSURL(c.JWKSURL); err != nil {
		e.fail(fmt.Errorf("LROSINK_JWKS_URL: %q is not an http(s) URL or file:///path", c.JWKSURL))
	}
	if err := CheckGeminiBaseURL(c.GeminiBaseURL); err != nil {
		e.fail(err)
	}
}

// CheckGeminiBaseURL checks GOOGLE_GEMINI_BASE_URL: unset, or a URL with a
// host. The error names the variable (every command that talks to Gemini
// checks it before it sends anything).
func CheckGeminiBaseURL(s string) error {
	if s == "" {
		return nil
	}
	if u, err := url.Parse(s); err != nil || u.Host == "" {
		return fmt.Errorf("GOOGLE_GEMINI_BASE_URL: %q is not a URL", s)
	}
	return nil
}

// duration reads a positive duration; def when unset, or (with an error)
// when it is not one.
func (e *envReader) duration(k string, def time.Duration) time.Duration {
	v := e.getenv(k)
	if strings.TrimSpace(v) == "" {
		return def
	}
	x, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || x <= 0 {
		e.fail(fmt.Errorf("%s: %q is not a positive duration (e.g. 90s, 10m, 6h)", k, v))
		return def
	}
	return x
}

// MinRetention is LROSINK_RETENTION's floor. A delivery for an operation
// no longer in the ledger is a first sighting again (a new operation, a
// new results message if its claim is gone too), so retention must stay
// far beyond Gemini's 24 h of webhook retries and any replay window. The
// reconciler's adoption, which lists old jobs every pass, skips those
// settled longer ago than it (reconcile.Config.Retention).
const MinRetention = 7 * 24 * time.Hour

// retention reads LROSINK_RETENTION: days ("400d") or a Go duration;
// unset keeps settled operations for ever.
func (e *envReader) retention() time.Duration {
	v := strings.TrimSpace(e.getenv("LROSINK_RETENTION"))
	if v == "" {
		return 0
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(v, "d"); ok {
		var n int
		if n, err = strconv.Atoi(days); err == nil && n > 0 && n <= 100*365 {
			d = time.Duration(n) * 24 * time.Hour
		} else {
			err = errors.New("bad day count")
		}
	} else {
		d, err = time.ParseDuration(v)
	}
	if err != nil || d <= 0 {
		e.fail(fmt.Errorf("LROSINK_RETENTION: %q is not a retention (days such as 400d, or a duration such as 9000h)", v))
		return 0
	}
	if d < MinRetention {
		e.fail(fmt.Errorf("LROSINK_RETENTION: %s is under its floor of 7d: an operation deleted while Gemini may still deliver for it (24 h of retries) or an operator may replay it would be a first sighting again", v))
		return 0
	}
	return d
}

// DefaultIntentGrace is LROSINK_INTENT_GRACE's default
// (reconcile.DefaultIntentGrace): far beyond the seconds between a create
// and its bind, and the minutes a first delivery takes, yet an orphan is
// told to a person within the hour.
const DefaultIntentGrace = reconcile.DefaultIntentGrace

// MinIntentGrace is LROSINK_INTENT_GRACE's floor: a submission's create
// and bind take seconds, and a shorter grace would alert intents whose
// submitter is still at work.
const MinIntentGrace = time.Minute

// intentGrace reads LROSINK_INTENT_GRACE.
func (e *envReader) intentGrace() time.Duration {
	d := e.duration("LROSINK_INTENT_GRACE", DefaultIntentGrace)
	if d < MinIntentGrace {
		e.fail(fmt.Errorf("LROSINK_INTENT_GRACE: %s is under its floor of 1m: a submission's create and bind may take that long, and its intent would be alerted while its submitter is still at work", d))
		return DefaultIntentGrace
	}
	return d
}

// fanOutTopic reads LROSINK_RECONCILE_FANOUT_TOPIC: a full topic name,
// required when the passes are sharded (the shard requests go there), and
// refused beside LROSINK_ADMIN_TOKEN: the push subscription authenticates
// with an OIDC token in the same Authorization header, which Cloud Run's
// IAM checks and the admin token check would refuse (every shard request
// would be answered 401 and dead-lettered).
func (e *envReader) fanOutTopic(c Config) string {
	t := strings.TrimSpace(e.getenv("LROSINK_RECONCILE_FANOUT_TOPIC"))
	switch {
	case t == "" && c.ReconcileShards > 1:
		e.fail(fmt.Errorf("LROSINK_RECONCILE_FANOUT_TOPIC: required with LROSINK_RECONCILE_SHARDS=%d: the coordinator publishes the shard requests there (projects/P/topics/T)", c.ReconcileShards))
	case t == "":
	default:
		if _, err := sink.ParseTopic(t); err != nil {
			e.fail(fmt.Errorf("LROSINK_RECONCILE_FANOUT_TOPIC: %q: %v", t, err))
			return ""
		}
		if c.AdminToken != "" {
			e.fail(errors.New("LROSINK_RECONCILE_FANOUT_TOPIC: cannot be used with LROSINK_ADMIN_TOKEN: Pub/Sub pushes shard requests with an OIDC token in the Authorization header, which the admin token check refuses; on Cloud Run IAM guards /Reconcile, so leave LROSINK_ADMIN_TOKEN unset"))
		}
	}
	return t
}

// reconcileURL reads LROSINK_RECONCILE_URL: an absolute http(s) URL.
func (e *envReader) reconcileURL() string {
	v := strings.TrimSpace(e.getenv("LROSINK_RECONCILE_URL"))
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		e.fail(errors.New("LROSINK_RECONCILE_URL: not an http(s) URL with a host (the Reconcile service's URL, https://…run.app)"))
		return ""
	}
	return v
}

// number reads k as a number in [lo, hi], def when unset.
func (e *envReader) number(k string, def, lo, hi float64) float64 {
	v := strings.TrimSpace(e.getenv(k))
	if v == "" {
		return def
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || x < lo || x > hi {
		e.fail(fmt.Errorf("%s: %q is not a number between %g and %g", k, v, lo, hi))
		return def
	}
	return x
}

// adminToken reads LROSINK_ADMIN_TOKEN; a weak one is an error that never
// quotes the value (this line ends up in logs).
func (e *envReader) adminToken() string {
	t := strings.TrimSpace(e.getenv("LROSINK_ADMIN_TOKEN"))
	if t != "" && !goodToken(t) {
		e.fail(fmt.Errorf("LROSINK_ADMIN_TOKEN: must be at least %d characters from A-Z a-z 0-9 - . _ ~ + / = (e.g. openssl rand -hex 32)", MinAdminTokenLen))
	}
	return t
}

// maxBody reads LROSINK_MAX_BODY: 1 MiB unless set to 1 KiB..64 MiB.
func (e *envReader) maxBody() int64 {
	v := strings.TrimSpace(e.getenv("LROSINK_MAX_BODY"))
	if v == "" {
		return 1 << 20
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1024 || n > 64<<20 {
		e.fail(fmt.Errorf("LROSINK_MAX_BODY: %q is not a byte count between 1024 and 67108864", v))
		return 1 << 20
	}
	return n
}

// Validate checks what Load cannot check alone, and what an entry point may
// change after Load (flags, a generated dev secret), without any I/O:
// LROSINK_STORE and LROSINK_RESULTS against the binary's schemes (with the
// variables a scheme depends on, such as GOOGLE_CLOUD_PROJECT) and that
// every webhook secret and public key decodes. Each problem is one line naming its
// variable; no line quotes a secret.
func (c *Config) Validate() error {
	errs := []error{c.Openers.Check(c.Store, c.Results, c.URLEnv(nil))}
	for i, s := range c.WebhookSecrets {
		if err := webhook.CheckSecret(s); err != nil {
			// The position, never the value: this line ends up in logs.
			errs = append(errs, fmt.Errorf("LROSINK_WEBHOOK_SECRETS: secret #%d %v", i+1, err))
		}
	}
	for i, k := range c.WebhookPublicKeys {
		if err := webhook.CheckPublicKey(k); err != nil {
			errs = append(errs, fmt.Errorf("LROSINK_WEBHOOK_PUBLIC_KEYS: key #%d %v", i+1, err))
		}
	}
	return errors.Join(errs...)
}

// URLEnv is what the openers of LROSINK_STORE and LROSINK_RESULTS need;
// stdout receives `stdout` results.
func (c *Config) URLEnv(stdout io.Writer) urlopen.Env {
	return urlopen.Env{Project: c.Project, FirestoreDatabase: c.FirestoreDatabase,
		FirestoreEmulatorHost: c.FirestoreEmulatorHost, StoreTimeout: c.StoreTimeout, Retention: c.Retention, Stdout: stdout}
}

// MinAdminTokenLen is the shortest LROSINK_ADMIN_TOKEN accepted: the token
// guards /Register and /Reconcile on a network, so it must not be guessable.
const MinAdminTokenLen = 16

// goodToken: long enough, and only RFC 6750 token characters, so that it
// goes into an Authorization header exactly as configured.
func goodToken(s string) bool {
	if len(s) < MinAdminTokenLen {
		return false
	}
	for _, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', strings.ContainsRune("-._~+/=", r):
		default:
			return false
		}
	}
	return true
}
