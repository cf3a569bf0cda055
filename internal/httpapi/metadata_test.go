package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ingest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/testutil"
)

// hardMetadataJSON is metadata a Firestore map cannot hold (arrays inside
// arrays, reserved and empty keys).
func hardMetadataJSON(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(ledgertest.HardMetadata())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWebhookNeverFailsForMetadata: a signed webhook for an operation nobody
// registered, carrying metadata Firestore could not hold as a map, is
// answered 200, settles the operation and keeps the metadata exactly.
func TestWebhookNeverFailsForMetadata(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	body := []byte(`{"type":"batch.succeeded","version":"v1","timestamp":"2026-12-29T09:20:00Z","data":{"id":"batches/meta"},"user_metadata":` +
		hardMetadataJSON(t) + `}`)
	status, a := r.do(t, request{name: "hard metadata", method: http.MethodPost, body: body, header: hmacHeaders(r.secret, "msg_meta", now, body)})
	if status != http.StatusOK || a.Outcome != string(ingest.OutcomeCompleted) {
		t.Fatalf("webhook with hard metadata: %d %+v", status, a)
	}
	op, err := r.store.GetOperation(t.Context(), "gemini:batches%2Fmeta")
	if err != nil || op.State != "SUCCEEDED" || !reflect.DeepEqual(op.UserMetadata, ledgertest.Normalized(ledgertest.HardMetadata())) {
		t.Fatalf("stored %s %v, %v", op.State, op.UserMetadata, err)
	}
	if r.sink.n.Load() != 1 {
		t.Fatalf("%d messages published, want 1", r.sink.n.Load())
	}
}

// TestRegisterMetadata: /Register keeps metadata of any JSON shape, and
// answers 400 invalid-metadata, storing nothing, for metadata over the
// bound once encoded.
func TestRegisterMetadata(t *testing.T) {
	t.Parallel()
	store := testutil.MemLedger(t)
	_, srv := registerServer(t, store)
	post := func(body string) (int, map[string]string) {
		t.Helper()
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&a)
		return resp.StatusCode, a
	}
	// Just over the bound. (Numbers are kept as written, so 1e20 is
	// measured as the 4 bytes sent, not the 21 digits of a float64.)
	for _, big := range []string{
		`{"name":"batches/big","metadata":{"v":"` + strings.Repeat("x", ledger.MaxMetadataBytes) + `"}}`,
	} {
		status, a := post(big)
		if status != http.StatusBadRequest || a["reason"] != "invalid-metadata" || !strings.Contains(a["detail"], "over the limit") {
			t.Fatalf("oversize metadata: %d %v", status, a)
		}
	}
	// Metadata right at the bound is registered.
	at := map[string]any{"v": ""}
	b, _ := ledger.EncodeJSON(at)
	at["v"] = strings.Repeat("x", ledger.MaxMetadataBytes-len(b))
	body, _ := json.Marshal(httpapi.RegisterRequest{Name: "batches/" + strings.Repeat("n", 200), Metadata: at})
	if status, a := post(string(body)); status != http.StatusCreated {
		t.Fatalf("metadata at the bound: %d %v", status, a)
	}
	if _, w, _ := store.Counts().Snapshot(); w != 1 {
		t.Fatalf("%d documents written, want only the registration at the bound", w)
	}
	if status, a := post(`{"name":"batches/hard","metadata":` + hardMetadataJSON(t) + `}`); status != http.StatusCreated {
		t.Fatalf("hard metadata: %d %v", status, a)
	}
	op, err := store.GetOperation(t.Context(), "gemini:batches%2Fhard")
	if err != nil || !reflect.DeepEqual(op.UserMetadata, ledgertest.Normalized(ledgertest.HardMetadata())) {
		t.Fatalf("registered metadata %v, %v", op.UserMetadata, err)
	}
	if ledger.CheckMetadata(op.UserMetadata) != nil {
		t.Fatal("stored metadata over the bound")
	}
}

type failingDoor struct{ err error }

func (f failingDoor) Ingest(context.Context, event.Event) (ingest.Result, error) {
	return ingest.Result{Operation: "batches/x"}, f.err
}

// TestClaimMissingIs503: the door's claim-missing error is answered 503
// (the sender retries; the operator was alerted) with its own reason.
func TestClaimMissingIs503(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(httpapi.Register(failingDoor{fmt.Errorf("%w: batches/x", ingest.ErrClaimMissing)}, logging.Discard()))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"name":"batches/x"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a httpapi.Answer
	_ = json.NewDecoder(resp.Body).Decode(&a)
	if resp.StatusCode != http.StatusServiceUnavailable || a.Reason != "claim-missing" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("claim missing: %d %+v", resp.StatusCode, a)
	}
}

// TestRegisterKeepsNumbersExactly: property test through POST /Register on
// every store: random integers, decimals and floats that float64 cannot
// hold are stored as the literals sent.
func TestRegisterKeepsNumbersExactly(t *testing.T) {
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		_, srv := registerServer(t, s)
		for i := range 5 {
			want, doc := ledgertest.NumbersMetadata(ledgertest.RandomNumbers(uint64(100+i), 30))
			name := fmt.Sprintf("batches/num%d", i)
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"name":"`+name+`","metadata":`+doc+`}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("register %s: %d", name, resp.StatusCode)
			}
			id, err := opname.DocID("gemini:" + name)
			if err != nil {
				t.Fatal(err)
			}
			op, err := s.GetOperation(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := ledger.EncodeJSON(op.UserMetadata)
			exp, _ := ledger.EncodeJSON(want)
			if string(got) != string(exp) {
				t.Errorf("%s metadata changed:\n got %s\nwant %s", name, got, exp)
			}
		}
	})
}
