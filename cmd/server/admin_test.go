package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/emutest"
)

// TestAdminTokenAppliesWhenSet: cmd/server enforces LROSINK_ADMIN_TOKEN on
// Register (and Reconcile) when it is set, as serve does; on Cloud Run it is
// normally unset and IAM guards those services.
func TestAdminTokenAppliesWhenSet(t *testing.T) {
	const token = "server-admin-token-0123456789"
	bin := buildServer(t)
	emutest.FirestoreHost(t)
	base := start(t, bin, "FUNCTION_TARGET=Register", "GOOGLE_CLOUD_PROJECT="+emutest.ProjectID(t), "LROSINK_RESULTS=stdout",
		"LROSINK_ADMIN_TOKEN="+token)
	for _, c := range []struct {
		auth   string
		status int
	}{{"", 401}, {"Bearer wrong-admin-token-0123456789", 401}, {"Bearer " + token, 201}} {
		req, _ := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(`{"name":"batches/srv_tok","kind":"batch"}`))
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("Register with Authorization %q: %d, want %d", c.auth, resp.StatusCode, c.status)
		}
	}
}
