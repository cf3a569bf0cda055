package console_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/console"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/reconcile"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

const evil = `<script>document.title="pwned"</script>"><img src=x onerror=alert(1)>`

func store(t *testing.T) *sqliteledger.Store {
	t.Helper()
	s, err := sqliteledger.Open(t.Context(), filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func commit(t *testing.T, s ledger.Ledger, op ledger.Operation, c *ledger.Claim) {
	t.Helper()
	if _, _, err := claims.New(s).CommitOperation(t.Context(), op, c); err != nil {
		t.Fatalf("commit %s: %v", op.ID, err)
	}
}

// settled returns op SUCCEEDED, with history and a conflict, and its claim.
func settled(id string, submitted time.Time) (ledger.Operation, *ledger.Claim) {
	op := ledgertest.Op(id)
	op.SubmittedAt = submitted
	op.State, op.UpdateTime, op.SettledAt, op.SettledBy, op.NextCheckAt = lifecycle.Succeeded, submitted.Add(time.Minute), submitted.Add(time.Minute), "webhook", time.Time{}
	op.History = []ledger.HistoryEntry{
		{At: submitted, Source: "register", State: lifecycle.Pending, Reason: "first-sighting"},
		{At: submitted.Add(time.Minute), Source: "webhook", State: lifecycle.Succeeded, Reason: "higher-rank", DeliveryID: "msg_1", UpdateTime: submitted.Add(time.Minute)},
	}
	op.Conflicts = []ledger.HistoryEntry{{At: submitted.Add(2 * time.Minute), Source: "webhook", State: lifecycle.Failed, Reason: "conflicting-terminal"}}
	c := ledgertest.Claim(id, "h1", submitted.Add(11*time.Minute))
	c.Message.UserMetadata = op.UserMetadata
	// The door commits the operation with its claim's mirror.
	op.Effect = ledger.EffectMirror{Status: c.Status, LeaseUntil: c.LeaseUntil}
	return op, c
}

func newConsole(t *testing.T, s console.Reader, mod func(*console.Config)) *httptest.Server {
	t.Helper()
	cfg := console.Config{Ledger: s, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now },
		StuckAfter: 6 * time.Hour, PageSize: 50,
		Settings: []console.Setting{{Name: "LROSINK_STORE", Value: "sqlite:/tmp/x.db"}}}
	if mod != nil {
		mod(&cfg)
	}
	h, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, u string, wantStatus int) (string, http.Header) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != wantStatus {
		t.Fatalf("GET %s = %d, want %d\n%s", u, res.StatusCode, wantStatus, b)
	}
	return string(b), res.Header
}

// Everything that came from outside is shown as text: no tag of it reaches
// the page, on the list and on the operation's page, and the CSP forbids
// script anyway.
func TestEscapesEverything(t *testing.T) {
	s := store(t)
	op, c := settled("evil", now.Add(-time.Hour))
	op.Name, op.APIName = "batches/"+evil, "batches/"+evil
	op.UserMetadata = map[string]any{evil: evil, "nested": []any{evil}}
	op.Output = map[string]any{"text": evil}
	op.History[1].DeliveryID = evil
	c.Message.UserMetadata = op.UserMetadata
	c.Message.Operation = op.Name
	commit(t, s, op, c)
	srv := newConsole(t, s, nil)
	for _, path := range []string{"/ui/", "/ui/operations/evil", "/ui/?state=SUCCEEDED"} {
		body, h := get(t, srv.URL+path, http.StatusOK)
		if strings.Contains(body, "<script") || strings.Contains(body, "<img") {
			t.Errorf("%s: a tag from the input reached the page:\n%s", path, body)
		}
		if !strings.Contains(body, "&lt;script&gt;") {
			t.Errorf("%s: the input is not shown as escaped text", path)
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
			t.Errorf("%s: Content-Security-Policy %q does not forbid scripts", path, csp)
		}
	}
}

var countRE = regexp.MustCompile(`id="count">([^<]*)<`)

