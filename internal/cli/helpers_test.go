package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/testutil"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/results/resultstest"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// mapEnv is a getenv over a fixed map: tests never see the caller's
// LROSINK_* variables.
func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

type runResult struct {
	code           int
	stdout, stderr string
}

// run runs the CLI in-process to completion.
func run(t *testing.T, env map[string]string, args ...string) runResult {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(t.Context(), args, strings.NewReader(""), &out, &errb, mapEnv(env))
	return runResult{code, out.String(), errb.String()}
}

// storeEnv is an environment whose ledger is a fresh, empty SQLite file,
// as `lrosink serve` leaves one: only serve creates a ledger (the other
// commands refuse a missing one, TestMissingLedgerIsRefused).
func storeEnv(t *testing.T) map[string]string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := sqliteledger.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"LROSINK_STORE": "sqlite:" + path}
}

// settle ingests a terminal webhook event for name into the SQLite ledger
// at store, as a delivery to serve would, publishing to pub.
func settle(t *testing.T, store, name string, state lifecycle.State, pub ingest.Sink) {
	t.Helper()
	ctx := t.Context()
	s, err := sqliteledger.Open(ctx, strings.TrimPrefix(store, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := ingest.New(ingest.Config{Store: claims.New(s), Sink: pub, Log: logging.Discard(), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Ingest(ctx, event.Event{Name: name, State: state, UpdateTime: time.Now(), Source: event.SourceWebhook,
		DeliveryID: "msg_" + name, Output: map[string]any{"file": "gs://b/" + name}})
	if err != nil || res.Outcome != ingest.OutcomeCompleted {
		t.Fatalf("settle %s: %+v %v", name, res, err)
	}
}

// resultLine is one stdout/file results line.
type resultLine struct {
	Operation      string            `json:"operation"`
	Kind           string            `json:"kind"`
	State          string            `json:"state"`
	SettledBy      string            `json:"settled_by"`
	IdempotencyKey string            `json:"idempotency_key"`
	Output         map[string]any    `json:"output"`
	UserMetadata   map[string]any    `json:"user_metadata"`
	Attributes     map[string]string `json:"attributes"`
}

// resultLines parses every line of s as a results line.
func resultLines(t *testing.T, s string) []resultLine {
	t.Helper()
	var out []resultLine
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var l resultLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.IdempotencyKey == "" {
			t.Fatalf("not a results line: %q (%v)", sc.Text(), err)
		}
		resultstest.Check(t, sc.Bytes())
		out = append(out, l)
	}
	return out
}

// signedDelivery is a signed batch.succeeded webhook for the batch id.
func signedDelivery(base, secret, id, msgID string) (*http.Request, error) {
	body := []byte(`{"type":"batch.succeeded","version":"v1","timestamp":"` + time.Now().UTC().Format(time.RFC3339Nano) +
		`","data":{"id":"` + id + `","output_file_uri":"gs://bucket/` + id + `.jsonl"},"user_metadata":{"job":"` + id + `"}}`)
	req, err := http.NewRequest(http.MethodPost, base+"/Webhook", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = webhooktest.Headers(msgID, time.Now(), body, secret)
	return req, nil
}

func delivery(t *testing.T, base, secret, id, msgID string) *http.Request {
	t.Helper()
	req, err := signedDelivery(base, secret, id, msgID)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, 10*time.Second, cond)
}

// The shared helpers under the names these tests use.
type (
	syncBuffer = testutil.SyncBuffer
	recorder   = testutil.Recorder
)
