package webhook_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

var v1aNow = time.Unix(1767000000, 0).UTC()

// v1aBody is a delivery body as a dynamic webhook sends it.
var v1aBody = []byte(`{"type":"batch.succeeded","version":"v1","timestamp":"2026-12-29T09:20:00Z","data":{"id":"batches/b1"}}`)

// keyServer serves a JWKS it can change, counting fetches. Besides the
// keys it always publishes kinds lrosink does not use (an EC key, an X25519
// key, a key type nobody knows), which must not break the set.
type keyServer struct {
	*httptest.Server
	mu   sync.Mutex
	keys []jose.JSONWebKey
	hits atomic.Int64
}

func newKeyServer(t *testing.T, keys ...jose.JSONWebKey) *keyServer {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecJWK, err := jose.JSONWebKey{Key: &ec.PublicKey, KeyID: "ec1", Use: "sig"}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	odd := []json.RawMessage{ecJWK,
		json.RawMessage(`{"kty":"OKP","crv":"X25519","x":"` + base64.RawURLEncoding.EncodeToString(make([]byte, 32)) + `"}`),
		json.RawMessage(`{"kty":"PQC","alg":"ML-DSA-65","pub":"AAAA"}`)}
	s := &keyServer{keys: keys}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		doc := struct {
			Keys []any `json:"keys"`
		}{}
		for _, k := range s.keys {
			doc.Keys = append(doc.Keys, k)
		}
		for _, r := range odd {
			doc.Keys = append(doc.Keys, r)
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *keyServer) set(keys ...jose.JSONWebKey) {
	s.mu.Lock()
	s.keys = keys
	s.mu.Unlock()
}

// clock is a settable Verifier clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func v1aVerifier(t testing.TB, cfg webhook.Config) *webhook.Verifier {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return v1aNow }
	}
	v, err := webhook.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func wantReason(t *testing.T, err error, reason string) {
	t.Helper()
	var e *webhook.Error
	if !errors.As(err, &e) || e.Reason != reason {
		t.Fatalf("got %v, want %s", err, reason)
	}
}

