// Package console is the operations console at /ui/: server-rendered HTML
// (html/template, embedded templates and stylesheet, no JavaScript) over
// the ledger's indexed queries. It writes nothing itself: an operation
// page's actions (actions.go) are handed to an action.Doer. Names, metadata, outputs and errors come from
// outside (submitters, webhook senders, Gemini), so everything is rendered
// through html/template's contextual escaping, and every answer carries a
// Content-Security-Policy that allows no script at all, as a second wall.
package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lrosink/lrosink/internal/action"
	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/humantime"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/shard"
)

// Prefix is where the console is mounted.
const Prefix = "/ui/"

// Reader is what the console reads from the ledger: single documents and
// indexed, bounded queries, never a scan.
type Reader interface {
	GetOperation(ctx context.Context, id string) (ledger.Operation, error)
	GetClaim(ctx context.Context, id string) (ledger.Claim, error)
	PageOperations(ctx context.Context, f ledger.Filter, after ledger.ListCursor, limit int) ([]ledger.Operation, error)
	CountOperations(ctx context.Context, f ledger.Filter) (int64, error)
	DueClaims(ctx context.Context, now time.Time, after ledger.ClaimCursor, limit int) ([]ledger.Claim, error)
	CountDueClaims(ctx context.Context, now time.Time, after ledger.ClaimCursor) (int64, error)
	SearchOperations(ctx context.Context, prefix, after string, limit int) ([]ledger.Operation, error)
	UnboundIntents(ctx context.Context, before time.Time, after ledger.IntentCursor, limit int) ([]ledger.Intent, error)
	CountUnboundIntents(ctx context.Context, before time.Time) (int64, error)
}

// Setting is one line of the health page's configuration table. Values
// are descriptions, never secrets (a key is shown as "set" or "not set").
type Setting struct{ Name, Value string }

// Config holds the console's dependencies.
type Config struct {
	Ledger Reader
	Log    *slog.Logger
	Now    func() time.Time
	// StuckAfter is LROSINK_STUCK_AFTER: the stuck filter's cutoff is now
	// minus it.
	StuckAfter time.Duration
	// IntentGrace is LROSINK_INTENT_GRACE: the Stuck page lists the
	// intents bound to no operation longer than it.
	IntentGrace time.Duration
	// PageSize is the number of rows per page (default 50).
	PageSize int
	// Passes are this process's recent reconcile passes; nil when it runs
	// none (the Console function on Cloud Run).
	Passes *Passes
	// Settings describe the configured store, sink and the like.
	Settings []Setting
	// AdminToken is LROSINK_ADMIN_TOKEN: when set, every page needs it, as
	// a Bearer header or the session cookie its sign-in form sets (a
	// browser cannot send the header). Empty: the console is open.
	AdminToken string
	// Deliveries is the delivery log an operation page shows as its
	// delivery timeline; nil: none kept. DeliveryLogTTL hides older entries.
	Deliveries     Deliveries
	DeliveryLogTTL time.Duration
	// Counter gives the health page the ledger's real pending and due
	// counts; nil: not shown.
	Counter Counter
	// TrafficLog counts the webhook traffic of the last hour in the
	// delivery log (the ledger), so the figures survive a restart and are
	// every instance's; nil: Traffic's, this process's own.
	TrafficLog deliverylog.TrafficCounter
	// Traffic is this process's webhook traffic; nil when it serves no
	// webhooks (the Console function on Cloud Run). With TrafficLog only
	// its rejections are shown: they name no operation, so the log has
	// none.
	Traffic *deliverylog.Traffic
	// PollingOff: this process runs the reconcile passes without
	// GEMINI_API_KEY, so no pending operation is ever checked and "Next
	// check" says "never: no GEMINI_API_KEY". False where the passes run
	// elsewhere (the Console function on Cloud Run cannot tell).
	PollingOff bool
	// Actions carries out the operation page's actions (Replay, Check
	// now, Publish now; actions.go): in process in serve, the Reconcile
	// function over HTTP on Cloud Run. Nil: the page offers none.
	Actions action.Doer
	// TrustIAM: Google's front end verified the caller (the Console
	// service on Cloud Run, IAM-protected), so an action's actor is the
	// IAM principal it passed on.
	TrustIAM bool
}

