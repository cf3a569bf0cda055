package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/register"
	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// goTypeWords are what a detail must never hold: Go's own words for its
// types, which encoding/json's errors carry ("Go struct field
// RegisterRequest.metadata of type map[string]interface {}").
var goTypeWords = []string{"Go struct", "Go value", "map[string]", "interface {}", "json.", "httpapi.", "[]interface", "*string", "*struct"}

// checkDetail fails when an answer's detail is empty or names a Go type.
func checkDetail(t *testing.T, what string, a httpapi.Answer) {
	t.Helper()
	if a.Detail == "" {
		t.Errorf("%s: %+v: no detail saying what is wrong", what, a)
	}
	for _, w := range goTypeWords {
		if strings.Contains(a.Detail, w) {
			t.Errorf("%s: detail %q holds the Go words %q", what, a.Detail, w)
		}
	}
}

// decodeAnswer reads an answer that must be one JSON object.
func decodeAnswer(t *testing.T, what, raw string) httpapi.Answer {
	t.Helper()
	var a httpapi.Answer
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		t.Fatalf("%s: answer is not JSON: %q", what, raw)
	}
	return a
}

// wrongTyped are JSON values of every type, by the type's name: each
// field is sent every one but those of its own type (null is a field's
// absence).
var wrongTyped = map[string][]string{
	"string": {`"s"`},
	"number": {`1`, `-1.5`, `12345678901234567890123`},
	"bool":   {`true`, `false`},
	"array":  {`[]`, `[1,2]`, `["batches/a"]`},
	"object": {`{}`, `{"a":1}`},
}

// valuesNot is every wrong-typed value for a field of JSON type typ.
func valuesNot(typ string) []string {
	var out []string
	for _, name := range []string{"string", "number", "bool", "array", "object"} {
		if name != typ {
			out = append(out, wrongTyped[name]...)
		}
	}
	return out
}