func TestListPagesWithTotal(t *testing.T) {
	s := store(t)
	for i := range 120 {
		op := ledgertest.Op(fmt.Sprintf("op%03d", i))
		op.SubmittedAt = now.Add(-time.Duration(120-i) * time.Minute)
		if i%3 == 0 {
			op, c := settled(op.ID, op.SubmittedAt)
			commit(t, s, op, c)
			continue
		}
		commit(t, s, op, nil)
	}
	srv := newConsole(t, s, nil)
	body, _ := get(t, srv.URL+"/ui/", http.StatusOK)
	if got := countRE.FindStringSubmatch(body); got == nil || got[1] != "1–50 of 120" {
		t.Fatalf("first page label = %q, want 1–50 of 120", got)
	}
	if !strings.Contains(body, ">batches/op119<") || strings.Contains(body, ">batches/op069<") {
		t.Fatalf("first page is not the 50 newest")
	}
	// Follow "next" to the end.
	seen := 0
	next := regexp.MustCompile(`<a href="([^"]*)" rel="next">`)
	labels := []string{}
	for u := srv.URL + "/ui/"; ; {
		body, _ := get(t, u, http.StatusOK)
		seen += strings.Count(body, `<td class="name"`)
		labels = append(labels, countRE.FindStringSubmatch(body)[1])
		m := next.FindStringSubmatch(body)
		if m == nil {
			break
		}
		u = srv.URL + strings.ReplaceAll(m[1], "&amp;", "&")
	}
	if seen != 120 || fmt.Sprint(labels) != "[1–50 of 120 51–100 of 120 101–120 of 120]" {
		t.Fatalf("paging saw %d rows with labels %v", seen, labels)
	}
	// Filters: state, and the claim column read from the claims.
	body, _ = get(t, srv.URL+"/ui/?state=SUCCEEDED", http.StatusOK)
	if got := countRE.FindStringSubmatch(body)[1]; got != "1–40 of 40" {
		t.Fatalf("SUCCEEDED label = %q", got)
	}
	// The table, not the summary line above it (which counts every state).
	_, table, _ := strings.Cut(body, "<table")
	if strings.Contains(table, `class="state s-PENDING"`) || strings.Count(table, `c-CLAIMED">CLAIMED<`) != 40 {
		t.Fatalf("state filter shows other states, or not every claim's status")
	}
	// Stuck: pending and older than 6 h: none here; all 80 pending with a
	// shorter threshold.
	body, _ = get(t, srv.URL+"/ui/?stuck=1", http.StatusOK)
	if got := countRE.FindStringSubmatch(body)[1]; got != "0 of 0" {
		t.Fatalf("stuck label = %q", got)
	}
	srv2 := newConsole(t, s, func(c *console.Config) { c.StuckAfter = time.Minute })
	body, _ = get(t, srv2.URL+"/ui/?stuck=1&kind=batch", http.StatusOK)
	if got := countRE.FindStringSubmatch(body)[1]; got != "1–50 of 80" {
		t.Fatalf("stuck batches label = %q", got)
	}
	get(t, srv.URL+"/ui/?kind=nope", http.StatusBadRequest)
	get(t, srv.URL+"/ui/?state="+url.QueryEscape("<x>"), http.StatusBadRequest)
}

func TestOperationPage(t *testing.T) {
	s := store(t)
	op, c := settled("one", now.Add(-time.Hour))
	commit(t, s, op, c)
	srv := newConsole(t, s, nil)
	body, _ := get(t, srv.URL+"/ui/operations/one", http.StatusOK)
	for _, want := range []string{
		`<span class="kind">applied</span> <span class="state s-PENDING">PENDING</span> from <b>register</b>`,
		`<span class="kind">applied</span> <span class="state s-SUCCEEDED">SUCCEEDED</span> from <b>webhook</b>`,
		`<span class="kind">conflict</span> <span class="state s-FAILED">FAILED</span>`,
		`&#34;idempotency_key&#34;: &#34;gemini:batches/one&#34;`, // the message as published
		`<dt>Attempts</dt><dd>1</dd>`,
		`&#34;job&#34;: &#34;j1&#34;`, // user metadata
	} {
		if !strings.Contains(body, want) {
			t.Errorf("operation page lacks %q", want)
		}
	}
	// The timeline is in time order: register, webhook, conflict.
	if i, j := strings.Index(body, "from <b>register</b>"), strings.Index(body, "conflict</span>"); i < 0 || j < i {
		t.Errorf("timeline out of order")
	}
	get(t, srv.URL+"/ui/operations/missing", http.StatusNotFound)
}