// Deliveries reads an operation's delivery log (deliverylog.Store).
type Deliveries interface {
	ListDeliveries(ctx context.Context, opID string) ([]deliverylog.Entry, error)
}

// Counter counts pending and due operations (ledger.Queries).
type Counter interface {
	CountPending(ctx context.Context) (int64, error)
	CountDue(ctx context.Context, rg shard.Range, now time.Time) (int64, error)
}

//go:embed assets
var assets embed.FS

// Console serves the pages.
type Console struct {
	cfg   Config
	pages map[string]*template.Template
}

// New checks cfg and returns the console's handler, which serves every
// path under Prefix and redirects "/" there.
func New(cfg Config) (http.Handler, error) {
	if cfg.Ledger == nil || cfg.Log == nil {
		return nil, errors.New("console: Ledger and Log are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 50
	}
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = reconcile.DefaultStuckAfter
	}
	if cfg.IntentGrace <= 0 {
		cfg.IntentGrace = reconcile.DefaultIntentGrace
	}
	c := &Console{cfg: cfg, pages: map[string]*template.Template{}}
	funcs := template.FuncMap{
		"ago":      func(t time.Time) string { return ago(cfg.Now(), t) },
		"rel":      func(t time.Time) string { return humantime.Until(cfg.Now(), t) },
		"overdue":  func(t time.Time) bool { return !humantime.Never(t) && t.Before(cfg.Now()) },
		"ts":       stamp,
		"never":    humantime.Never,
		"num":      thousands,
		"opURL":    opURL,
		"terminal": func(s lifecycle.State) bool { return s.Terminal() },
		"dur":      humantime.Duration,
		"lastAt":   lastAt,
		"display":  displayName,
	}
	for _, p := range []string{"operations", "operation", "stuck", "health", "error", "signin"} {
		t, err := template.New(p).Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", p, err)
		}
		c.pages[p] = t
	}
	css, err := assets.ReadFile("assets/style.css")
	if err != nil {
		return nil, fmt.Errorf("console: stylesheet: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"{$}", c.operations)
	mux.HandleFunc("GET "+Prefix+"operations/{rest...}", c.operation)
	mux.HandleFunc("GET "+Prefix+"stuck", c.stuck)
	mux.HandleFunc("GET "+Prefix+"health", c.health)
	mux.HandleFunc("POST "+ActionPath, c.act)
	mux.HandleFunc("GET "+Prefix+"style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "max-age=300")
		_, _ = w.Write(css)
	})
	mux.HandleFunc("GET "+Favicon, favicon)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix, http.StatusFound)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "No such page.", nil)
	})
	var h http.Handler = mux
	if cfg.AdminToken != "" {
		h = c.signIn(mux)
	}
	return secure(c.crossOrigin(h)), nil
}

// Favicon is where every browser asks for an icon on its first visit.
const Favicon = "/favicon.ico"

// favicon answers 204 No Content: the console has no icon, and a 404 would
// be an error in the browser's console on every first visit. Open even
// when guarded (like the stylesheet): it reveals nothing.
func favicon(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "max-age=86400")
	w.WriteHeader(http.StatusNoContent)
}

