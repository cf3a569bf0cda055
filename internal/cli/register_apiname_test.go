package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/gemini"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestRegisterCLIAndHTTPStoreTheSameAPIName: a Veo operation registered
// with `lrosink register` and one registered with POST /Register keep the
// model in their API name alike, and the reconciler asks Gemini (through the
// real genai SDK) at the model path for both.
func TestRegisterCLIAndHTTPStoreTheSameAPIName(t *testing.T) {
	env := storeEnv(t)
	env["LROSINK_GRACE"] = "3m"
	const model = "veo-3.0-generate-001"
	if r := run(t, env, "register", "models/"+model+"/operations/cli1"); r.code != command.ExitOK || r.stdout != "created models/"+model+"/operations/cli1\n" {
		t.Fatalf("lrosink register: %d %q %q", r.code, r.stdout, r.stderr)
	}

	ctx := t.Context()
	cfg, err := loadConfig(mapEnv(env), command.NewFlagSet("test"))
	if err != nil {
		t.Fatal(err)
	}
	s := openTestLedger(t, env)
	door, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: &testutil.Recorder{}, Log: logging.Discard(), Now: time.Now, Grace: cfg.Grace})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.Register(door, logging.Discard()))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"name":"models/`+model+`/operations/http1"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /Register: %d", resp.StatusCode)
	}

	for _, id := range []string{"cli1", "http1"} {
		docID, _ := opname.DocID("gemini:operations/" + id)
		op, err := s.GetOperation(ctx, docID)
		if err != nil {
			t.Fatal(err)
		}
		if want := "models/" + model + "/operations/" + id; op.APIName != want {
			t.Errorf("%s: API name %q, want %q", id, op.APIName, want)
		}
		if got := op.NextCheckAt.Sub(op.SubmittedAt); got != 3*time.Minute {
			t.Errorf("%s: first check %v after submission, want LROSINK_GRACE 3m", id, got)
		}
	}

	fake := fakegemini.New()
	fakeSrv := fake.Start(t)
	for _, id := range []string{"cli1", "http1"} {
		fake.SetVideo(model, id, fakegemini.VideoState{})
	}
	f, err := gemini.New(gemini.Options{APIKey: fakegemini.DefaultAPIKey, BaseURL: fakeSrv.URL, HTTPClient: fakeSrv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(time.Hour) }
	rec, err := reconcile.New(reconcile.Config{Ledger: claims.New(s), Door: door, Gemini: f, Log: logging.Discard(), Now: later, StuckAfter: 6 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := rec.Pass(ctx)
	if err != nil || sum.Checked != 2 || sum.Errors != 0 {
		t.Fatalf("pass: %+v %v", sum, err)
	}
	for _, id := range []string{"cli1", "http1"} {
		if path := "/v1beta/models/" + model + "/operations/" + id; fake.Calls(path) != 1 {
			t.Errorf("%s: Gemini saw %d GETs of %s; requests: %v", id, fake.Calls(path), path, paths(fake.Requests()))
		}
	}
}

func paths(rs []fakegemini.Request) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Method + " " + r.Path
	}
	return out
}