// TestV1AVerification: v1a entries verify with Ed25519 against the OKP keys
// of a JWKS that also holds an RSA key and kinds lrosink does not use;
// every failure is a 401 with a stable reason.
func TestV1AVerification(t *testing.T) {
	rsaSigner, err := webhooktest.NewJWTSigner("rsa1")
	if err != nil {
		t.Fatal(err)
	}
	a, b, stranger := webhooktest.NewEd25519Key(), webhooktest.NewEd25519Key(), webhooktest.NewEd25519Key()
	srv := newKeyServer(t, rsaSigner.JWK(), a.JWK("ed-a"), b.JWK(""))
	secret := webhooktest.NewSecret()
	v := v1aVerifier(t, webhook.Config{Secrets: []string{secret}, JWKSURL: srv.URL, HTTPClient: srv.Client()})

	id := "msg_v1a"
	signed := func(ts time.Time, keys ...*webhooktest.Ed25519Key) http.Header {
		return webhooktest.V1AHeaders(id, ts, v1aBody, keys...)
	}
	withSig := func(sig string) http.Header {
		h := signed(v1aNow, a)
		h.Set("webhook-signature", sig)
		return h
	}
	right := a.Signature(id, v1aNow, v1aBody)
	rsaSig, err := rsaSigner.Raw([]byte(id + "." + strconv.FormatInt(v1aNow.Unix(), 10) + "." + string(v1aBody)))
	if err != nil {
		t.Fatal(err)
	}
	tampered := append([]byte{}, v1aBody...)
	tampered[len(tampered)-3] = 'X'

	for _, tc := range []struct {
		name   string
		h      http.Header
		body   []byte
		reason string
		method string
	}{
		{name: "first OKP key (with kid)", h: signed(v1aNow, a), method: webhook.MethodV1A},
		{name: "second OKP key (no kid)", h: signed(v1aNow, b), method: webhook.MethodV1A},
		{name: "a key not in the set, then a right one", h: signed(v1aNow, stranger, b), method: webhook.MethodV1A},
		{name: "wrong v1 then right v1a", h: withSig("v1," + base64.StdEncoding.EncodeToString(make([]byte, 32)) + " " + right), method: webhook.MethodV1A},
		{name: "right v1 beside a right v1a is v1", h: withSig(right + " " + webhooktest.Signature(secret, id, v1aNow, v1aBody)), method: webhook.MethodHMAC},
		{name: "URL-safe unpadded encoding", h: withSig("v1a," + base64.RawURLEncoding.EncodeToString(mustDecode(t, right))), method: webhook.MethodV1A},
		{name: "tampered body", h: signed(v1aNow, a), body: tampered, reason: webhook.ReasonNoMatchingSignature},
		{name: "a key not in the set", h: signed(v1aNow, stranger), reason: webhook.ReasonNoMatchingSignature},
		{name: "10-minute-old timestamp", h: signed(v1aNow.Add(-10*time.Minute), a), reason: webhook.ReasonTimestampTooOld},
		{name: "10 minutes ahead", h: signed(v1aNow.Add(10*time.Minute), a), reason: webhook.ReasonTimestampTooNew},
		{name: "truncated signature", h: withSig(right[:len(right)-4]), reason: webhook.ReasonNoMatchingSignature},
		{name: "RSA key used for v1a", h: withSig("v1a," + base64.StdEncoding.EncodeToString(rsaSig)), reason: webhook.ReasonNoMatchingSignature},
		{name: "RSA signature cut to Ed25519 size", h: withSig("v1a," + base64.StdEncoding.EncodeToString(rsaSig[:ed25519.SignatureSize])), reason: webhook.ReasonNoMatchingSignature},
		{name: "right signature under another id", h: func() http.Header { h := signed(v1aNow, a); h.Set("webhook-id", "msg_other"); return h }(), reason: webhook.ReasonNoMatchingSignature},
		{name: "v1A is not v1a", h: withSig("v1A," + strings.TrimPrefix(right, "v1a,")), reason: webhook.ReasonNoMatchingSignature},
		{name: "missing id", h: func() http.Header { h := signed(v1aNow, a); h.Del("webhook-id"); return h }(), reason: webhook.ReasonMissingHeaders},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if body == nil {
				body = v1aBody
			}
			got, err := v.Verify(t.Context(), tc.h, body)
			if tc.reason != "" {
				wantReason(t, err, tc.reason)
				return
			}
			if err != nil || got.Method != tc.method || got.ID != id || !got.Timestamp.Equal(v1aNow) {
				t.Fatalf("got %+v, %v; want method %s", got, err, tc.method)
			}
		})
	}
	if n := srv.hits.Load(); n != 1 {
		// The first delivery fetched the set; failures within the minute
		// (the fake clock stands still) must not refetch.
		t.Fatalf("JWKS fetched %d times, want 1", n)
	}
}