// secure sets the headers every answer carries: no script may run, nothing
// may frame the console, nothing is cached by shared caches.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// page is what every template gets.
type page struct {
	Title string
	Nav   string
	Now   time.Time
	// Guarded: the console needs the admin token, so the header offers
	// sign-out.
	Guarded bool
	Data    any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	var b bytes.Buffer
	p := page{Title: title, Nav: name, Now: c.cfg.Now(), Guarded: c.cfg.AdminToken != "" && name != "signin", Data: data}
	if err := c.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		c.cfg.Log.ErrorContext(r.Context(), "console: render", "page", name, "error", err.Error())
		http.Error(w, "console: cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fail renders the error page; err (logged, not shown) is the cause when
// the store failed.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string, err error) {
	if err != nil {
		c.cfg.Log.ErrorContext(r.Context(), "console: "+msg, "error", err.Error())
	}
	c.render(w, r, status, "error", http.StatusText(status), msg)
}

// listForm is the operations page's query: filters, then the cursor.
type listForm struct {
	// Q is the name search: an exact name in any form opname accepts, or
	// the start of one ("batches/batch_1", "batch_1").
	Q     string
	State lifecycle.State
	Kind  opname.Kind
	Stuck bool
	After ledger.ListCursor
	From  int // 1-based position of the page's first row, for the label
	// SearchAfter is a name search's cursor: the document id its last
	// page read to ("" on the first page).
	SearchAfter string
}

// kinds are the kinds the filter offers (a function: no package-level
// mutable state).
func kinds() []opname.Kind {
	return opname.Kinds()
}

func parseList(q url.Values) (listForm, error) {
	var f listForm
	if s := lifecycle.State(q.Get("state")); s != "" {
		if !slices.Contains(statesOf(), s) {
			return f, errors.New("state: not one lrosink knows (" + strings.Join(stateNames(), ", ") + ")")
		}
		f.State = s
	}
	if k := opname.Kind(q.Get("kind")); k != "" {
		if !slices.Contains(kinds(), k) {
			return f, errors.New("kind: not one of batch, video, interaction")
		}
		f.Kind = k
	}
	stuck, ok := truthy(q.Get("stuck"))
	if !ok {
		return f, errors.New("stuck: not 1, true, on or yes (nor 0, false, off, no or empty)")
	}
	f.Stuck = stuck
	f.Q = strings.TrimSpace(q.Get("q"))
	if len(f.Q) > opname.MaxRawLen {
		return f, errors.New("q: too long")
	}
	f.SearchAfter = q.Get("after")
	if len(f.SearchAfter) > opname.MaxDocIDLen {
		return f, errors.New("after: too long")
	}
	f.From = 1
	if at := q.Get("at"); at != "" {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return f, errors.New("at: not an RFC 3339 time")
		}
		f.After = ledger.ListCursor{SubmittedAt: t, ID: q.Get("id")}
		if n, err := strconv.Atoi(q.Get("from")); err == nil && n > 0 {
			f.From = n
		}
	}
	return f, nil
}

// truthy reads a yes/no URL parameter in the spellings people and forms
// use: what strconv.ParseBool accepts, plus on/off (a checkbox without a
// value sends "on") and yes/no, in any case; "" is no. ok is false for
// anything else, so a typo is answered 400 rather than read as no.
func truthy(v string) (yes, ok bool) {
	switch strings.ToLower(v) {
	case "", "0", "f", "false", "off", "no":
		return false, true
	case "1", "t", "true", "on", "yes":
		return true, true
	}
	return false, false
}

func stateNames() []string {
	var out []string
	for _, s := range statesOf() {
		out = append(out, string(s))
	}
	return out
}

