package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/testutil"
)

func postRegister(t *testing.T, url, body string) (int, httpapi.Answer) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, httpapi.Answer{}
	}
	defer resp.Body.Close()
	var a httpapi.Answer
	_ = json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a
}

// TestRegisterConcurrentAndLate: of concurrent registrations of one name
// with different metadata exactly one answers 201 and the others 200, and
// every caller's keys are stored (the creator's value wins on a shared key);
// a register after a webhook's first sighting answers 200 and adds the keys
// the webhook did not echo, without overwriting those it did.
func TestRegisterConcurrentAndLate(t *testing.T) {
	t.Parallel()
	testutil.EachStore(t, func(t *testing.T, s ledger.Ledger) {
		t.Parallel()
		door, srv := registerServer(t, s)

		const n = 8
		status, answers := make([]int, n), make([]httpapi.Answer, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				status[i], answers[i] = postRegister(t, srv.URL, fmt.Sprintf(`{"name":"batches/race","metadata":{"k%d":"v","shared":"%d"}}`, i, i))
			}()
		}
		close(start)
		wg.Wait()
		creator := -1
		for i := range n {
			switch {
			case status[i] == http.StatusCreated && answers[i].Outcome == "created":
				if creator >= 0 {
					t.Errorf("registers %d and %d both answered 201", creator, i)
				}
				creator = i
			case status[i] == http.StatusOK && answers[i].Outcome == "known":
			default:
				t.Errorf("register %d: %d %+v", i, status[i], answers[i])
			}
		}
		if creator < 0 {
			t.Fatalf("no register answered 201: %v", status)
		}
		op, err := s.GetOperation(t.Context(), "gemini:batches%2Frace")
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if op.UserMetadata[fmt.Sprintf("k%d", i)] != "v" {
				t.Errorf("caller %d's key is missing: %v", i, op.UserMetadata)
			}
		}
		if op.UserMetadata["shared"] != fmt.Sprint(creator) {
			t.Errorf("shared = %v, want the 201 caller's %d", op.UserMetadata["shared"], creator)
		}

		// The webhook sees the operation first, echoing one key.
		if _, err := door.Ingest(t.Context(), event.Event{Name: "batches/late", State: lifecycle.Running,
			UpdateTime: now, Source: event.SourceWebhook, UserMetadata: map[string]any{"job": "echoed"}}); err != nil {
			t.Fatal(err)
		}
		if st, a := postRegister(t, srv.URL, `{"name":"batches/late","metadata":{"job":"mine","team":"t1"}}`); st != http.StatusOK || a.Outcome != "known" {
			t.Fatalf("register after the webhook: %d %+v", st, a)
		}
		op, err = s.GetOperation(t.Context(), "gemini:batches%2Flate")
		if err != nil || op.UserMetadata["job"] != "echoed" || op.UserMetadata["team"] != "t1" || op.State != lifecycle.Running {
			t.Fatalf("operation after a late register: %+v %v", op, err)
		}
	})
}