func mustDecode(t testing.TB, entry string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(entry, "v1a,"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestV1ADynamicOnlyDeployment: a deployment with Ed25519 keys (a JWKS, or
// fixed public keys) and no whsec secret can check v1a entries, so a v1a
// signature that cannot verify (truncated, not Ed25519) is
// no-matching-signature as elsewhere (CONTRACT.md §3); only a delivery with
// no v1a entry is no-secrets-configured, the static one it cannot check.
func TestV1ADynamicOnlyDeployment(t *testing.T) {
	k := webhooktest.NewEd25519Key()
	srv := newKeyServer(t, k.JWK("ed1"))
	id := "msg_dyn"
	right := k.Signature(id, v1aNow, v1aBody)
	withSig := func(sig string) http.Header {
		h := webhooktest.V1AHeaders(id, v1aNow, v1aBody, k)
		h.Set("webhook-signature", sig)
		return h
	}
	v1 := webhooktest.Signature(webhooktest.NewSecret(), id, v1aNow, v1aBody)
	for _, cfg := range []struct {
		name string
		cfg  webhook.Config
	}{
		{"JWKS", webhook.Config{JWKSURL: srv.URL, HTTPClient: srv.Client()}},
		{"public keys", webhook.Config{PublicKeys: []string{k.PublicKey()}}},
	} {
		v := v1aVerifier(t, cfg.cfg)
		for _, tc := range []struct {
			name   string
			sig    string
			reason string
		}{
			{name: "right signature", sig: right},
			{name: "truncated signature", sig: right[:len(right)-10], reason: webhook.ReasonNoMatchingSignature},
			{name: "32 bytes, not an Ed25519 signature", sig: "v1a," + base64.StdEncoding.EncodeToString(make([]byte, 32)), reason: webhook.ReasonNoMatchingSignature},
			{name: "v1 beside a truncated v1a", sig: v1 + " " + right[:len(right)-10], reason: webhook.ReasonNoMatchingSignature},
			{name: "v1 only", sig: v1, reason: webhook.ReasonNoSecretsConfigured},
		} {
			t.Run(cfg.name+"/"+tc.name, func(t *testing.T) {
				got, err := v.Verify(t.Context(), withSig(tc.sig), v1aBody)
				if tc.reason != "" {
					wantReason(t, err, tc.reason)
					return
				}
				if err != nil || got.Method != webhook.MethodV1A {
					t.Fatalf("got %+v, %v; want a v1a delivery", got, err)
				}
			})
		}
	}
}

// TestV1AConfigurationReasons: without any key source a v1a delivery is
// 401 no-jwks-configured, with or without secrets: a secret would not let
// it verify (a v1-only one keeps no-secrets-configured); a JWKS that cannot
// be fetched is 503 jwks-unavailable so Gemini retries.
func TestV1AConfigurationReasons(t *testing.T) {
	k := webhooktest.NewEd25519Key()
	h := webhooktest.V1AHeaders("msg_1", v1aNow, v1aBody, k)

	v := v1aVerifier(t, webhook.Config{Secrets: []string{webhooktest.NewSecret()}})
	_, err := v.Verify(t.Context(), h, v1aBody)
	wantReason(t, err, webhook.ReasonNoJWKSConfigured)

	// Nothing configured at all: each delivery names what it needs.
	v = v1aVerifier(t, webhook.Config{})
	_, err = v.Verify(t.Context(), h, v1aBody)
	wantReason(t, err, webhook.ReasonNoJWKSConfigured)
	_, err = v.Verify(t.Context(), webhooktest.Headers("msg_1", v1aNow, v1aBody, webhooktest.NewSecret()), v1aBody)
	wantReason(t, err, webhook.ReasonNoSecretsConfigured)

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	t.Cleanup(down.Close)
	v = v1aVerifier(t, webhook.Config{JWKSURL: down.URL, HTTPClient: down.Client()})
	_, err = v.Verify(t.Context(), h, v1aBody)
	wantReason(t, err, webhook.ReasonJWKSUnavailable)

	// A JWKS holding only RSA keys verifies no v1a entry, and says so.
	rsaSigner, err := webhooktest.NewJWTSigner("rsa1")
	if err != nil {
		t.Fatal(err)
	}
	srv := newKeyServer(t, rsaSigner.JWK())
	v = v1aVerifier(t, webhook.Config{JWKSURL: srv.URL, HTTPClient: srv.Client()})
	_, err = v.Verify(t.Context(), h, v1aBody)
	wantReason(t, err, webhook.ReasonNoMatchingSignature)
}

// TestV1ARefetchLimit: a key Google adds is picked up by the first delivery
// it signs (one refetch, not an hour later), and a flood of signatures no
// key verifies costs at most one JWKS fetch a minute.
func TestV1ARefetchLimit(t *testing.T) {
	old, added, forger := webhooktest.NewEd25519Key(), webhooktest.NewEd25519Key(), webhooktest.NewEd25519Key()
	srv := newKeyServer(t, old.JWK("old"))
	c := &clock{t: v1aNow}
	v := v1aVerifier(t, webhook.Config{JWKSURL: srv.URL, HTTPClient: srv.Client(), Now: c.now})
	verify := func(k *webhooktest.Ed25519Key) error {
		_, err := v.Verify(t.Context(), webhooktest.V1AHeaders("msg_1", c.now(), v1aBody, k), v1aBody)
		return err
	}
	if err := verify(old); err != nil {
		t.Fatal(err)
	}
	c.add(2 * time.Minute)
	srv.set(old.JWK("old"), added.JWK("new"))
	if err := verify(added); err != nil {
		t.Fatalf("a newly published key: %v", err)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2 (first use, then the new key)", n)
	}
	for range 50 {
		if err := verify(forger); err == nil {
			t.Fatal("a forger's key verified")
		}
	}
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("50 bad signatures within the minute made %d fetches in all, want 2", n)
	}
	c.add(time.Minute)
	_ = verify(forger)
	_ = verify(forger)
	if n := srv.hits.Load(); n != 3 {
		t.Fatalf("a minute later: %d fetches, want 3", n)
	}
	// A key Google removed stops verifying once the set is refetched.
	srv.set(added.JWK("new"))
	c.add(time.Hour)
	if err := verify(old); err == nil {
		t.Fatal("a removed key still verified after an hour")
	}
}

// TestV1AFixedPublicKeys: LROSINK_WEBHOOK_PUBLIC_KEYS is a trust list that
// is never fetched and replaces the JWKS for v1a (not for JWTs).
func TestV1AFixedPublicKeys(t *testing.T) {
	trusted, other := webhooktest.NewEd25519Key(), webhooktest.NewEd25519Key()
	srv := newKeyServer(t, other.JWK("other"))
	v := v1aVerifier(t, webhook.Config{PublicKeys: []string{" " + trusted.PublicKey()}, JWKSURL: srv.URL, HTTPClient: srv.Client()})
	got, err := v.Verify(t.Context(), webhooktest.V1AHeaders("msg_1", v1aNow, v1aBody, trusted), v1aBody)
	if err != nil || got.Method != webhook.MethodV1A {
		t.Fatalf("trusted key: %+v, %v", got, err)
	}
	_, err = v.Verify(t.Context(), webhooktest.V1AHeaders("msg_1", v1aNow, v1aBody, other), v1aBody)
	wantReason(t, err, webhook.ReasonNoMatchingSignature)
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("the JWKS was fetched %d times with a fixed trust list", n)
	}
	for _, bad := range []string{"whsec_" + strings.TrimPrefix(trusted.PublicKey(), "whpk_"), "whpk_!!", "whpk_" + base64.StdEncoding.EncodeToString(make([]byte, 31))} {
		_, err := webhook.NewVerifier(webhook.Config{PublicKeys: []string{bad}, Now: time.Now})
		if err == nil || !strings.Contains(err.Error(), "LROSINK_WEBHOOK_PUBLIC_KEYS: key at index 0") {
			t.Fatalf("public key %q: %v", bad, err)
		}
	}
}

// TestV1AFileJWKS: `lrosink serve` can be pointed at a local JWKS file.
func TestV1AFileJWKS(t *testing.T) {
	k := webhooktest.NewEd25519Key()
	raw, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.JWK("dev")}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	v := v1aVerifier(t, webhook.Config{JWKSURL: "file://" + path})
	if got, err := v.Verify(t.Context(), webhooktest.V1AHeaders("msg_1", v1aNow, v1aBody, k), v1aBody); err != nil || got.Method != webhook.MethodV1A {
		t.Fatalf("file JWKS: %+v, %v", got, err)
	}
	for _, bad := range []string{"file:relative/jwks.json", "file://host/jwks.json", "ftp://x/jwks.json"} {
		if _, err := webhook.NewVerifier(webhook.Config{JWKSURL: bad, Now: time.Now}); err == nil {
			t.Fatalf("JWKS URL %q accepted", bad)
		}
	}
}