// query returns the URL query of f without its cursor, with extra pairs.
func (f listForm) query(extra ...string) string {
	v := url.Values{}
	if f.Q != "" {
		v.Set("q", f.Q)
	}
	if f.State != "" {
		v.Set("state", string(f.State))
	}
	if f.Kind != "" {
		v.Set("kind", string(f.Kind))
	}
	if f.Stuck {
		v.Set("stuck", "1")
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	if len(v) == 0 {
		return Prefix
	}
	return Prefix + "?" + v.Encode()
}

type listData struct {
	Form        listForm
	States      []lifecycle.State
	Kinds       []opname.Kind
	Rows        []row
	Total       int64
	First, Last int
	Next, Reset string
	StuckAfter  time.Duration
	// Searched: the rows are a page of the name search's matches, after
	// the other filters; Count says how many, as far as they were read.
	Searched bool
	Count    string
	// Miss is the name an operation URL named that no operation has: the
	// rows are the nearest names.
	Miss string
	// Summary is the line above the list (nil on a search).
	Summary *summary
}

// summary is the list page's top line: operations by state, the stuck
// ones, and the results messages owed. Each figure is a count aggregation
// over an index, the ones the reconciler's pass counts with (stuck:
// CountOperations with the stuck filter; owed: CountDueClaims), plus one
// per state: no document is read (Firestore bills one read per 1,000
// index entries counted), whatever the ledger holds.
type summary struct {
	States []stateCount
	Total  int64
	Stuck  int64
	// Owed counts the claims not DONE: settled operations whose results
	// message is not published yet.
	Owed int64
	// Failed: a count failed, so the line is not shown (the list still is).
	Failed bool
}

type stateCount struct {
	State lifecycle.State
	N     int64
}

// summarize counts the summary's figures, concurrently (each is one
// aggregation query; on Firestore each is a round trip).
func (c *Console) summarize(ctx context.Context) *summary {
	states := statesOf()
	counts := make([]int64, len(states)+2)
	errs := make([]error, len(counts))
	var wg sync.WaitGroup
	for i := range counts {
		wg.Go(func() {
			switch {
			case i < len(states):
				counts[i], errs[i] = c.cfg.Ledger.CountOperations(ctx, ledger.Filter{State: states[i]})
			case i == len(states):
				counts[i], errs[i] = c.cfg.Ledger.CountOperations(ctx, ledger.Filter{StuckAt: c.stuckAt()})
			default:
				// Every claim not DONE has a due time: by the far future,
				// all of them (as the Stuck page lists them).
				counts[i], errs[i] = c.cfg.Ledger.CountDueClaims(ctx, c.cfg.Now().AddDate(100, 0, 0), ledger.ClaimCursor{})
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.cfg.Log.WarnContext(ctx, "console: summary counts failed", "error", err.Error())
		return &summary{Failed: true}
	}
	s := &summary{Stuck: counts[len(states)], Owed: counts[len(states)+1]}
	for i, st := range states {
		s.Total += counts[i]
		if counts[i] > 0 {
			s.States = append(s.States, stateCount{State: st, N: counts[i]})
		}
	}
	return s
}

// row is one operation in a table.
type row struct {
	ledger.Operation
	Stuck bool
	// Claim is the claim's status ("" before the operation settled,
	// "expired" once the TTL policy removed a done claim).
	Claim string
}

// unavailable answers 503 when the ledger failed a read (err is logged).
func (c *Console) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	c.fail(w, r, http.StatusServiceUnavailable, "The ledger did not answer.", err)
}

// stuckAt is the stuck cutoff: an operation still pending that was
// submitted at or before it is stuck.
func (c *Console) stuckAt() time.Time { return c.cfg.Now().Add(-c.cfg.StuckAfter) }

func isStuck(op ledger.Operation, cutoff time.Time) bool {
	return !op.State.Terminal() && !op.SubmittedAt.After(cutoff)
}

func (c *Console) filter(f listForm) ledger.Filter {
	lf := ledger.Filter{State: f.State, Kind: f.Kind}
	if f.Stuck {
		lf.StuckAt = c.stuckAt()
	}
	return lf
}

// page reads one page of the operations f matches and how many match.
func (c *Console) page(ctx context.Context, f ledger.Filter, after ledger.ListCursor, limit int) ([]ledger.Operation, int64, error) {
	ops, err := c.cfg.Ledger.PageOperations(ctx, f, after, limit)
	if err != nil {
		return nil, 0, err
	}
	total, err := c.cfg.Ledger.CountOperations(ctx, f)
	if err != nil {
		return nil, 0, err
	}
	return ops, total, nil
}

// rows decorates ops for a table. A settled row's claim status is the
// operation's effect mirror, which every claim write (DONE included) keeps
// in step, so a page costs its one query and no claim read per row.
func (c *Console) rows(ops []ledger.Operation) []row {
	cutoff := c.stuckAt()
	out := make([]row, len(ops))
	for i, op := range ops {
		out[i] = row{Operation: op, Stuck: isStuck(op, cutoff)}
		if op.State.Terminal() {
			out[i].Claim = string(op.Effect.Status)
		}
	}
	return out
}

func (c *Console) operations(w http.ResponseWriter, r *http.Request) {
	f, err := parseList(r.URL.Query())
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, "Bad filter: "+err.Error(), nil)
		return
	}
	if f.Q != "" && f.SearchAfter == "" {
		// An exact name opens its operation (303: what it names depends on
		// the ledger), if it passes the other filters.
		op, err := c.exact(r, f.Q, f.Kind)
		switch {
		case err == nil && keep(c.filter(f), op):
			http.Redirect(w, r, opURL(op.Name, op.ID), http.StatusSeeOther)
			return
		case err != nil && !errors.Is(err, ledger.ErrNotFound):
			c.unavailable(w, r, err)
			return
		}
	}
	if f.Q != "" {
		c.search(w, r, f)
		return
	}
	// One row more than a page says whether a next page exists: a total
	// that is a multiple of the page size must not offer an empty one.
	ops, total, err := c.page(r.Context(), c.filter(f), f.After, c.cfg.PageSize+1)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	more := len(ops) > c.cfg.PageSize
	ops = ops[:min(len(ops), c.cfg.PageSize)]
	rows := c.rows(ops)
	d := listData{Form: f, States: statesOf(), Kinds: kinds(), Rows: rows, Total: total,
		First: f.From, Last: f.From + len(ops) - 1, StuckAfter: c.cfg.StuckAfter}
	if !f.After.IsZero() {
		d.Reset = f.query()
	}
	d.Summary = c.summarize(r.Context())
	if more {
		last := ops[len(ops)-1]
		d.Next = f.query("at", last.SubmittedAt.UTC().Format(time.RFC3339Nano), "id", last.ID, "from", strconv.Itoa(d.Last+1))
	}
	c.render(w, r, http.StatusOK, "operations", "Operations", d)
}

// event is one line of an operation's timeline.
type event struct {
	At       time.Time
	Kind     string // applied, conflict, replay, action
	State    lifecycle.State
	Source   string
	Reason   string
	Delivery string
	// ReplayID is a replay's replay_id (Kind "replay").
	ReplayID string
	// Actor is who asked for a console action (Kind "action").
	Actor string
	// Update is the event's server time: the epoch when it carried none
	// (it loses every tie), which the page shows as no state time.
	Update time.Time
}

type opData struct {
	Op       ledger.Operation
	Stuck    bool
	Metadata string
	Output   string
	Claim    *ledger.Claim
	Message  string
	// Published: the claim is DONE, so Message went out; otherwise it is
	// the message lrosink still owes (built at settlement, not yet sent).
	Published bool
	Timeline  []event
	// Deliveries is the delivery log, newest first; LogKept says whether
	// one is kept at all, LogError why it could not be read.
	Deliveries []deliverylog.Entry
	LogKept    bool
	LogError   bool
	// PollingOff: see Config.PollingOff.
	PollingOff bool
	// Actions is the actions section (nil: none offered).
	Actions *actionsData
}

func (c *Console) operation(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	raw := strings.TrimPrefix(path, Prefix+"operations/")
	op, err := c.lookup(r, raw)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		c.miss(w, r, raw)
		return
	case err != nil:
		c.unavailable(w, r, err)
		return
	}
	// One page per operation: every other spelling of its name redirects
	// to it, permanently (308: a fact of the name, whatever the ledger
	// holds).
	if u := opURL(op.Name, op.ID); u != path {
		http.Redirect(w, r, u, http.StatusPermanentRedirect)
		return
	}
	id := op.ID
	d := opData{Op: op, Stuck: isStuck(op, c.stuckAt()), PollingOff: c.cfg.PollingOff,
		Metadata: pretty(op.UserMetadata), Output: pretty(op.Output)}
	if op.State.Terminal() {
		cl, err := c.cfg.Ledger.GetClaim(r.Context(), id)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			// Expired by the TTL policy after it was done.
		case err != nil:
			c.unavailable(w, r, err)
			return
		default:
			d.Claim = &cl
			d.Published = cl.Status == ledger.ClaimDone
			if data, err := cl.Message.Data(); err != nil {
				d.Message = "(cannot encode: " + err.Error() + ")"
			} else {
				d.Message = indent(data)
			}
		}
	}
	for _, k := range []struct {
		kind    string
		entries []ledger.HistoryEntry
	}{{"applied", op.History}, {"conflict", op.Conflicts}} {
		for _, h := range k.entries {
			d.Timeline = append(d.Timeline, event{At: h.At, Kind: k.kind, State: h.State, Source: h.Source, Reason: h.Reason, Delivery: h.DeliveryID, Update: h.UpdateTime})
		}
	}
	if c.cfg.Deliveries != nil {
		d.LogKept = true
		log, err := c.cfg.Deliveries.ListDeliveries(r.Context(), id)
		if err != nil {
			// The page is still worth showing without its log.
			d.LogError = true
			c.cfg.Log.WarnContext(r.Context(), "console: delivery log unreadable", "operation", op.Name, "error", err.Error())
		}
		d.Deliveries = deliverylog.Live(log, c.cfg.Now(), c.cfg.DeliveryLogTTL)
	}
	// The console's actions, with who asked; a replay one of them made
	// is that action's line, not a second one.
	acts, byAction := actionEvents(d.Deliveries)
	d.Timeline = append(d.Timeline, acts...)
	for _, rp := range op.Replays {
		if !byAction[rp.ID] {
			// The kind says "replay" once; the id is data ("replay-02edc…").
			d.Timeline = append(d.Timeline, event{At: rp.At, Kind: "replay", ReplayID: rp.ID})
		}
	}
	slices.SortStableFunc(d.Timeline, func(a, b event) int { return a.At.Compare(b.At) })
	d.Actions = c.actionsFor(w, r, op, d.Claim)
	c.render(w, r, http.StatusOK, "operation", displayName(op), d)
}