func TestStuckPage(t *testing.T) {
	s := store(t)
	old := ledgertest.Op("old")
	old.SubmittedAt = now.Add(-7 * time.Hour)
	commit(t, s, old, nil)
	young := ledgertest.Op("young")
	young.SubmittedAt = now.Add(-time.Hour)
	commit(t, s, young, nil)
	held, c := settled("held", now.Add(-2*time.Hour)) // claim CLAIMED, lease long over
	commit(t, s, held, c)
	srv := newConsole(t, s, nil)
	body, _ := get(t, srv.URL+"/ui/stuck", http.StatusOK)
	if !strings.Contains(body, ">batches/old<") || strings.Contains(body, ">batches/young<") {
		t.Errorf("stuck operations: want old, not young")
	}
	if !strings.Contains(body, "7h00m") {
		t.Errorf("stuck page does not say how long (7h00m)")
	}
	if !strings.Contains(body, ">batches/held<") {
		t.Errorf("claims not done: want held")
	}
	if strings.Contains(body, "there may be more") {
		t.Errorf("one claim not done, yet the page says the list is cut")
	}
}

// TestStuckPageListsUnboundIntents: intents bound to no operation past
// LROSINK_INTENT_GRACE are listed (key, kind, model, display name, for how
// long), as intents; one still in its grace and a bound one are not, and no
// metadata value is shown.
func TestStuckPageListsUnboundIntents(t *testing.T) {
	s := store(t)
	for key, at := range map[string]time.Time{"orphan-video": now.Add(-3 * time.Hour), "fresh": now.Add(-10 * time.Minute), "bound": now.Add(-5 * time.Hour)} {
		in := ledgertest.Intent(key, at)
		in.Kind, in.Metadata = "video", map[string]any{"secret": "do-not-show"}
		if key == "bound" {
			in = ledgertest.Bind(in, "b", at)
		}
		if _, err := s.Apply(t.Context(), ledger.PutIntent(in)); err != nil {
			t.Fatal(err)
		}
	}
	srv := newConsole(t, s, func(c *console.Config) { c.IntentGrace = time.Hour })
	body, _ := get(t, srv.URL+"/ui/stuck", http.StatusOK)
	if !strings.Contains(body, "Intents bound to no operation over 1h") || !strings.Contains(body, ">orphan-video<") ||
		!strings.Contains(body, "models/gemini-2.5-flash") || !strings.Contains(body, "lrosink-orphan-video") || !strings.Contains(body, "3h00m") {
		t.Errorf("stuck page does not list orphan-video as an unbound intent with its model, display name and age")
	}
	if strings.Contains(body, ">fresh<") || strings.Contains(body, ">bound<") || strings.Contains(body, "do-not-show") {
		t.Errorf("stuck page lists an intent in its grace or a bound one, or a metadata value")
	}
	if !strings.Contains(body, "1 shown of 1") {
		t.Errorf("stuck page does not count the unbound intents")
	}
	empty := newConsole(t, store(t), nil)
	if body, _ := get(t, empty.URL+"/ui/stuck", http.StatusOK); !strings.Contains(body, "Every intent is bound to its operation.") {
		t.Errorf("an empty ledger's stuck page does not say every intent is bound")
	}
}