// TestV1AEntryBound: only the first few well-formed v1a entries are tried,
// so a header stuffed with signatures cannot buy unbounded Ed25519 work.
func TestV1AEntryBound(t *testing.T) {
	k, other := webhooktest.NewEd25519Key(), webhooktest.NewEd25519Key()
	srv := newKeyServer(t, k.JWK("k"))
	v := v1aVerifier(t, webhook.Config{JWKSURL: srv.URL, HTTPClient: srv.Client()})
	junk := strings.Repeat(other.Signature("msg_1", v1aNow, v1aBody)+" ", 4)
	h := webhooktest.V1AHeaders("msg_1", v1aNow, v1aBody, k)
	h.Set("webhook-signature", junk+h.Get("webhook-signature"))
	_, err := v.Verify(t.Context(), h, v1aBody)
	wantReason(t, err, webhook.ReasonNoMatchingSignature)
	if !strings.Contains(err.Error(), "4 of 5 v1a signature(s) checked") {
		t.Fatalf("detail does not show the bound: %v", err)
	}
}

// BenchmarkV1AVerify3Keys is a whole v1a verification (headers, timestamp,
// parsing, JWKS cache) against a JWKS of three Ed25519 keys with the right
// key last: three Ed25519 verifications. Compare BenchmarkEd25519Verify,
// one bare verification (docs/BENCHMARKS.md: at most 3 bare + 10 µs).
func BenchmarkV1AVerify3Keys(b *testing.B) {
	k1, k2, right := webhooktest.NewEd25519Key(), webhooktest.NewEd25519Key(), webhooktest.NewEd25519Key()
	srv := webhooktest.JWKS{k1.JWK("k1"), k2.JWK("k2"), right.JWK("k3")}
	ts := httptest.NewServer(srv)
	b.Cleanup(ts.Close)
	v := v1aVerifier(b, webhook.Config{JWKSURL: ts.URL, HTTPClient: ts.Client()})
	h := webhooktest.V1AHeaders("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", v1aNow, v1aBody, right)
	ctx := b.Context()
	if _, err := v.Verify(ctx, h, v1aBody); err != nil { // fills the cache
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, h, v1aBody); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEd25519Verify is one bare crypto/ed25519 verification of the
// same message, the unit BenchmarkV1AVerify3Keys is measured in.
func BenchmarkEd25519Verify(b *testing.B) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	msg := append([]byte("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W."+strconv.FormatInt(v1aNow.Unix(), 10)+"."), v1aBody...)
	sig := ed25519.Sign(priv, msg)
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("does not verify")
		}
	}
}

