package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// chromium finds Debian's chromium: $LROSINK_CHROMIUM, else on PATH. make
// test (scripts/ensure-chromium.sh) sets LROSINK_REQUIRE_BROWSER=1, and then
// a missing browser fails the test instead of skipping it.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LROSINK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("LROSINK_REQUIRE_BROWSER") == "1" {
		t.Fatal("chromium not found (apt-get install chromium, or set LROSINK_CHROMIUM)")
	}
	t.Skip("chromium not found; make test installs it (scripts/ensure-chromium.sh)")
	return ""
}

// evil is user metadata that would run if the console did not escape it:
// it renames the page and sets a global.
const evil = `<script>document.title="pwned";window.pwned=1</script><img src=x onerror="window.pwned=2">`

// TestConsoleInBrowser drives the console of a real `lrosink serve` in
// headless Chromium (chromedp over the DevTools protocol): the operations
// appear in the list, the state filter works through the form, an
// operation's page shows its timeline and the published message, and
// nothing from the input runs. Screenshots of each page go to
// $LROSINK_ARTIFACTS, or the test's temp dir.
func TestConsoleInBrowser(t *testing.T) {
	browser := chromium(t)
	bin := build(t, "")
	dir, secret := t.TempDir(), webhooktest.NewSecret()
	// A short stuck threshold, so the pending operation shows on the stuck page.
	p := serve(t, bin, dir, []string{"LROSINK_WEBHOOK_SECRETS=" + secret, "LROSINK_STUCK_AFTER=1s"})
	shots := artifacts(t)

	// A settled batch, a settled batch with hostile metadata (registered,
	// then completed by a signed webhook carrying more), and a pending one.
	mustDeliver(t, p.base, secret, "br_plain", "msg_p", "completed")
	register(t, p.base, `{"name":"batches/br_evil","kind":"batch","metadata":{"note":`+jsonString(evil)+`}}`)
	evilBody := []byte(`{"type":"batch.succeeded","version":"v1","timestamp":"` + time.Now().UTC().Format(time.RFC3339Nano) +
		`","data":{"id":"br_evil","output_file_uri":"gs://bucket/out.jsonl"},"user_metadata":{` + jsonString(evil) + `:"key"}}`)
	if code, outcome, err := deliver(t, p.base, secret, "msg_e", evilBody); err != nil || code != http.StatusOK || outcome != "completed" {
		t.Fatalf("evil delivery: %d %q %v", code, outcome, err)
	}
	register(t, p.base, `{"name":"batches/br_pending","kind":"batch"}`)
	// Names as their submitters know them: a Veo operation by its model
	// path, a batch by its bare id.
	register(t, p.base, `{"name":"models/veo-3.0-generate-001/operations/vid_001","kind":"video"}`)
	register(t, p.base, `{"name":"batches/batch_123","kind":"batch"}`)
	// What the delivery timeline is for: a duplicate of br_plain's
	// completion, and an interaction's requires_action arriving after its
	// completion (late and stale). Neither changes the operation.
	mustDeliver(t, p.base, secret, "br_plain", "msg_p2", "duplicate")
	interaction := func(typ string) []byte {
		return []byte(`{"type":"` + typ + `","version":"v1","timestamp":"` + time.Now().UTC().Format(time.RFC3339Nano) +
			`","data":{"id":"br_int"}}`)
	}
	for _, d := range []struct{ typ, id, want string }{
		{"interaction.completed", "msg_i1", "completed"}, {"interaction.requires_action", "msg_i2", "dropped"},
	} {
		if code, outcome, err := deliver(t, p.base, secret, d.id, interaction(d.typ)); err != nil || code != http.StatusOK || outcome != d.want {
			t.Fatalf("%s: %d %q %v, want 200 %q", d.typ, code, outcome, err, d.want)
		}
	}
	// A failed batch: its error is labelled with its google.rpc code's name.
	failedBody := []byte(`{"type":"batch.failed","version":"v1","timestamp":"` + time.Now().UTC().Format(time.RFC3339Nano) +
		`","data":{"id":"br_failed","error_code":3,"error_message":"The input file could not be read"}}`)
	if code, outcome, err := deliver(t, p.base, secret, "msg_f", failedBody); err != nil || code != http.StatusOK || outcome != "completed" {
		t.Fatalf("failed delivery: %d %q %v", code, outcome, err)
	}
	for range 4 { // the four results lines
		p.next(t)
	}

	b := openTab(t, browser, 1280, 800)
	ctx := b.ctx

	run := b.run
	text := b.text
	shot := func(name string) { t.Helper(); b.shot(shots, name) }
	// untouched checks that nothing from the input ran on the current page.
	untouched := func(page string) {
		t.Helper()
		title, err := chromedp.Run(ctx, chromedp.Title())
		if err != nil {
			t.Fatal(err)
		}
		pwned, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`typeof window.pwned !== "undefined"`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(title, "pwned") || pwned {
			t.Fatalf("%s: input ran in the browser (title %q, window.pwned set %v)", page, title, pwned)
		}
	}

	// The list: every operation, newest first, with the total.
	run("operations page", chromedp.Navigate(p.base+"/ui/"), chromedp.WaitVisible("table.ops"))
	list, count := text("table.ops"), text("#count")
	for _, name := range []string{"batches/br_plain", "batches/br_evil", "batches/br_pending", "interactions/br_int",
		"models/veo-3.0-generate-001/operations/vid_001"} {
		if !strings.Contains(list, name) {
			t.Errorf("the list lacks %s:\n%s", name, list)
		}
	}
	if count != "1–7 of 7" {
		t.Errorf("count label %q, want 1–7 of 7", count)
	}
	if !strings.Contains(list, "code 3 · INVALID_ARGUMENT: The input file could not be read") {
		t.Errorf("the failed batch's error is not labelled:\n%s", list)
	}
	// The summary line: each claim turns DONE just after its results line
	// is written, so wait for the last one as a person reloading would.
	for i := 0; ; i++ {
		sum := text("#summary")
		if strings.Contains(sum, "7 operations") && strings.Contains(sum, "PENDING 3") && strings.Contains(sum, "SUCCEEDED 3") &&
			strings.Contains(sum, "FAILED 1") && strings.Contains(sum, "0 messages owed") {
			break
		}
		if i == 50 {
			t.Fatalf("summary line %q, want 7 operations, PENDING 3, SUCCEEDED 3, FAILED 1, 0 messages owed", sum)
		}
		run("wait", chromedp.Sleep(200*time.Millisecond), chromedp.Navigate(p.base+"/ui/"), chromedp.WaitVisible("#summary"))
	}
	list = text("table.ops")
	untouched("operations")
	shot("operations")

	// The state filter, through the form as a user would.
	// Mark the page, so that waiting for an unmarked one waits for the
	// form's answer.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.old = "1"`)); err != nil {
		t.Fatal(err)
	}
	run("filter by state", chromedp.SetValue(`select[name="state"]`, "PENDING"), chromedp.Click(`button[type="submit"]`),
		chromedp.WaitVisible(`body:not([data-old]) #count`))
	list, count = text("table.ops"), text("#count")
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(loc, "state=PENDING") || count != "1–3 of 3" || !strings.Contains(list, "batches/br_pending") ||
		strings.Contains(list, "batches/br_plain") {
		t.Errorf("filter PENDING: at %s, %q:\n%s", loc, count, list)
	}
	shot("operations-pending")

	// The hostile operation's page: timeline, message, metadata as text.
	run("operation page", chromedp.Navigate(p.base+"/ui/"), chromedp.WaitVisible("table.ops"),
		chromedp.Click(`//a[text()="batches/br_evil"]`), chromedp.WaitVisible("#timeline"))
	timeline, message, metadata := text("#timeline"), text("#message"), text("#metadata")
	if !strings.Contains(timeline, "register") || !strings.Contains(timeline, "webhook") || !strings.Contains(timeline, "SUCCEEDED") {
		t.Errorf("timeline lacks the register and the webhook:\n%s", timeline)
	}
	if !strings.Contains(message, `"idempotency_key": "gemini:batches/br_evil"`) || !strings.Contains(message, `"state": "SUCCEEDED"`) ||
		!strings.Contains(message, `"api_name": "batches/br_evil"`) {
		t.Errorf("published message not shown:\n%s", message)
	}
	// Shown as the very characters that came in: escaped, not interpreted.
	if !strings.Contains(metadata, `<script>document.title=\"pwned\";window.pwned=1</script>`) {
		t.Errorf("metadata not shown as text:\n%s", metadata)
	}
	scripts, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("script, img").length`))
	if err != nil {
		t.Fatal(err)
	}
	if scripts != 0 {
		t.Errorf("%d script/img elements on the page: the input became markup", scripts)
	}
	untouched("operation")
	shot("operation")

	// Search by a prefix of the name, through the form.
	run("search", chromedp.Navigate(p.base+"/ui/"), chromedp.WaitVisible("table.ops"),
		markPage(),
		chromedp.SetValue(`input[name="q"]`, "br_pe"), chromedp.Click(`button[type="submit"]`),
		chromedp.WaitVisible(`body:not([data-old]) #count`))
	if list := text("table.ops"); !strings.Contains(list, "batches/br_pending") || strings.Contains(list, "batches/br_plain") {
		t.Errorf("search br_pe: want batches/br_pending only:\n%s", list)
	}
	shot("search")

	// A typed URL: the canonical one opens the page; the document id's
	// spelling redirects to it.
	for _, u := range []string{"/ui/operations/batches/br_plain", "/ui/operations/gemini:batches%2Fbr_plain"} {
		run("typed URL "+u, chromedp.Navigate(p.base+u), chromedp.WaitVisible("h1.opname"))
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		if h := text("h1.opname"); h != "batches/br_plain" || loc != p.base+"/ui/operations/batches/br_plain" {
			t.Errorf("typed %s: at %s showing %q", u, loc, h)
		}
	}
	// A Veo operation's page is titled with its model path (its address
	// is the canonical name); a bare id lands on its operation.
	run("Veo page", chromedp.Navigate(p.base+"/ui/operations/operations/vid_001"), chromedp.WaitVisible("h1.opname"))
	if title, err := chromedp.Run(ctx, chromedp.Title()); err != nil || title != "models/veo-3.0-generate-001/operations/vid_001 · lrosink" {
		t.Errorf("the Veo operation's page is titled %q (%v), want its model path", title, err)
	}
	if h := text("h1.opname"); h != "models/veo-3.0-generate-001/operations/vid_001" {
		t.Errorf("the Veo operation's heading is %q", h)
	}
	if next := text("#next-check"); next != "never: no GEMINI_API_KEY" {
		t.Errorf("without GEMINI_API_KEY the next check reads %q", next)
	}
	shot("operation-veo")
	run("bare id", chromedp.Navigate(p.base+"/ui/operations/batch_123"), chromedp.WaitVisible("h1.opname"))
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || loc != p.base+"/ui/operations/batches/batch_123" {
		t.Errorf("/ui/operations/batch_123 landed on %q (%v), want /ui/operations/batches/batch_123", loc, err)
	}
	run("miss", chromedp.Navigate(p.base+"/ui/operations/batches/batch_124"), chromedp.WaitVisible("#miss"))
	if near := text("table.ops"); !strings.Contains(near, "batches/batch_123") {
		t.Errorf("a miss does not offer the nearest name:\n%s", near)
	}
	shot("not-found")
	run("exact search", chromedp.Navigate(p.base+"/ui/"), chromedp.WaitVisible("table.ops"), markPage(),
		chromedp.SetValue(`input[name="q"]`, "batch_123"), chromedp.Click(`button[type="submit"]`),
		chromedp.WaitVisible(`body:not([data-old]) main h1`))
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || loc != p.base+"/ui/operations/batches/batch_123" {
		t.Errorf("an exact-name search landed on %q (%v), want the operation's page", loc, err)
	}

	run("done claim", chromedp.Navigate(p.base+"/ui/operations/batches/br_plain"), chromedp.WaitVisible("h1.opname"))
	if done := text("#done-at"); !strings.Contains(done, "ago") {
		t.Errorf("a DONE claim does not say when it was done: %q", done)
	}

	// The delivery timelines: the log is written just after each answer, so
	// wait for it as a person reloading would.
	for _, c := range []struct{ page, want string }{
		{"/ui/operations/batches/br_plain", "duplicate"},
		{"/ui/operations/interactions/br_int", "regress-from-terminal"},
	} {
		for i := 0; ; i++ {
			run("delivery timeline "+c.page, chromedp.Navigate(p.base+c.page), chromedp.WaitVisible("h1.opname"))
			if strings.Contains(text("main"), c.want) {
				break
			}
			if i == 50 {
				t.Fatalf("%s: the delivery timeline never showed %q:\n%s", c.page, c.want, text("main"))
			}
			run("wait", chromedp.Sleep(200*time.Millisecond))
		}
		if tl := text("#deliveries"); !strings.Contains(tl, c.want) {
			t.Errorf("%s: %q is not in the delivery timeline:\n%s", c.page, c.want, tl)
		}
	}
	shot("operation-deliveries")

	// The stuck page lists the pending operation once it is over 1s old.
	for i := 0; ; i++ {
		run("stuck page", chromedp.Navigate(p.base+"/ui/stuck"), chromedp.WaitVisible("main h1"))
		if strings.Contains(text("main"), "batches/br_pending") {
			break
		}
		if i == 50 {
			t.Fatalf("the stuck page never listed batches/br_pending")
		}
		run("wait", chromedp.Sleep(200*time.Millisecond))
	}
	untouched("stuck")
	shot("stuck")
	run("health page", chromedp.Navigate(p.base+"/ui/health"), chromedp.WaitVisible("#passes"))
	health := text("main")
	if !strings.Contains(health, "sqlite:") {
		t.Errorf("health page does not name the store:\n%s", health)
	}
	// The ledger's count, with no GEMINI_API_KEY (nothing is polled): the
	// three registered operations still pending.
	if pending := strings.TrimSpace(text("#pending")); pending != "3" {
		t.Errorf("health page: pending %q, want the ledger's 3", pending)
	}
	shot("health")

	// A phone, 390×844: no page scrolls sideways.
	run("phone", chromedp.EmulateViewport(390, 844))
	for _, u := range []string{"/ui/", "/ui/operations/batches/br_evil", "/ui/stuck", "/ui/health"} {
		run("phone "+u, chromedp.Navigate(p.base+u), chromedp.WaitVisible("main h1"))
		w, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
		if err != nil {
			t.Fatal(err)
		}
		if w > 390 {
			t.Errorf("at 390 px, %s is %d px wide: it scrolls sideways", u, w)
		}
		// No value is clipped: every cell shows all it holds (its content
		// is no wider than its box) and lies within the screen.
		clipped, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("main td, main th, main dd")]
			.filter(e => e.offsetParent !== null)
			.filter(e => { const r = e.getBoundingClientRect();
				return e.scrollWidth > e.clientWidth + 1 || r.left < -1 || r.right > window.innerWidth + 1; })
			.map(e => (e.dataset.label || e.tagName) + ": " + e.textContent.trim().slice(0, 40))`))
		if err != nil {
			t.Fatal(err)
		}
		if len(clipped) > 0 {
			t.Errorf("at 390 px, %s clips %d cells: %q", u, len(clipped), clipped)
		}
		if u == "/ui/health" {
			// The reconcile passes' last column, and the configuration's
			// values: shown within the screen, not behind an inner scroll.
			for _, sel := range []string{"#passes tbody tr:first-child td:last-child", "#config tr:last-child td"} {
				box, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => { const e = document.querySelector(`+jsonString(sel)+`);
					if (!e) return [];
					const r = e.getBoundingClientRect(); return [r.left, r.right, r.width, e.scrollWidth, e.clientWidth]; })()`))
				if err != nil {
					t.Fatal(err)
				}
				if len(box) != 5 || box[2] <= 0 || box[0] < 0 || box[1] > 390 || box[3] > box[4]+1 {
					t.Errorf("at 390 px, the health page's %s is not all visible: [left right width scrollWidth clientWidth] = %v", sel, box)
				}
			}
			shot("phone-health")
		}
		clock, err := chromedp.Run(ctx, chromedp.Evaluate[int](`Math.round(document.querySelector(".now").getBoundingClientRect().height)`))
		if err != nil {
			t.Fatal(err)
		}
		if clock > 24 {
			t.Errorf("at 390 px, %s: the header clock wraps (%d px high)", u, clock)
		}
		if u == "/ui/" {
			shot("phone")
		}
		if u == "/ui/operations/batches/br_evil" {
			shot("phone-operation")
		}
	}

	// With GEMINI_API_KEY (a fake Gemini), passes run and check what is
	// due, yet the Health page still shows the ledger's count: two
	// registered operations, neither due within the grace period.
	fake := fakegemini.New()
	fakeURL := fake.Start(t).URL
	for _, id := range []string{"br_k1", "br_k2"} {
		fake.SetBatch(id, fakegemini.BatchState{State: "BATCH_STATE_RUNNING"})
	}
	keyed := serve(t, bin, t.TempDir(), []string{"LROSINK_WEBHOOK_SECRETS=" + secret,
		"GEMINI_API_KEY=" + fakegemini.DefaultAPIKey, "GOOGLE_GEMINI_BASE_URL=" + fakeURL}, "--reconcile-every", "200ms")
	for _, id := range []string{"br_k1", "br_k2"} {
		register(t, keyed.base, `{"name":"batches/`+id+`","kind":"batch"}`)
	}
	run("desktop", chromedp.EmulateViewport(1280, 800))
	run("health page with a key", chromedp.Navigate(keyed.base+"/ui/health"), chromedp.WaitVisible("#passes"))
	if pending := strings.TrimSpace(text("#pending")); pending != "2" {
		t.Errorf("health page with GEMINI_API_KEY: pending %q, want the ledger's 2", pending)
	}
}

