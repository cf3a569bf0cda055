package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/httpapi"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestRequireBearer: with a token, only `Authorization: Bearer <token>`
// reaches the handler; anything else is 401 with WWW-Authenticate: Bearer
// and a JSON answer saying why, and the log never holds the token (nor
// what was sent instead). Without a token the handler is open.
func TestRequireBearer(t *testing.T) {
	const token = "0123456789abcdef-admin-token"
	reached := 0
	inner := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached++
		w.WriteHeader(http.StatusCreated)
	})
	logs := &testutil.SyncBuffer{}
	h := httpapi.RequireBearer(token, logging.New(logs, slog.LevelInfo, ""), inner)
	for _, c := range []struct {
		name, auth string
		status     int
		reason     string
	}{
		{"no header", "", 401, "missing-token"},
		{"right token", "Bearer " + token, 201, ""},
		{"scheme is case-insensitive", "bearer " + token, 201, ""},
		{"wrong token", "Bearer wrong-token-0123456789", 401, "invalid-token"},
		{"token prefix", "Bearer " + token[:len(token)-1], 401, "invalid-token"},
		{"token and more", "Bearer " + token + "x", 401, "invalid-token"},
		{"basic scheme", "Basic " + token, 401, "missing-token"},
		{"no scheme", token, 401, "missing-token"},
		{"empty bearer", "Bearer ", 401, "missing-token"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/Register", strings.NewReader("{}"))
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		before := reached
		h.ServeHTTP(w, req)
		if w.Code != c.status {
			t.Errorf("%s: status %d, want %d", c.name, w.Code, c.status)
		}
		if c.status == 401 {
			var a httpapi.Answer
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || a.Outcome != "rejected" || a.Reason != c.reason {
				t.Errorf("%s: answer %q (%v), want rejected %s", c.name, w.Body.String(), err, c.reason)
			}
			if !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: WWW-Authenticate %q", c.name, w.Header().Get("WWW-Authenticate"))
			}
			if reached != before {
				t.Errorf("%s: refused request reached the handler", c.name)
			}
		}
	}
	if strings.Contains(logs.String(), token[:16]) || strings.Contains(logs.String(), "wrong-token") {
		t.Errorf("the log holds a token:\n%s", logs.String())
	}
	if logs.CountLines("admin request refused") == 0 {
		t.Errorf("refusals not logged:\n%s", logs.String())
	}

	open := httpapi.RequireBearer("", logging.Discard(), inner)
	w := httptest.NewRecorder()
	open.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/Register", nil))
	if w.Code != http.StatusCreated {
		t.Errorf("without a configured token: %d, want the handler's 201", w.Code)
	}
}