// miss answers an operation URL that names no operation in any spelling.
// A bare id (batch_123) one operation has redirects to its page, 303 See
// Other: which operation it names depends on what the ledger holds, so no
// browser may keep the answer. Otherwise a 404 list page: the search box
// holding the name, and the nearest names (Console.nearest).
func (c *Console) miss(w http.ResponseWriter, r *http.Request, raw string) {
	name, err := url.PathUnescape(raw)
	if err != nil || len(name) > opname.MaxRawLen {
		c.fail(w, r, http.StatusNotFound, "No operation with this name.", nil)
		return
	}
	ops, err := c.bare(r.Context(), searchName(name), opname.KindUnknown)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	if len(ops) == 1 {
		http.Redirect(w, r, opURL(ops[0].Name, ops[0].ID), http.StatusSeeOther)
		return
	}
	near, err := c.nearest(r.Context(), name)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	f := listForm{Q: name}
	d := listData{Form: f, States: statesOf(), Kinds: kinds(), StuckAfter: c.cfg.StuckAfter, Searched: true,
		Miss: name, Rows: c.rows(near), First: 1, Last: len(near)}
	switch {
	case len(ops) > 1:
		d.Count = "More than one kind of operation has this id: pick one"
	case len(near) > 0:
		d.Count = "The nearest names"
	default:
		d.Count = "No name comes near it"
	}
	c.render(w, r, http.StatusNotFound, "operations", "Not found", d)
}

