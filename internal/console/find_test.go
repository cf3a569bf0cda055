package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/console"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
	"github.com/lrosink/lrosink/internal/ledger/memledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/results"
)

// named is ledgertest.Op under a real name, with the document id the door
// gives it (opname.DocID of the key).
func named(t *testing.T, name string) ledger.Operation {
	t.Helper()
	n, err := opname.Normalize(name, opname.KindUnknown)
	if err != nil {
		t.Fatal(err)
	}
	id, err := opname.DocID(n.Key())
	if err != nil {
		t.Fatal(err)
	}
	op := ledgertest.Op(id)
	op.Name, op.APIName, op.Kind = n.Canonical, n.APIName, n.Kind
	return op
}

func noRedirect() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Every spelling opname accepts, and the document id escaped once or twice,
// redirects to the one canonical page, which answers 200.
func TestCanonicalOperationURLs(t *testing.T) {
	s := store(t)
	commit(t, s, named(t, "batches/batch_123"), nil)
	commit(t, s, named(t, "models/veo-3.0-generate-001/operations/v9"), nil)
	srv := newConsole(t, s, nil)
	for path, want := range map[string]string{
		"/ui/operations/gemini:batches%2Fbatch_123":                "/ui/operations/batches/batch_123",
		"/ui/operations/gemini:batches%252Fbatch_123":              "/ui/operations/batches/batch_123",
		"/ui/operations/gemini:batches/batch_123":                  "/ui/operations/batches/batch_123",
		"/ui/operations/batches%2Fbatch_123":                       "/ui/operations/batches/batch_123",
		"/ui/operations/batch_123?kind=batch":                      "/ui/operations/batches/batch_123",
		"/ui/operations/models/veo-3.0-generate-001/operations/v9": "/ui/operations/operations/v9",
	} {
		res, err := noRedirect().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusPermanentRedirect || res.Header.Get("Location") != want {
			t.Errorf("GET %s = %d → %q, want 308 → %q", path, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
	body, _ := get(t, srv.URL+"/ui/operations/batches/batch_123", http.StatusOK)
	if !strings.Contains(body, `<h1 class="opname">batches/batch_123</h1>`) {
		t.Fatalf("canonical page does not show the operation:\n%s", body)
	}
	// A bare id one operation has lands on its page (303: what it names
	// depends on the ledger); a miss is a 404 with the nearest names.
	res, err := noRedirect().Get(srv.URL + "/ui/operations/batch_123")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/operations/batches/batch_123" {
		t.Errorf("GET /ui/operations/batch_123 = %d → %q, want 303 → /ui/operations/batches/batch_123", res.StatusCode, res.Header.Get("Location"))
	}
	body, _ = get(t, srv.URL+"/ui/operations/batch_123", http.StatusOK)
	if !strings.Contains(body, `<h1 class="opname">batches/batch_123</h1>`) {
		t.Errorf("the bare id does not land on batches/batch_123")
	}
	body, _ = get(t, srv.URL+"/ui/operations/batches/batch_999", http.StatusNotFound)
	if !strings.Contains(body, `id="miss"`) || !strings.Contains(body, `name="q" value="batches/batch_999"`) ||
		!strings.Contains(body, `href="/ui/operations/batches/batch_123"`) {
		t.Errorf("a miss does not offer the search box and the nearest name:\n%s", body)
	}
	// The list links to the canonical page.
	if body, _ := get(t, srv.URL+"/ui/", http.StatusOK); !strings.Contains(body, `href="/ui/operations/batches/batch_123"`) {
		t.Fatalf("the list does not link to the canonical page")
	}
}

// The name search finds by exact name (in any accepted spelling) and by
// prefix, with or without the collection, exact match first.
func TestNameSearch(t *testing.T) {
	s := store(t)
	for _, n := range []string{"batches/batch_12", "batches/batch_123", "batches/other", "interactions/batch_1x"} {
		commit(t, s, named(t, n), nil)
	}
	srv := newConsole(t, s, nil)
	for q, want := range map[string][]string{
		"batches/batch_1":   {"batches/batch_12", "batches/batch_123"},
		"batch_1":           {"batches/batch_12", "batches/batch_123", "interactions/batch_1x"},
		"gemini:batches/ot": {"batches/other"},
		// The document id the operation page shows, escaped once or twice.
		"gemini:batches%2Fot":   {"batches/other"},
		"gemini:batches%252Fot": {"batches/other"},
		"nothing":               nil,
	} {
		body, _ := get(t, srv.URL+"/ui/?q="+url.QueryEscape(q), http.StatusOK)
		var got []string
		for _, part := range strings.Split(body, `<td class="name" data-label="Name"><a href="`)[1:] {
			_, rest, _ := strings.Cut(part, `">`)
			name, _, _ := strings.Cut(rest, "<")
			got = append(got, name)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("search %q found %v, want %v", q, got, want)
		}
	}
	// An exact name, in any spelling, opens the operation (303) instead of
	// listing one row.
	for q, want := range map[string]string{
		"batches/batch_12":         "/ui/operations/batches/batch_12",
		"batches/batch_123":        "/ui/operations/batches/batch_123",
		"batch_12":                 "/ui/operations/batches/batch_12",
		"gemini:batches/other":     "/ui/operations/batches/other",
		"gemini:batches%2Fother":   "/ui/operations/batches/other",
		"gemini:batches%252Fother": "/ui/operations/batches/other",
		"batch_1x":                 "/ui/operations/interactions/batch_1x",
	} {
		res, err := noRedirect().Get(srv.URL + "/ui/?q=" + url.QueryEscape(q))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != want {
			t.Errorf("search %q = %d → %q, want 303 → %q", q, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
	// ... unless the other filters exclude it: then it is searched.
	if body, _ := get(t, srv.URL+"/ui/?q=batches/batch_12&kind=interaction", http.StatusOK); !strings.Contains(body, "No name matching") {
		t.Errorf("an exact name the kind filter excludes was not searched")
	}
	// The other filters still apply.
	body, _ := get(t, srv.URL+"/ui/?q=batch_1&kind=interaction", http.StatusOK)
	if strings.Contains(body, ">batches/batch_12<") || !strings.Contains(body, ">interactions/batch_1x<") {
		t.Errorf("kind filter not applied to the search")
	}
}

// A list page costs its query and its count: the claim column comes from
// the operation's effect mirror, which CompleteClaim sets to DONE, so no
// claim is read per row.
func TestListPageReadsNoClaims(t *testing.T) {
	s := memledger.New()
	for i := range 30 {
		op, c := settled(fmt.Sprintf("op%02d", i), now.Add(-time.Duration(i)*time.Minute))
		_, lease, err := claims.New(s).CommitOperation(t.Context(), op, c)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := claims.New(s).CompleteClaim(t.Context(), *lease, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv := newConsole(t, s, nil)
	before := s.Counts().Reads.Load()
	body, _ := get(t, srv.URL+"/ui/", http.StatusOK)
	reads := s.Counts().Reads.Load() - before
	// 30 operations read by the page query, 1 for the count, and the
	// summary line's aggregations: one per state, the stuck and the owed
	// count (a read per 1,000 counted, as Firestore bills), none per row.
	if want := int64(30 + 1 + len(lifecycle.States()) + 2); reads != want {
		t.Errorf("a list page of 30 settled rows cost %d reads, want %d (no claim reads)", reads, want)
	}
	if d, h := strings.Count(body, `c-DONE">DONE<`), strings.Count(body, `c-CLAIMED">CLAIMED<`); d != 15 || h != 15 {
		t.Errorf("claim column: %d DONE, %d CLAIMED; want 15 and 15", d, h)
	}
}

// Times mean what they say: a never-observed state time is "—" (never
// 1970), a past next check is "overdue", the list shows a FAILED row's
// error and when the last event was recorded.
func TestTimesAndColumns(t *testing.T) {
	s := store(t)
	op := named(t, "batches/late")
	op.SubmittedAt, op.NextCheckAt = now.Add(-time.Hour), now.Add(-5*time.Minute)
	op.History = []ledger.HistoryEntry{{At: now.Add(-time.Hour), Source: "register", State: lifecycle.Pending, Reason: "first-sighting"}}
	commit(t, s, op, nil)
	failed, c := settled("f", now.Add(-2*time.Hour))
	failed.State, failed.Error = lifecycle.Failed, &results.ErrorInfo{Code: 3, Message: "INVALID_ARGUMENT: bad input file"}
	failed.History[0].UpdateTime, failed.Conflicts[0].UpdateTime = time.Unix(0, 0), time.Unix(0, 0)
	commit(t, s, failed, c)
	srv := newConsole(t, s, nil)
	body, _ := get(t, srv.URL+"/ui/operations/batches/late", http.StatusOK)
	for _, want := range []string{`<dt>State time</dt><dd id="state-time" title="Gemini’s time of the current state">—</dd>`, `(5m overdue)`, `last: never <span class="small">(a check is overdue: reconcile passes ask Gemini only with GEMINI_API_KEY set`} {
		if !strings.Contains(body, want) {
			t.Errorf("operation page lacks %q", want)
		}
	}
	if strings.Contains(body, "1970") || strings.Contains(body, "(5m)") {
		t.Errorf("operation page shows the epoch or an ambiguous countdown")
	}
	// The timeline too: an event that carried no server time (stored at
	// the epoch), applied or conflicting, shows no state time; one that
	// carried a time shows it.
	body, _ = get(t, srv.URL+"/ui/operations/f", http.StatusOK)
	if n := strings.Count(body, "state time "); n != 1 || !strings.Contains(body, "state time "+failed.History[1].UpdateTime.UTC().Format("2006-01-02 15:04:05Z")) {
		t.Errorf("timeline shows %d state times, want only the applied SUCCEEDED's:\n%s", n, body)
	}
	if strings.Contains(body, "state time —") || strings.Contains(body, "1970") {
		t.Errorf("timeline shows a state time for an event that carried none")
	}
	body, _ = get(t, srv.URL+"/ui/", http.StatusOK)
	for _, want := range []string{"code 3 · INVALID_ARGUMENT: bad input file", `<th title="when lrosink last recorded an event of this operation (applied or conflicting)">Last event</th>`, ">1h00m ago<"} {
		if !strings.Contains(body, want) {
			t.Errorf("list lacks %q", want)
		}
	}
}

// With an admin token, a browser signs in through the form and gets an
// HttpOnly, SameSite=Lax cookie (Secure only over TLS) that is not the
// token; a wrong token gets the form again (401); Bearer still works; the
// token is never echoed; sign-out ends the session.
func TestSignIn(t *testing.T) {
	const token = "s3cret-admin-token-0123456789"
	s := store(t)
	commit(t, s, named(t, "batches/b1"), nil)
	srv := newConsole(t, s, func(c *console.Config) { c.AdminToken = token })

	body, h := get(t, srv.URL+"/ui/", http.StatusUnauthorized)
	if !strings.Contains(body, `action="/ui/signin"`) || h.Get("WWW-Authenticate") == "" || strings.Contains(body, "batches/b1") {
		t.Fatalf("unauthenticated /ui/: no sign-in form, or the list leaked:\n%s", body)
	}
	get(t, srv.URL+"/ui/operations/batches/b1", http.StatusUnauthorized)
	get(t, srv.URL+"/ui/style.css", http.StatusOK)

	jar, _ := cookiejar.New(nil)
	cl := &http.Client{Jar: jar}
	res, err := cl.PostForm(srv.URL+"/ui/signin", url.Values{"token": {"wrong-token-wrong-token"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || len(jar.Cookies(mustURL(t, srv.URL+"/ui/"))) != 0 {
		t.Fatalf("wrong token: %d, cookies %v", res.StatusCode, jar.Cookies(mustURL(t, srv.URL+"/ui/")))
	}

	res, err = noRedirect().PostForm(srv.URL+"/ui/signin", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	set := res.Header.Get("Set-Cookie")
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(set, "HttpOnly") || !strings.Contains(set, "SameSite=Lax") ||
		strings.Contains(set, "Secure") || strings.Contains(set, token) {
		t.Fatalf("sign-in: %d, Set-Cookie %q", res.StatusCode, set)
	}
	res, err = cl.PostForm(srv.URL+"/ui/signin", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	b := readAll(t, res)
	if res.StatusCode != http.StatusOK || !strings.Contains(b, ">batches/b1<") || !strings.Contains(b, `action="/ui/signout"`) || strings.Contains(b, token) {
		t.Fatalf("after sign-in: %d\n%s", res.StatusCode, b)
	}

	// Behind a TLS proxy the cookie is Secure.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/signin", strings.NewReader("token="+token))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	res, err = noRedirect().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if !strings.Contains(res.Header.Get("Set-Cookie"), "Secure") {
		t.Errorf("over TLS the cookie is not Secure: %q", res.Header.Get("Set-Cookie"))
	}

	// Bearer still works; a forged cookie does not.
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/ui/health", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if res, err = http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("bearer: %v %v", res, err)
	}
	res.Body.Close()
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/ui/", nil)
	req.AddCookie(&http.Cookie{Name: "lrosink_console", Value: fmt.Sprint(now.Add(time.Hour).Unix()) + ".00"})
	if res, err = http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged cookie: %v %v", res, err)
	}
	res.Body.Close()

	// Sign-out deletes the cookie: the list asks for the token again.
	res, err = cl.PostForm(srv.URL+"/ui/signout", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := readAll(t, res); res.StatusCode != http.StatusUnauthorized || !strings.Contains(b, `action="/ui/signin"`) {
		t.Fatalf("after sign-out: %d", res.StatusCode)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

// TestSearchTooLongIsTheUsersInput: a name that escapes past Firestore's
// id limit (every "/" becomes three bytes) cannot be searched; that is a
// 400 about what was typed, not a 503 saying the ledger did not answer.
func TestSearchTooLongIsTheUsersInput(t *testing.T) {
	srv := newConsole(t, store(t), nil)
	q := "batches/" + strings.Repeat("a/", 496)
	body, _ := get(t, srv.URL+"/ui/?q="+url.QueryEscape(q), http.StatusBadRequest)
	if !strings.Contains(body, "too long to search") {
		t.Fatalf("answer does not say why:\n%s", body)
	}
}

// searchRows are the names a list page shows, in order.
func searchRows(body string) []string {
	var got []string
	for _, part := range strings.Split(body, `<td class="name" data-label="Name"><a href="`)[1:] {
		_, rest, _ := strings.Cut(part, `">`)
		name, _, _ := strings.Cut(rest, "<")
		got = append(got, name)
	}
	return got
}

var nextRE = regexp.MustCompile(`<a href="([^"]*)" rel="next">`)

// A filtered search reads on past the first page of names until it has a
// page of matches or the names run out, and never claims a count it did
// not establish: 67 names under batches/, 9 of them FAILED (two past the
// first 50 names).
func TestSearchReadsOnAndCountsHonestly(t *testing.T) {
	s := store(t)
	var failed []string
	for i := range 67 {
		op := named(t, fmt.Sprintf("batches/b%03d", i))
		if i%8 == 0 {
			op.State = lifecycle.Failed
			failed = append(failed, op.Name)
		}
		commit(t, s, op, nil)
	}
	srv := newConsole(t, s, nil)
	body, _ := get(t, srv.URL+"/ui/?q=batches%2F&state=FAILED", http.StatusOK)
	if got := searchRows(body); fmt.Sprint(got) != fmt.Sprint(failed) {
		t.Errorf("q=batches/&state=FAILED: %d rows %v, want the 9 %v", len(got), got, failed)
	}
	if got := countRE.FindStringSubmatch(body)[1]; !strings.HasPrefix(got, "9 names matching “batches/”") || nextRE.MatchString(body) {
		t.Errorf("q=batches/&state=FAILED: count %q (or a next link), want 9 names matching", got)
	}

	// Unfiltered: a page of 50 that says it is the first 50 of 67, and a
	// next page with the other 17.
	body, _ = get(t, srv.URL+"/ui/?q=batches%2F", http.StatusOK)
	first := searchRows(body)
	if got := countRE.FindStringSubmatch(body)[1]; len(first) != 50 || !strings.HasPrefix(got, "The first 50 of 67 names matching") {
		t.Fatalf("q=batches/: %d rows, count %q; want the first 50 of 67", len(first), got)
	}
	m := nextRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("q=batches/: no next link to the other 17")
	}
	body, _ = get(t, srv.URL+strings.ReplaceAll(m[1], "&amp;", "&"), http.StatusOK)
	rest := searchRows(body)
	if got := countRE.FindStringSubmatch(body)[1]; len(rest) != 17 || !strings.HasPrefix(got, "17 more names matching") || nextRE.MatchString(body) {
		t.Fatalf("q=batches/ next: %d rows, count %q; want the last 17", len(rest), got)
	}
	if all := append(first, rest...); len(all) != 67 || all[0] != "batches/b000" || all[50] != "batches/b050" || all[66] != "batches/b066" {
		t.Errorf("q=batches/ in two pages: %v", all)
	}
}

// countingReader counts the names the console's searches read.
type countingReader struct {
	console.Reader
	names int
}

func (c *countingReader) SearchOperations(ctx context.Context, prefix, after string, limit int) ([]ledger.Operation, error) {
	ops, err := c.Reader.SearchOperations(ctx, prefix, after, limit)
	c.names += len(ops)
	return ops, err
}

// A filter that keeps nothing does not read every name: one request reads
// at most four pages of them, says so, and "next »" reads on.
func TestSearchReadsABoundedNumberOfNames(t *testing.T) {
	s := store(t)
	for i := range 30 {
		commit(t, s, named(t, fmt.Sprintf("batches/b%03d", i)), nil)
	}
	r := &countingReader{Reader: s}
	srv := newConsole(t, r, func(c *console.Config) { c.PageSize = 5 })
	u := srv.URL + "/ui/?q=batches%2F&state=CANCELLED"
	var counts []string
	for pages := 0; ; pages++ {
		r.names = 0
		body, _ := get(t, u, http.StatusOK)
		if r.names > 20 {
			t.Fatalf("one search request read %d names, over 4 pages of 5", r.names)
		}
		if rows := searchRows(body); len(rows) != 0 {
			t.Fatalf("CANCELLED matched %v", rows)
		}
		counts = append(counts, countRE.FindStringSubmatch(body)[1])
		m := nextRE.FindStringSubmatch(body)
		if m == nil {
			break
		}
		if pages == 10 {
			t.Fatalf("the search never ends: %q", counts)
		}
		u = srv.URL + strings.ReplaceAll(m[1], "&amp;", "&")
	}
	want := "[No match among the 20 names read so far starting with “batches/”; there may be more (next ») (by name) " +
		"No more names matching “batches/” (by name)]"
	if fmt.Sprint(counts) != want {
		t.Errorf("counts %q\nwant %q", counts, want)
	}
}