// BenchmarkV1AOverhead measures what a v1a verification costs beyond its
// three Ed25519 verifications (right key last) on a shared, loaded machine:
// each iteration times one Verify and, right after, the three bare
// verifications it must do, and the medians are reported (v1a-ns,
// 3bare-ns, overhead-ns), so load that shifts both cancels out.
func BenchmarkV1AOverhead(b *testing.B) {
	keys := []*webhooktest.Ed25519Key{webhooktest.NewEd25519Key(), webhooktest.NewEd25519Key(), webhooktest.NewEd25519Key()}
	ts := httptest.NewServer(webhooktest.JWKS{keys[0].JWK("k1"), keys[1].JWK("k2"), keys[2].JWK("k3")})
	b.Cleanup(ts.Close)
	v := v1aVerifier(b, webhook.Config{JWKSURL: ts.URL, HTTPClient: ts.Client()})
	id := "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
	h := webhooktest.V1AHeaders(id, v1aNow, v1aBody, keys[2])
	msg := append([]byte(id+"."+strconv.FormatInt(v1aNow.Unix(), 10)+"."), v1aBody...)
	sig := mustDecode(b, keys[2].Signature(id, v1aNow, v1aBody))
	pubs := make([]ed25519.PublicKey, len(keys))
	for i, k := range keys {
		var err error
		if pubs[i], err = webhook.DecodePublicKey(k.PublicKey()); err != nil {
			b.Fatal(err)
		}
	}
	ctx := b.Context()
	if _, err := v.Verify(ctx, h, v1aBody); err != nil { // fills the cache
		b.Fatal(err)
	}
	var full, bare []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := v.Verify(ctx, h, v1aBody); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		ok := false
		for _, p := range pubs {
			ok = ed25519.Verify(p, msg, sig)
		}
		t2 := time.Now()
		if !ok {
			b.Fatal("bare verification failed")
		}
		full, bare = append(full, t1.Sub(t0)), append(bare, t2.Sub(t1))
	}
	diff := make([]time.Duration, len(full))
	for i := range full {
		diff[i] = full[i] - bare[i]
	}
	b.ReportMetric(float64(median(full)), "v1a-ns")
	b.ReportMetric(float64(median(bare)), "3bare-ns")
	b.ReportMetric(float64(median(diff)), "overhead-ns")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