// maxStuckRows bounds each of the stuck page's lists.
const maxStuckRows = 200

type stuckData struct {
	// Ops are all pending (the stuck filter), so they have no claim to
	// show: the page's table needs the operations only.
	Ops        []ledger.Operation
	OpsTotal   int64
	Claims     []ledger.Claim
	StuckAfter time.Duration
	More       string
	Limit      int
	// Intents are the intents bound to no operation past IntentGrace,
	// oldest first (alerted: intent-unbound), of IntentsTotal.
	Intents      []ledger.Intent
	IntentsTotal int64
	IntentGrace  time.Duration
}

func (c *Console) stuck(w http.ResponseWriter, r *http.Request) {
	f := listForm{Stuck: true}
	ops, total, err := c.page(r.Context(), c.filter(f), ledger.ListCursor{}, maxStuckRows)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	// Every claim that is not DONE has a due time (its lease end, or its
	// release): asking for those due by the far future lists them all,
	// through the same index the reconciler uses.
	claims, err := c.cfg.Ledger.DueClaims(r.Context(), c.cfg.Now().AddDate(100, 0, 0), ledger.ClaimCursor{}, maxStuckRows)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	cutoff := c.cfg.Now().Add(-c.cfg.IntentGrace)
	intents, err := c.cfg.Ledger.UnboundIntents(r.Context(), cutoff, ledger.IntentCursor{}, maxStuckRows)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	intentsTotal, err := c.cfg.Ledger.CountUnboundIntents(r.Context(), cutoff)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	d := stuckData{Ops: ops, OpsTotal: total, Claims: claims, StuckAfter: c.cfg.StuckAfter, Limit: maxStuckRows,
		Intents: intents, IntentsTotal: intentsTotal, IntentGrace: c.cfg.IntentGrace}
	if total > int64(len(ops)) {
		d.More = f.query()
	}
	c.render(w, r, http.StatusOK, "stuck", "Stuck", d)
}