// TestConsoleSignInInBrowser: with LROSINK_ADMIN_TOKEN set, a browser gets
// the sign-in form; a wrong token does not reach the page asked for, the
// right one does (through the session cookie), a link from another site
// opens a page signed in (SameSite=Lax), and sign-out ends it.
func TestConsoleSignInInBrowser(t *testing.T) {
	browser := chromium(t)
	bin := build(t, "")
	const token = "browser-admin-token-0123456789"
	p := serve(t, bin, t.TempDir(), []string{"LROSINK_ADMIN_TOKEN=" + token})

	b := openTab(t, browser, 1280, 800)
	ctx := b.ctx
	run := b.run
	h1 := func() string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text("main h1"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	signIn := func(tok string) {
		t.Helper()
		run("sign in", markPage(),
			chromedp.SetValue(`input[name="token"]`, tok), chromedp.Click(`form.signin button`),
			chromedp.WaitVisible(`body:not([data-old]) main h1`))
	}

	// A deep link: the sign-in lands on the page asked for.
	run("console", chromedp.Navigate(p.base+"/ui/health"), chromedp.WaitVisible("form.signin"))
	if h := h1(); h != "Sign in" {
		t.Fatalf("unauthenticated /ui/health shows %q, want the sign-in form", h)
	}
	signIn("not-the-token-at-all")
	if h := h1(); h != "Sign in" {
		t.Fatalf("a wrong token reached %q", h)
	}
	signIn(token)
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if h := h1(); h != "Health" || loc != p.base+"/ui/health" {
		t.Fatalf("the right token reached %q at %s, want Health at /ui/health", h, loc)
	}
	run("list", chromedp.Navigate(p.base+"/ui/"), chromedp.WaitVisible("main h1"))
	if h := h1(); h != "Operations" {
		t.Fatalf("after sign-in, /ui/ shows %q", h)
	}
	// A link on another site (localhost is not the same site as
	// 127.0.0.1) opens the console signed in.
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!doctype html><a id="alert" href="`+p.base+`/ui/stuck">see the stuck operations</a>`)
	}))
	defer elsewhere.Close()
	run("link from another site", chromedp.Navigate(strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1)),
		chromedp.WaitVisible("#alert"), chromedp.Click("#alert"), chromedp.WaitVisible("main h1"))
	if h := h1(); h != "Stuck" {
		t.Fatalf("a link from another site reached %q, want the Stuck page signed in", h)
	}
	run("sign out", markPage(),
		chromedp.Click(`form.signout button`), chromedp.WaitVisible(`body:not([data-old]) main h1`))
	if h := h1(); h != "Sign in" {
		t.Fatalf("after sign-out /ui/ shows %q", h)
	}
}

// markPage marks the current page, so that waiting for an unmarked one
// waits for the next page to load.
func markPage() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[string](`document.body.dataset.old = "1"`)(ctx, t)
		return err
	})
}

func register(t *testing.T, base, body string) {
	t.Helper()
	resp, err := http.Post(base+"/Register", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		t.Fatalf("register %s: %d", body, resp.StatusCode)
	}
}

func jsonString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// TestConsoleStuckClaimsOnAPhone: the Stuck page's claims that are not
// done fit a 390 px phone, as every page does. Results go to /dev/full,
// where every write fails, so each settled operation's claim is released
// with its message still owed and stays on the page.
func TestConsoleStuckClaimsOnAPhone(t *testing.T) {
	browser := chromium(t)
	bin := build(t, "")
	secret := webhooktest.NewSecret()
	p := serve(t, bin, t.TempDir(), []string{"LROSINK_WEBHOOK_SECRETS=" + secret, "LROSINK_RESULTS=file:/dev/full"})
	for i, id := range []string{"br_owed_with_a_rather_long_identifier_0123456789abcdef", "br_owed_2"} {
		// The sink fails, so the answer is not a success; the claim is
		// what this test is after.
		if _, _, err := deliver(t, p.base, secret, fmt.Sprintf("msg_owed_%d", i), body(id)); err != nil {
			t.Fatal(err)
		}
	}

	b := openTab(t, browser, 390, 844)
	ctx := b.ctx
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(p.base+"/ui/stuck"), chromedp.WaitVisible("main h1")); err != nil {
		t.Fatal(err)
	}
	page, err := chromedp.Run(ctx, chromedp.Text("main"))
	if err != nil {
		t.Fatal(err)
	}
	// Settled, so not among the stuck operations: listed as a claim.
	if !strings.Contains(page, "batches/br_owed_2") {
		t.Fatalf("claims not done: want batches/br_owed_2:\n%s", page)
	}
	w, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if w > 390 {
		t.Errorf("at 390 px, /ui/stuck with claims not done is %d px wide: it scrolls sideways", w)
	}
	b.shot(artifacts(t), "phone-stuck")
}