// TestStuckPageSaysWhenClaimsAreCut: the list of claims not done shows at
// most 200; a full list says there may be more, where it used to end as
// if it were all.
func TestStuckPageSaysWhenClaimsAreCut(t *testing.T) {
	s := store(t)
	for i := range 200 {
		op, c := settled(fmt.Sprintf("held%03d", i), now.Add(-2*time.Hour))
		commit(t, s, op, c)
	}
	srv := newConsole(t, s, nil)
	body, _ := get(t, srv.URL+"/ui/stuck", http.StatusOK)
	if !strings.Contains(body, "The first 200 by due time; there may be more.") {
		t.Errorf("a full list of claims not done does not say it may be cut")
	}
}

func TestHealthPage(t *testing.T) {
	passes := console.NewPasses(3)
	for i := range 5 {
		passes.Record(console.Pass{Started: now.Add(-time.Duration(10-i) * time.Minute), Ended: now.Add(-time.Duration(10-i)*time.Minute + time.Second),
			Summary: reconcile.Summary{Checked: 100 + i}})
	}
	srv := newConsole(t, store(t), func(c *console.Config) { c.Passes = passes })
	body, _ := get(t, srv.URL+"/ui/health", http.StatusOK)
	for i, want := range []string{`<td data-label="Checked">104</td>`, `<td data-label="Checked">103</td>`, `<td data-label="Checked">102</td>`} {
		if !strings.Contains(body, want) {
			t.Errorf("health page lacks pass %d (%s)", i, want)
		}
	}
	if strings.Contains(body, `<td data-label="Checked">101</td>`) {
		t.Errorf("the ring kept more than 3 passes")
	}
	if !strings.Contains(body, "sqlite:/tmp/x.db") {
		t.Errorf("health page does not show the configured store")
	}
	srv = newConsole(t, store(t), nil)
	if body, _ := get(t, srv.URL+"/ui/health", http.StatusOK); !strings.Contains(body, "Reconcile service") {
		t.Errorf("without passes the health page does not say where they run")
	}
}

func TestRootRedirects(t *testing.T) {
	srv := newConsole(t, store(t), nil)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET / = %d %q", res.StatusCode, res.Header.Get("Location"))
	}
}

// A lease is only meaningful while a claim is held: a DONE claim's page says
// when it was done, not a lease that ran out long ago.
func TestOperationPageShowsLeaseOnlyWhileHeld(t *testing.T) {
	s := store(t)
	held, c := settled("held", now.Add(-time.Hour))
	commit(t, s, held, c)
	done, dc := settled("done", now.Add(-time.Hour))
	_, lease, err := claims.New(s).CommitOperation(t.Context(), done, dc)
	if err != nil {
		t.Fatal(err)
	}
	if err := claims.New(s).CompleteClaim(t.Context(), *lease, now.Add(-50*time.Minute)); err != nil {
		t.Fatal(err)
	}
	srv := newConsole(t, s, nil)
	if body, _ := get(t, srv.URL+"/ui/operations/held", http.StatusOK); !strings.Contains(body, "<dt>Lease until</dt>") {
		t.Errorf("held claim: the page does not show its lease")
	}
	body, _ := get(t, srv.URL+"/ui/operations/done", http.StatusOK)
	if !strings.Contains(body, `<span class="state c-DONE">DONE</span>`) {
		t.Fatalf("done claim: the page does not say DONE")
	}
	if strings.Contains(body, "Lease until") {
		t.Errorf("done claim: the page shows a lease")
	}
}

// A total that is an exact multiple of the page size ends on a full page
// with no "next »": there is nothing after it to show.
func TestNoNextAfterAnExactlyFullLastPage(t *testing.T) {
	s := store(t)
	for i := range 6 {
		op := ledgertest.Op(fmt.Sprintf("op%d", i))
		op.SubmittedAt = now.Add(-time.Duration(10-i) * time.Minute)
		commit(t, s, op, nil)
	}
	srv := newConsole(t, s, func(c *console.Config) { c.PageSize = 3 })
	next := regexp.MustCompile(`<a href="([^"]*)" rel="next">`)
	body, _ := get(t, srv.URL+"/ui/", http.StatusOK)
	m := next.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("first of two full pages has no next link")
	}
	body, _ = get(t, srv.URL+strings.ReplaceAll(m[1], "&amp;", "&"), http.StatusOK)
	if got := countRE.FindStringSubmatch(body)[1]; got != "4–6 of 6" {
		t.Fatalf("second page label = %q, want 4–6 of 6", got)
	}
	if next.MatchString(body) {
		t.Errorf("the last page (full, 6 of 6) offers next » to an empty page")
	}
}