// TestRegisterBadBodySweep: every bad /Register body is answered 400 with
// the reason CONTRACT.md §5 names (a field of the wrong JSON type by its
// field's reason, a body that is no JSON object invalid-json), a detail
// that says what is wrong without a Go type name, and nothing stored.
func TestRegisterBadBodySweep(t *testing.T) {
	t.Parallel()
	srv, _ := intentServer(t)
	long := strings.Repeat("x", 2000)
	cases := []struct{ body, reason string }{
		// Not a JSON object.
		{``, "invalid-json"},
		{`   `, "invalid-json"},
		{`{"name":`, "invalid-json"},
		{`{"name":"batches/a"`, "invalid-json"},
		{`{name:"batches/a"}`, "invalid-json"},
		{`[1]`, "invalid-json"},
		{`[{"name":"batches/a"}]`, "invalid-json"},
		{`"batches/a"`, "invalid-json"},
		{`1`, "invalid-json"},
		{`true`, "invalid-json"},
		{`null`, "invalid-json"},
		{`{"name":"batches/a"} {"name":"batches/b"}`, "invalid-json"},
		{`{"name":"batches/a"}x`, "invalid-json"},
		{"{\"name\":\"batches/a\",\"metadata\":{\"a\":\"\xff\"}}", "invalid-json"},
		// The issue's own: an array for metadata.
		{`{"name":"batches/a","metadata":[1,2]}`, "invalid-metadata"},
		{`{"name":"batches/a","kind":"batch","metadata":"x"}`, "invalid-metadata"},
		{`{"name":"batches/a","metadata":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, "invalid-metadata"},
		{`{"name":"batches/a","metadata":{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}}`, "invalid-metadata"},
		{`{"name":"batches/a","metadata":{"lrosink_intent":"k"}}`, "invalid-metadata"},
		{`{"name":"batches/a","metadata":{"big":"` + strings.Repeat("x", 70<<10) + `"}}`, "invalid-metadata"},
		// Names.
		{`{}`, "invalid-name"},
		{`{"name":""}`, "invalid-name"},
		{`{"name":null}`, "invalid-name"},
		{`{"name":"abc"}`, "invalid-name"},
		{`{"name":"files/abc"}`, "invalid-name"},
		{`{"name":"batches/a b"}`, "invalid-name"},
		{`{"name":"batches/` + long + `"}`, "invalid-name"},
		{`{"name":"batches/a","kind":"video"}`, "invalid-name"},
		// Kinds.
		{`{"name":"batches/a","kind":"spaceship"}`, "invalid-kind"},
		{`{"name":"batches/a","kind":"BATCH "}`, "invalid-kind"},
		// Intents.
		{`{"intent":"","kind":"batch","model":"models/m"}`, "invalid-intent"},
		{`{"intent":"a b","kind":"batch"}`, "invalid-intent"},
		{`{"intent":"` + strings.Repeat("k", 129) + `","kind":"batch"}`, "invalid-intent"},
		{`{"intent":"k","kind":"batch","model":"` + long + `"}`, "invalid-intent"},
		{`{"intent":"k","kind":"batch","display_name":"` + long + `"}`, "invalid-intent"},
		{`{"model":"models/m"}`, "invalid-intent"},
		{`{"intent":"k","kind":"spaceship"}`, "invalid-kind"},
		{`{"intent":"k","kind":"batch","metadata":[1]}`, "invalid-metadata"},
		{`{"intent":"k","kind":"batch","metadata":{"lrosink_intent":"k"}}`, "invalid-metadata"},
		{`{"name":"batches/a","intent":"k","metadata":{"a":1}}`, "invalid-metadata"},
		{`{"name":"batches/a","intent":"k","kind":"batch"}`, "invalid-intent"},
		{`{"name":"batches/a","intent":"k","model":"models/m"}`, "invalid-intent"},
	}
	for _, c := range cases {
		what := fmt.Sprintf("%.60q", c.body)
		status, raw := postRaw(t, srv.URL, c.body)
		a := decodeAnswer(t, what, raw)
		if status != http.StatusBadRequest || a.Reason != c.reason || a.Outcome != "rejected" {
			t.Errorf("%s: %d %+v, want 400 rejected/%s", what, status, a, c.reason)
		}
		checkDetail(t, what, a)
	}
	assertNothingRegistered(t, srv.URL)
}

// TestRegisterWrongTypeSweep sends every field of each body shape (a
// registration, an intent's record, a bind) every JSON value of a wrong
// type: each is refused 400 with its field's reason, the detail naming the
// field and the type it needs in JSON's words.
func TestRegisterWrongTypeSweep(t *testing.T) {
	t.Parallel()
	srv, _ := intentServer(t)
	fields := map[string]struct{ typ, reason, need string }{
		"name":         {"string", "invalid-name", "a string"},
		"kind":         {"string", "invalid-kind", "a string"},
		"metadata":     {"object", "invalid-metadata", "a JSON object"},
		"intent":       {"string", "invalid-intent", "a string"},
		"model":        {"string", "invalid-intent", "a string"},
		"display_name": {"string", "invalid-intent", "a string"},
	}
	shapes := map[string]map[string]string{
		"registration": {"name": `"batches/sweep"`, "kind": `"batch"`, "metadata": `{"a":1}`},
		"record":       {"intent": `"k1"`, "kind": `"batch"`, "model": `"models/m"`, "display_name": `"d"`, "metadata": `{}`},
		"bind":         {"name": `"batches/sweep"`, "intent": `"k1"`},
	}
	n := 0
	for shape, base := range shapes {
		for field, f := range fields {
			for _, bad := range valuesNot(f.typ) {
				body := map[string]json.RawMessage{}
				for k, v := range base {
					body[k] = json.RawMessage(v)
				}
				body[field] = json.RawMessage(bad)
				b, err := json.Marshal(body)
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("%s with %s=%s", shape, field, bad)
				status, raw := postRaw(t, srv.URL, string(b))
				a := decodeAnswer(t, what, raw)
				n++
				if status != http.StatusBadRequest || a.Reason != f.reason {
					t.Errorf("%s: %d %+v, want 400 %s", what, status, a, f.reason)
				}
				checkDetail(t, what, a)
				if !strings.Contains(a.Detail, `"`+field+`"`) || !strings.Contains(a.Detail, f.need) {
					t.Errorf("%s: detail %q does not name the field %q and %s", what, a.Detail, field, f.need)
				}
			}
		}
	}
	if n < 100 {
		t.Fatalf("only %d wrong-typed bodies were sent", n)
	}
	assertNothingRegistered(t, srv.URL)
}

// assertNothingRegistered: every body was refused, so the name the sweep
// registers last is new (201) — no earlier body stored it, nor an intent
// under its key.
func assertNothingRegistered(t *testing.T, url string) {
	t.Helper()
	for _, body := range []string{`{"name":"batches/a","kind":"batch"}`, `{"name":"batches/sweep","kind":"batch"}`,
		`{"intent":"k","kind":"batch"}`, `{"intent":"k1","kind":"video"}`} {
		if status, raw := postRaw(t, url, body); status != http.StatusCreated {
			t.Errorf("%s after the sweep: %d %s: a refused body stored something", body, status, raw)
		}
	}
}

// TestWebhookBadBodySweep: every signed /Webhook body that is no Gemini
// event envelope is answered 400 bad-envelope, a bad operation name 400
// invalid-name (CONTRACT.md §3), each with a detail free of Go type names;
// an unknown event type is 200 ignored; fields of the envelope lrosink
// reads beyond type and data.id tolerate any JSON type. Nothing is stored.
func TestWebhookBadBodySweep(t *testing.T) {
	t.Parallel()
	r := newBodyRig(t, 1<<20)
	long := strings.Repeat("x", 2000)
	env := func(data string) string {
		return `{"type":"batch.succeeded","version":"v1","timestamp":"2026-12-29T09:20:00Z","data":` + data + `}`
	}
	cases := []struct {
		body   string
		status int
		reason string
	}{
		{``, 400, "bad-envelope"},
		{`  `, 400, "bad-envelope"},
		{`{`, 400, "bad-envelope"},
		{`{"type":"batch.succeeded","data":{"id":"batches/a"}`, 400, "bad-envelope"},
		{`[1]`, 400, "bad-envelope"},
		{`"batch.succeeded"`, 400, "bad-envelope"},
		{`null`, 400, "bad-envelope"},
		{`12`, 400, "bad-envelope"},
		{"{\"type\":\"batch.succeeded\",\"data\":{\"id\":\"batches/\xff\"}}", 400, "bad-envelope"},
		{env(`{"id":"batches/a"}`) + `x`, 400, "bad-envelope"},
		{`{}`, 400, "bad-envelope"},
		{`{"data":{"id":"batches/a"}}`, 400, "bad-envelope"},
		{`{"type":"","data":{"id":"batches/a"}}`, 400, "bad-envelope"},
		{`{"type":"batch.succeeded"}`, 400, "bad-envelope"},
		{`{"type":"batch.succeeded","data":null}`, 400, "bad-envelope"},
		{env(`{}`), 400, "bad-envelope"},
		{env(`{"id":""}`), 400, "bad-envelope"},
		{env(`{"id":"batches/` + long + `"}`), 400, "bad-envelope"},
		{env(`{"id":"files/abc"}`), 400, "invalid-name"},
		{env(`{"id":"batches/a b"}`), 400, "invalid-name"},
		{`{"type":"interaction.completed","data":{"id":"batches/a"}}`, 400, "invalid-name"},
		{`{"type":"batch.exploded","data":{"id":"batches/a"}}`, 200, "unknown-event-type"},
		{`{"type":"ping"}`, 200, "unknown-event-type"},
	}
	// The fields Parse requires, with every wrong-typed value.
	for _, bad := range valuesNot("string") {
		cases = append(cases, struct {
			body   string
			status int
			reason string
		}{`{"type":` + bad + `,"data":{"id":"batches/a"}}`, 400, "bad-envelope"},
			struct {
				body   string
				status int
				reason string
			}{env(`{"id":` + bad + `}`), 400, "bad-envelope"})
	}
	for _, bad := range valuesNot("object") {
		cases = append(cases, struct {
			body   string
			status int
			reason string
		}{`{"type":"batch.succeeded","data":` + bad + `}`, 400, "bad-envelope"})
	}
	for i, c := range cases {
		what := fmt.Sprintf("%.60q", c.body)
		status, a := r.post(t, fmt.Sprintf("msg_sweep_%d", i), c.body)
		if status != c.status || a.Reason != c.reason {
			t.Errorf("%s: %d %+v, want %d %s", what, status, a, c.status, c.reason)
		}
		if status == http.StatusBadRequest {
			checkDetail(t, what, a)
		}
	}
	if _, w, _ := r.store.Counts().Snapshot(); w != 0 {
		t.Fatalf("refused deliveries wrote %d documents", w)
	}

	// The fields lrosink reads but does not require take any type: the
	// delivery is still applied, and no detail names a Go type.
	optional := []string{"version", "timestamp", "user_metadata"}
	dataOptional := []string{"output_file_uri", "file_name", "video_uri", "error_code", "error_message", "error", "errors", "user_metadata"}
	n := 0
	for _, field := range append(optional, dataOptional...) {
		for _, bad := range valuesNot("") {
			n++
			id := fmt.Sprintf("batches/tolerant%d", n)
			body := fmt.Sprintf(`{"type":"batch.failed","version":"v1","data":{"id":%q,%q:%s}}`, id, field, bad)
			if n <= len(optional)*len(valuesNot("")) {
				body = fmt.Sprintf(`{"type":"batch.failed",%q:%s,"data":{"id":%q}}`, field, bad, id)
			}
			status, a := r.post(t, fmt.Sprintf("msg_tolerant_%d", n), body)
			if status != http.StatusOK || a.Outcome == "rejected" || a.Outcome == "error" || strings.ContainsAny(a.Detail, "{*") {
				t.Errorf("%s=%s: %d %+v, want it applied", field, bad, status, a)
			}
		}
	}
}

// post sends body to the rig's Webhook function, signed with its secret.
func (r *bodyRig) post(t *testing.T, id, body string) (int, httpapi.Answer) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.srv.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = webhooktest.Headers(id, now, []byte(body), r.secret)
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, decodeAnswer(t, fmt.Sprintf("%.60q", body), string(raw))
}

// TestReconcileBadPushSweep: a push whose envelope or shard request holds
// a value of the wrong JSON type is answered 400 bad-shard-request with a
// detail that names the field in JSON's words, never a Go type, and runs
// no pass.
func TestReconcileBadPushSweep(t *testing.T) {
	t.Parallel()
	p := &passes{}
	h := httpapi.Reconcile(p, logging.Discard(), 0, nil, httpapi.WithShardPasses(p), httpapi.WithCoordinator(p))
	var bodies []string
	for _, bad := range valuesNot("object") {
		bodies = append(bodies, `{"message":`+bad+`}`)
	}
	for _, bad := range valuesNot("string") {
		bodies = append(bodies, `{"message":{"data":`+bad+`}}`, `{"message":{"data":"e30=","messageId":`+bad+`}}`,
			`{"message":{"data":"e30="},"subscription":`+bad+`}`,
			pushBody(`{"range":`+bad+`}`), pushBody(`{"range":"0-16","tick":`+bad+`}`))
	}
	for _, bad := range []string{`"x"`, `{}`, `[]`, `1.5`} {
		bodies = append(bodies, `{"message":{"data":"e30="},"deliveryAttempt":`+bad+`}`)
	}
	bodies = append(bodies, pushBody(`[1]`), pushBody(`"0-16"`), pushBody(`{"range":"0-16","extra":1}`), pushBody(`{"range":"0-16"`))
	for _, body := range bodies {
		w := postReconcile(h, body)
		a := decodeAnswer(t, body, w.Body.String())
		if w.Code != http.StatusBadRequest || a.Reason != "bad-shard-request" {
			t.Errorf("%s: %d %+v, want 400 bad-shard-request", body, w.Code, a)
		}
		checkDetail(t, body, a)
	}
	if len(p.ran) != 0 {
		t.Fatalf("ran %v on bad requests", p.ran)
	}
}

// registerRefusals are the 400 reasons of /Register (CONTRACT.md §5).
var registerRefusals = map[string]bool{"invalid-json": true, "invalid-name": true, "invalid-kind": true,
	"invalid-metadata": true, "invalid-intent": true}

// FuzzRegisterBody: whatever the body, /Register answers a status of the
// contract, never 500; a 400 carries one of its refusal reasons and a
// detail free of Go type names. `make fuzz` explores; `make test` runs the
// seeds.
func FuzzRegisterBody(f *testing.F) {
	for _, seed := range []string{``, `null`, `[1]`, `{"name":"batches/a","metadata":[1,2]}`, `{"name":1}`,
		`{"intent":"k","kind":"batch","model":{}}`, `{"name":"batches/a","intent":"k"}`, `{"name":"batches/a"}x`,
		`{"name":"batches/a","kind":"batch","metadata":{"n":12345678901234567890123}}`, "{\"name\":\"\xff\"}",
		`{"metadata":` + strings.Repeat("[", 10001) + `}`} {
		f.Add(seed)
	}
	store := testutil.MemLedger(f)
	door, err := ingest.New(ingest.Config{Store: claims.New(store), Sink: &testutil.Recorder{}, Log: logging.Discard(), Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	in, err := register.NewIntents(door, store, func() time.Time { return now }, 45*time.Minute)
	if err != nil {
		f.Fatal(err)
	}
	h := httpapi.Register(door, logging.Discard(), httpapi.WithIntents(in))
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/Register", strings.NewReader(body)))
		a := decodeAnswer(t, fmt.Sprintf("%.60q", body), w.Body.String())
		switch w.Code {
		case http.StatusOK, http.StatusCreated, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge:
		case http.StatusBadRequest:
			if !registerRefusals[a.Reason] {
				t.Errorf("%.60q: 400 %q, not a refusal reason of CONTRACT.md §5", body, a.Reason)
			}
			checkDetail(t, fmt.Sprintf("%.60q", body), a)
		default:
			t.Errorf("%.60q: status %d %+v", body, w.Code, a)
		}
	})
}