type healthData struct {
	Passes   []Pass
	Local    bool
	Settings []Setting
	// Counted: Pending and Due are the ledger's counts (CountError: the
	// count failed).
	Counted      bool
	CountError   bool
	Pending, Due int64
	// Traffic is the webhook traffic of the last hour: from the delivery
	// log, or this process's; nil when neither is known. TrafficError: the
	// log could not be read.
	Traffic      *deliverylog.Window
	TrafficError bool
}

// maxTrafficRead bounds the health page's traffic read: entries (SQLite)
// or operations delivered to (Firestore, one read each) in the hour.
const maxTrafficRead = 5000

func (c *Console) health(w http.ResponseWriter, r *http.Request) {
	d := healthData{Settings: c.cfg.Settings, Local: c.cfg.Passes != nil}
	if c.cfg.Passes != nil {
		d.Passes = c.cfg.Passes.Recent()
	}
	if c.cfg.Counter != nil {
		d.Counted = true
		var err1, err2 error
		d.Pending, err1 = c.cfg.Counter.CountPending(r.Context())
		d.Due, err2 = c.cfg.Counter.CountDue(r.Context(), shard.All(), c.cfg.Now())
		if err := errors.Join(err1, err2); err != nil {
			d.CountError = true
			c.cfg.Log.WarnContext(r.Context(), "console: ledger counts failed", "error", err.Error())
		}
	}
	switch {
	case c.cfg.TrafficLog != nil:
		t, err := c.cfg.TrafficLog.WebhookTraffic(r.Context(), c.cfg.Now().Add(-time.Hour), maxTrafficRead)
		if err != nil {
			d.TrafficError = true
			c.cfg.Log.WarnContext(r.Context(), "console: webhook traffic unreadable", "error", err.Error())
			break
		}
		w := t.Window(c.cfg.Traffic)
		d.Traffic = &w
	case c.cfg.Traffic != nil:
		t := c.cfg.Traffic.LastHour()
		d.Traffic = &t
	}
	c.render(w, r, http.StatusOK, "health", "Health", d)
}

// displayName is op's name as its submitter knows it: the API name where it
// is more specific than the canonical name (a Veo operation's
// models/M/operations/ID), else the canonical name. The canonical name
// stays the key and the page's address.
func displayName(op ledger.Operation) string {
	if op.APIName != "" {
		return op.APIName
	}
	return op.Name
}

// pretty renders a free-form map as indented JSON ("" for none).
func pretty(m map[string]any) string {
	if m == nil {
		return ""
	}
	b, err := ledger.EncodeJSON(m)
	if err != nil {
		return "(cannot encode: " + err.Error() + ")"
	}
	return indent(b)
}

func indent(b []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

// statesOf are the states the filter offers.
func statesOf() []lifecycle.State { return lifecycle.States() }

// stamp formats a time for a table: UTC, seconds; "—" for a time never
// observed (absent, or the epoch of an event that carried none).
func stamp(t time.Time) string {
	if humantime.Never(t) {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// ago is a coarse duration between t and now: "45s", "12m", "3h05m",
// "4d02h"; "in 5m" when t is after now; "" for a time never observed.
func ago(now, t time.Time) string {
	if humantime.Never(t) {
		return ""
	}
	d := now.Sub(t)
	prefix := ""
	if d < 0 {
		prefix, d = "in ", -d
	}
	return prefix + humantime.Age(d)
}

// thousands formats n with comma separators: 1234 → "1,234".
func thousands(n any) string {
	var v int64
	switch x := n.(type) {
	case int:
		v = int64(x)
	case int64:
		v = x
	}
	s := strconv.FormatInt(v, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
