package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// TestSendV1AToServe: the local loop for v1a. `send --ed25519-key FILE`
// signs a v1a entry with a whsk_ key; serve, pointed at a JWKS file holding
// the public key (LROSINK_JWKS_URL=file://…) and at a Gemini that knows the
// interaction, verifies it, confirms it (a v1a delivery is a hint) and publishes
// one results line. A key serve does not trust is 401; a bad key file is a
// usage error that does not quote the file.
func TestSendV1AToServe(t *testing.T) {
	dir := t.TempDir()
	key, stranger := webhooktest.NewEd25519Key(), webhooktest.NewEd25519Key()
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.JWK("dev")}})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	jwksPath := write("jwks.json", string(jwks))
	keyFile, strangerFile := write("dev.whsk", key.SecretKey()+"\n"), write("other.whsk", stranger.SecretKey())

	fake := fakegemini.New()
	// An interaction: the reconciler's start-up pass adopts listed batches,
	// which would settle a batch before the delivery does.
	fake.SetInteraction("v1_int1", fakegemini.InteractionState{Status: "completed", Updated: time.Now().Add(-time.Minute)})
	env := storeEnv(t)
	env["LROSINK_JWKS_URL"] = "file://" + jwksPath
	env["GEMINI_API_KEY"], env["GOOGLE_GEMINI_BASE_URL"] = fakegemini.DefaultAPIKey, fake.Start(t).URL
	s := startServe(t, env)
	url := s.base + "/Webhook"

	r := run(t, nil, "send", "interaction.completed", "--id", "v1_int1", "--url", url, "--ed25519-key", keyFile)
	if r.code != command.ExitOK || !strings.HasPrefix(r.stdout, "HTTP 200") || !strings.Contains(r.stdout, `"outcome":"completed"`) {
		t.Fatalf("v1a send: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r2 := run(t, nil, "send", "interaction.completed", "--id", "v1_int1", "--url", url, "--ed25519-key", strangerFile)
	if r2.code != command.ExitError || !strings.HasPrefix(r2.stdout, "HTTP 401") || !strings.Contains(r2.stdout, "no-matching-signature") {
		t.Fatalf("untrusted key: exit %d\n%s%s", r2.code, r2.stdout, r2.stderr)
	}
	bad := write("bad.whsk", "whsec_"+strings.TrimPrefix(key.SecretKey(), "whsk_"))
	r3 := run(t, nil, "send", "interaction.completed", "--id", "v1_int1", "--url", url, "--ed25519-key", bad)
	if r3.code != command.ExitUsage || !strings.Contains(r3.stderr, "lacks the whsk_ prefix") {
		t.Fatalf("bad key file: exit %d\n%s%s", r3.code, r3.stdout, r3.stderr)
	}
	if code := s.stop(); code != command.ExitOK {
		t.Fatalf("serve exit %d", code)
	}
	lines := resultLines(t, s.stdout.String())
	if len(lines) != 1 || lines[0].Operation != "interactions/v1_int1" || lines[0].State != "SUCCEEDED" {
		t.Fatalf("results %+v", lines)
	}
	secret := strings.TrimPrefix(key.SecretKey(), "whsk_")
	for _, out := range []string{r.stdout, r.stderr, r2.stdout, r2.stderr, r3.stdout, r3.stderr, s.stderr.String()} {
		if strings.Contains(out, secret) || strings.Contains(out, secret[:20]) {
			t.Fatal("the secret key was printed")
		}
	}
	if !strings.Contains(s.stderr.String(), `"auth":"v1a"`) {
		t.Fatalf("serve's webhook answer does not log auth v1a:\n%s", s.stderr.String())
	}
}

// TestServeV1APublicKeys: with LROSINK_WEBHOOK_PUBLIC_KEYS, serve checks v1a
// entries against that list alone and never reads the JWKS (here a file that
// does not exist, which would answer 503 jwks-unavailable if it were read).
func TestServeV1APublicKeys(t *testing.T) {
	key := webhooktest.NewEd25519Key()
	keyFile := filepath.Join(t.TempDir(), "dev.whsk")
	if err := os.WriteFile(keyFile, []byte(key.SecretKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	env := storeEnv(t)
	env["LROSINK_JWKS_URL"] = "file://" + filepath.Join(t.TempDir(), "missing.json")
	env["LROSINK_WEBHOOK_PUBLIC_KEYS"] = key.PublicKey()
	s := startServe(t, env)
	r := run(t, nil, "send", "batch.succeeded", "--id", "pk-1", "--url", s.base+"/Webhook", "--ed25519-key", keyFile)
	// Verified, and a hint: without GEMINI_API_KEY it is not applied.
	if r.code != command.ExitOK || !strings.Contains(r.stdout, `"outcome":"unconfirmed"`) || !strings.Contains(r.stdout, `"reason":"no-gemini-api-key"`) {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