// A filter lrosink cannot apply is the user's mistake, said as such: an
// unknown state is 400 like an unknown kind (not an empty list under a
// select showing "any"), and stuck takes the usual truthy spellings or
// is 400, never silently ignored.
func TestFiltersAreCheckedNotIgnored(t *testing.T) {
	s := store(t)
	op := ledgertest.Op("old")
	op.SubmittedAt = now.Add(-7 * time.Hour)
	commit(t, s, op, nil)
	young := ledgertest.Op("young")
	young.SubmittedAt = now.Add(-time.Hour)
	commit(t, s, young, nil)
	srv := newConsole(t, s, nil)
	for _, q := range []string{"state=SUCCEDED", "state=succeeded", "kind=nope", "stuck=maybe", "stuck=2"} {
		body, _ := get(t, srv.URL+"/ui/?"+q, http.StatusBadRequest)
		field, _, _ := strings.Cut(q, "=")
		if !strings.Contains(body, "Bad filter: "+field) {
			t.Errorf("?%s: the 400 does not name %s:\n%s", q, field, body)
		}
	}
	for _, v := range []string{"1", "true", "TRUE", "on", "yes"} {
		body, _ := get(t, srv.URL+"/ui/?stuck="+v, http.StatusOK)
		if got := countRE.FindStringSubmatch(body)[1]; got != "1–1 of 1" || !strings.Contains(body, `name="stuck" value="1" checked`) {
			t.Errorf("?stuck=%s: %q, or the box is not ticked: not read as stuck", v, got)
		}
	}
	for _, v := range []string{"", "0", "false", "off", "no"} {
		get(t, srv.URL+"/ui/?stuck="+v, http.StatusOK)
	}
}

// A browser asks for /favicon.ico on its first visit: the console (served
// at "/" as the Console function) answers 204 No Content, with or without
// a token, rather than a 404 page in the browser's console.
func TestFaviconIsNoContent(t *testing.T) {
	for _, token := range []string{"", "favicon-admin-token-0123456789"} {
		srv := newConsole(t, store(t), func(c *console.Config) { c.AdminToken = token })
		if body, _ := get(t, srv.URL+"/favicon.ico", http.StatusNoContent); body != "" {
			t.Errorf("token %t: /favicon.ico has a body %q", token != "", body)
		}
	}
}

// Only a DONE claim's message was published: a claim still CLAIMED (or
// RELEASED) shows the message lrosink owes, labelled as not yet published.
func TestMessageIsPublishedOnlyOnceDone(t *testing.T) {
	s := store(t)
	held, c := settled("held", now.Add(-time.Hour))
	commit(t, s, held, c)
	done, dc := settled("done", now.Add(-time.Hour))
	_, lease, err := claims.New(s).CommitOperation(t.Context(), done, dc)
	if err != nil {
		t.Fatal(err)
	}
	if err := claims.New(s).CompleteClaim(t.Context(), *lease, now.Add(-50*time.Minute)); err != nil {
		t.Fatal(err)
	}
	srv := newConsole(t, s, nil)
	body, _ := get(t, srv.URL+"/ui/operations/held", http.StatusOK)
	if strings.Contains(body, "as published") || !strings.Contains(body, "not yet published") ||
		!strings.Contains(body, `&#34;idempotency_key&#34;: &#34;gemini:batches/held&#34;`) {
		t.Errorf("CLAIMED claim: want its message shown as owed, not as published:\n%s", body)
	}
	body, _ = get(t, srv.URL+"/ui/operations/done", http.StatusOK)
	if !strings.Contains(body, "Results message as published") || strings.Contains(body, "not yet published") {
		t.Errorf("DONE claim: want its message shown as published")
	}
}
