package httpapi_test

import (
	"encoding/json"
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
)

// intentServer is the Register function with the intent protocol over a
// memory ledger, on a clock the test sets.
func intentServer(t *testing.T) (*httptest.Server, *testutil.Clock) {
	t.Helper()
	store := testutil.MemLedger(t)
	c := testutil.NewClock(now)
	door, err := ingest.New(ingest.Config{Store: claims.New(store), Sink: &testutil.Recorder{}, Log: logging.Discard(), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	in, err := register.NewIntents(door, store, c.Now, 45*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.Register(door, logging.Discard(), httpapi.WithIntents(in)))
	t.Cleanup(srv.Close)
	return srv, c
}

// postRaw posts body and returns the status and the raw answer.
func postRaw(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestIntentProtocol: record, record again, bind, as CONTRACT.md §5 says:
// the status object's fields, the metadata's numbers exactly, the bound
// fields absent while unbound and set once bound, grace_until from
// LROSINK_INTENT_GRACE.
func TestIntentProtocol(t *testing.T) {
	srv, c := intentServer(t)
	const rec = `{"intent":"promo-7","kind":"video","model":"models/veo-3.0-generate-001","metadata":{"campaign":12345678901234567890123,"ratio":1.50}}`
	status, body := postRaw(t, srv.URL, rec)
	if status != http.StatusCreated {
		t.Fatalf("record: %d %s", status, body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	if string(raw["outcome"]) != `"intent-recorded"` {
		t.Fatalf("record outcome %s", raw["outcome"])
	}
	var st map[string]json.RawMessage
	if err := json.Unmarshal(raw["intent"], &st); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"key": `"promo-7"`, "kind": `"video"`, "model": `"models/veo-3.0-generate-001"`, "display_name": `""`, "state": `"unbound"`,
		"metadata":    `{"campaign":12345678901234567890123,"ratio":1.50}`,
		"created_at":  `"` + now.Format(time.RFC3339Nano) + `"`,
		"grace_until": `"` + now.Add(45*time.Minute).Format(time.RFC3339Nano) + `"`,
	} {
		if got := string(st[k]); got != want {
			t.Errorf("status %s = %s, want %s", k, got, want)
		}
	}
	for _, k := range []string{"name", "api_name", "bound_at", "bound_by"} {
		if _, ok := st[k]; ok {
			t.Errorf("an unbound status has %q", k)
		}
	}
	if status, body := postRaw(t, srv.URL, rec); status != http.StatusOK || !strings.Contains(body, `"outcome":"intent-known"`) {
		t.Fatalf("record again: %d %s", status, body)
	}
	c.Advance(30 * time.Second)
	status, body = postRaw(t, srv.URL, `{"name":"models/veo-3.0-generate-001/operations/vid7","intent":"promo-7"}`)
	if status != http.StatusCreated || !strings.Contains(body, `"outcome":"created"`) || !strings.Contains(body, `"operation":"operations/vid7"`) {
		t.Fatalf("bind: %d %s", status, body)
	}
	var bound httpapi.IntentAnswer
	if err := json.Unmarshal([]byte(body), &bound); err != nil {
		t.Fatal(err)
	}
	if b := bound.Intent; b.State != "bound" || b.Name != "operations/vid7" || b.APIName != "models/veo-3.0-generate-001/operations/vid7" ||
		b.BoundBy != "submit" || b.BoundAt == nil || !b.BoundAt.Equal(now.Add(30*time.Second)) {
		t.Fatalf("bound status %+v", b)
	}
	if status, body := postRaw(t, srv.URL, rec); status != http.StatusOK || !strings.Contains(body, `"state":"bound"`) {
		t.Fatalf("record of a bound intent: %d %s", status, body)
	}
}

// TestRegisterBadBodiesNameNoGoTypes: a field of the wrong type is refused
// with its field's reason and a detail naming the field and the JSON type
// it needs, never a Go type; nothing is stored.
func TestRegisterBadBodiesNameNoGoTypes(t *testing.T) {
	srv, _ := intentServer(t)
	for _, c := range []struct{ body, reason, mention string }{
		{`{"name":"batches/a","metadata":"x"}`, "invalid-metadata", `"metadata" must be a JSON object`},
		{`{"name":5}`, "invalid-name", `"name" must be a string`},
		{`{"name":"batches/a","kind":true}`, "invalid-kind", `"kind" must be a string`},
		{`{"intent":["k"],"kind":"batch"}`, "invalid-intent", `"intent" must be a string`},
		{`{"intent":"k","kind":"batch","metadata":[1]}`, "invalid-metadata", `"metadata" must be a JSON object`},
		{`[1]`, "invalid-json", "must be a JSON object"},
		{`{"name":`, "invalid-json", "not a JSON object"},
		{`{"intent":"k","kind":"batch","metadata":{"lrosink_intent":"k"}}`, "invalid-metadata", "lrosink_intent"},
		{`{"model":"models/m","kind":"batch"}`, "invalid-intent", "intent"},
		{`{"name":"batches/b","intent":"k","kind":"batch"}`, "invalid-intent", "only name and intent"},
	} {
		status, body := postRaw(t, srv.URL, c.body)
		var a httpapi.Answer
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if status != http.StatusBadRequest || a.Reason != c.reason || !strings.Contains(a.Detail, c.mention) {
			t.Errorf("%s: %d %+v, want 400 %s mentioning %q", c.body, status, a, c.reason, c.mention)
		}
		for _, goish := range []string{"Go ", "map[", "interface", "RegisterRequest", "httpapi", "[]"} {
			if strings.Contains(a.Detail, goish) {
				t.Errorf("%s: detail %q names a Go type (%q)", c.body, a.Detail, goish)
			}
		}
	}
}
