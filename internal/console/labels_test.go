package console_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/console"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/results"
)

// An error reads "code 3 · INVALID_ARGUMENT: …", in the list and on the
// operation's page, never as a bare number that looks like a count.
func TestErrorsAreLabelled(t *testing.T) {
	s := store(t)
	failed, c := settled("f", now.Add(-time.Hour))
	failed.State, failed.Error = lifecycle.Failed, &results.ErrorInfo{Code: 3, Message: "The prompt could not be read"}
	commit(t, s, failed, c)
	quota, c2 := settled("q", now.Add(-2*time.Hour))
	quota.State, quota.Error = lifecycle.Failed, &results.ErrorInfo{Code: 0, Message: "quota exceeded"}
	commit(t, s, quota, c2)
	srv := newConsole(t, s, nil)
	list, _ := get(t, srv.URL+"/ui/", http.StatusOK)
	page, _ := get(t, srv.URL+"/ui/operations/f", http.StatusOK)
	for what, body := range map[string]string{"list": list, "page": page} {
		if !strings.Contains(body, ">code 3 · INVALID_ARGUMENT: The prompt could not be read<") {
			t.Errorf("%s: the error is not labelled with its code's name", what)
		}
		if strings.Contains(body, ">3 The prompt") {
			t.Errorf("%s: a bare code before the message", what)
		}
	}
	if !strings.Contains(list, ">no code: quota exceeded<") || strings.Contains(list, ">0 quota") {
		t.Errorf("list: an error without a code reads as a count")
	}
}

// With the passes in this process and no GEMINI_API_KEY, a pending
// operation's next check is "never: no GEMINI_API_KEY"; with a key it is
// the scheduled time; a settled operation has none either way.
func TestNextCheckNeverWithoutKey(t *testing.T) {
	s := store(t)
	op := named(t, "batches/waiting")
	op.SubmittedAt, op.NextCheckAt = now.Add(-time.Hour), now.Add(-5*time.Minute)
	commit(t, s, op, nil)
	off := newConsole(t, s, func(c *console.Config) { c.PollingOff = true })
	on := newConsole(t, s, nil)
	body, _ := get(t, off.URL+"/ui/operations/batches/waiting", http.StatusOK)
	if !strings.Contains(body, `<dd id="next-check">never: no GEMINI_API_KEY</dd>`) {
		t.Errorf("polling off: next check is not never:\n%s", body)
	}
	if strings.Contains(body, "overdue") {
		t.Errorf("polling off: a check is said to be overdue that will never come")
	}
	body, _ = get(t, on.URL+"/ui/operations/batches/waiting", http.StatusOK)
	if strings.Contains(body, "never: no GEMINI_API_KEY") || !strings.Contains(body, "(5m overdue)") {
		t.Errorf("polling on: want the scheduled time, overdue")
	}
	done, c := settled("done", now.Add(-time.Hour))
	commit(t, s, done, c)
	body, _ = get(t, off.URL+"/ui/operations/done", http.StatusOK)
	if strings.Contains(body, "never: no GEMINI_API_KEY") {
		t.Errorf("a settled operation needs no check, but says never")
	}
}

// No timeline line says a word twice in a row: a replay reads "replay
// results message published again, replay_id replay-…", not "replay
// replay replay-…".
func TestTimelineLabelsAreNotRepeated(t *testing.T) {
	s := store(t)
	op, c := settled("r", now.Add(-time.Hour))
	op.Replays = []ledger.Replay{{ID: "replay-02edc5a1", At: now.Add(-10 * time.Minute)}}
	commit(t, s, op, c)
	srv := newConsole(t, s, nil)
	body, _ := get(t, srv.URL+"/ui/operations/r", http.StatusOK)
	_, tl, ok := strings.Cut(body, `<ol class="timeline" id="timeline">`)
	if !ok {
		t.Fatalf("no timeline:\n%s", body)
	}
	tl, _, _ = strings.Cut(tl, "</ol>")
	tags := regexp.MustCompile(`<[^>]*>`)
	var replays int
	for _, li := range strings.Split(tl, "<li")[1:] {
		words := strings.Fields(tags.ReplaceAllString("<li"+li, " "))
		for i := 1; i < len(words); i++ {
			if words[i] == words[i-1] {
				t.Errorf("timeline line repeats %q: %s", words[i], strings.Join(words, " "))
			}
		}
		if strings.Contains(li, "replay-02edc5a1") {
			replays++
			n := 0
			for _, w := range words {
				if w == "replay" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("replay line says replay %d times: %s", n, strings.Join(words, " "))
			}
		}
	}
	if replays != 1 {
		t.Errorf("%d replay lines, want 1:\n%s", replays, tl)
	}
}

// A Veo operation is titled with its model path, as its submitter knows
// it, while its page stays at the canonical name; the list names it so too.
func TestVeoOperationIsTitledWithItsModelPath(t *testing.T) {
	s := store(t)
	const veo = "models/veo-3.0-generate-001/operations/vid_001"
	commit(t, s, named(t, veo), nil)
	srv := newConsole(t, s, nil)
	body, _ := get(t, srv.URL+"/ui/operations/operations/vid_001", http.StatusOK)
	for _, want := range []string{"<title>" + veo + " · lrosink</title>", `<h1 class="opname">` + veo + `</h1>`, `<dd class="mono" id="canonical"`} {
		if !strings.Contains(body, want) {
			t.Errorf("Veo page lacks %q", want)
		}
	}
	if list, _ := get(t, srv.URL+"/ui/", http.StatusOK); !strings.Contains(list, `<a href="/ui/operations/operations/vid_001">`+veo+`</a>`) {
		t.Errorf("the list does not name the Veo operation by its model path")
	}
}

// A bare id two kinds share opens neither: the miss page lists both.
func TestBareIDOfTwoKindsListsBoth(t *testing.T) {
	s := store(t)
	commit(t, s, named(t, "batches/twin"), nil)
	commit(t, s, named(t, "interactions/twin"), nil)
	srv := newConsole(t, s, nil)
	body, _ := get(t, srv.URL+"/ui/operations/twin", http.StatusNotFound)
	if !strings.Contains(body, `href="/ui/operations/batches/twin"`) || !strings.Contains(body, `href="/ui/operations/interactions/twin"`) ||
		!strings.Contains(body, "More than one kind") {
		t.Errorf("an ambiguous bare id does not list both operations:\n%s", body)
	}
	// A miss far from every name still offers the search box.
	body, _ = get(t, srv.URL+"/ui/operations/zzz", http.StatusNotFound)
	if !strings.Contains(body, `name="q" value="zzz"`) || !strings.Contains(body, "No name comes near it") {
		t.Errorf("a miss without near names:\n%s", body)
	}
}

// A miss on a name that is no name at all is still a 404 with the search
// box (its input escaped), never a store error.
func TestMissOnHostileNames(t *testing.T) {
	s := store(t)
	commit(t, s, named(t, "batches/batch_123"), nil)
	srv := newConsole(t, s, nil)
	for _, p := range []string{"%00", "a%2F%2Fb", "%3Cscript%3Ealert(1)%3C%2Fscript%3E", "batches/", strings.Repeat("x", 2000), "%25zz"} {
		body, _ := get(t, srv.URL+"/ui/operations/"+p, http.StatusNotFound)
		if strings.Contains(body, "<script>") {
			t.Errorf("%s: the name reached the page as markup", p)
		}
	}
}
