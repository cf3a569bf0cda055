package webhooktest

import (
	"context"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/webhook"
)

// TestSignedByThisPackageVerifies ties the helper to the real verifier, and
// checks the Standard Webhooks spec example value.
func TestSignedByThisPackageVerifies(t *testing.T) {
	secret := NewSecret()
	now := time.Unix(1767000000, 0)
	v, err := webhook.NewVerifier(webhook.Config{Secrets: []string{secret}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"batch.succeeded","data":{"id":"batches/x"}}`)
	if _, err := v.Verify(context.Background(), Headers("msg_1", now, body, secret), body); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if _, err := v.Verify(context.Background(), Headers("msg_1", now, body, NewSecret()), body); err == nil {
		t.Fatal("a signature with another secret verified")
	}
	got := Signature("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if got != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Fatalf("spec example signature %s", got)
	}
}
