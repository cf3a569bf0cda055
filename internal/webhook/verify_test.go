package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/testutil"
)

type hostileCase struct {
	name   string
	h      http.Header
	body   []byte
	cfg    func(*Config) // tweaks on top of the base config
	reason string
}

// hostileEnv holds the JWKS servers the hostile cases point at.
type hostileEnv struct {
	good, failing, garbage, huge, noKeys *jwksServer
	closedURL                            string
}

func newHostileEnv(t *testing.T, f *fixtures) *hostileEnv {
	t.Helper()
	e := &hostileEnv{
		good:    newJWKSServer(t, f.JWT.JWKS),
		failing: newJWKSServer(t, []byte(`{"error":"boom"}`)),
		garbage: newJWKSServer(t, []byte(`<html>not json</html>`)),
		huge:    newJWKSServer(t, append(append([]byte(`{"keys":[],"pad":"`), bytes.Repeat([]byte("a"), 1<<20)...), `"}`...)),
		noKeys:  newJWKSServer(t, []byte(`{"keys":[{"kty":"EC","kid":"k1","crv":"P-256","x":"AAAA","y":"AAAA"},{"kty":"oct","kid":"k1","k":"c2VjcmV0"}]}`)),
	}
	e.failing.serve(http.StatusInternalServerError, []byte(`{"error":"boom"}`))
	closed := httptest.NewServer(http.NotFoundHandler())
	e.closedURL = closed.URL
	closed.Close()
	return e
}

func (e *hostileEnv) baseConfig(f *fixtures, t *testing.T) Config {
	return Config{
		Secrets:    []string{f.secret(t, "new")},
		JWKSURL:    e.good.URL,
		HTTPClient: e.good.Client(),
		Audience:   f.JWT.Audience,
		Now:        f.now,
	}
}

func jwks(url string) func(*Config) { return func(c *Config) { c.JWKSURL = url } }

func hostileCases(t *testing.T, f *fixtures, e *hostileEnv) []hostileCase {
	d := f.delivery(t, "batch.succeeded")
	body := []byte(d.Body)
	sigVal := strings.TrimPrefix(d.Signature, "v1,")
	newSecret := f.secret(t, "new")
	tok := func(name string) http.Header { return headers("", "", f.token(t, name)) }

	macWith := func(key []byte) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(d.ID + "." + d.Timestamp + "."))
		m.Write(body)
		return m.Sum(nil)
	}
	rawKey, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(newSecret, "whsec_"))

	// A valid token whose payload was edited after signing.
	valid := f.token(t, "valid")
	parts := strings.Split(valid, ".")
	var claims map[string]any
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	claims["sub"] = "attacker"
	edited, _ := json.Marshal(claims)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(edited) + "." + parts[2]

	now := f.now()
	ts := func(d time.Duration) string { return itoa(now.Add(d).Unix()) }
	withTS := func(h http.Header, v string) http.Header { h.Set("webhook-timestamp", v); return h }

	return []hostileCase{
		// Static HMAC deliveries.
		{name: "no headers", h: http.Header{}, body: body, reason: ReasonMissingHeaders},
		{name: "missing webhook-id", h: headers("", d.Timestamp, d.Signature), body: body, reason: ReasonMissingHeaders},
		{name: "missing webhook-timestamp", h: headers(d.ID, "", d.Signature), body: body, reason: ReasonMissingHeaders},
		{name: "missing webhook-signature", h: headers(d.ID, d.Timestamp, ""), body: body, reason: ReasonMissingHeaders},
		{name: "blank signature list", h: headers(d.ID, d.Timestamp, "   "), body: body, reason: ReasonMissingHeaders},
		{name: "tampered body", h: d.header(), body: bytes.Replace(body, []byte("batch_123456"), []byte("batch_123457"), 1), reason: ReasonNoMatchingSignature},
		{name: "trailing newline added", h: d.header(), body: append(append([]byte(nil), body...), '\n'), reason: ReasonNoMatchingSignature},
		{name: "empty body", h: d.header(), body: nil, reason: ReasonNoMatchingSignature},
		{name: "wrong secret", h: d.header(), body: body, reason: ReasonNoMatchingSignature,
			cfg: func(c *Config) { c.Secrets = []string{f.secret(t, "other")} }},
		{name: "no secrets configured", h: d.header(), body: body, reason: ReasonNoSecretsConfigured,
			cfg: func(c *Config) { c.Secrets = nil }},
		{name: "timestamp too old", h: d.header(), body: body, reason: ReasonTimestampTooOld,
			cfg: func(c *Config) { c.Now = func() time.Time { return now.Add(5*time.Minute + time.Second) } }},
		{name: "timestamp too new", h: d.header(), body: body, reason: ReasonTimestampTooNew,
			cfg: func(c *Config) { c.Now = func() time.Time { return now.Add(-5*time.Minute - time.Second) } }},
		{name: "tighter tolerance", h: headers(d.ID, ts(-2*time.Second), signV1(newSecret, d.ID, ts(-2*time.Second), body)), body: body,
			reason: ReasonTimestampTooOld, cfg: func(c *Config) { c.Tolerance = time.Second }},
		{name: "fractional timestamp", h: headers(d.ID, d.Timestamp+".5", d.Signature), body: body, reason: ReasonBadTimestamp},
		{name: "non-numeric timestamp", h: headers(d.ID, "hello", d.Signature), body: body, reason: ReasonBadTimestamp},
		{name: "negative timestamp", h: headers(d.ID, "-1767000000", d.Signature), body: body, reason: ReasonBadTimestamp},
		{name: "plus-signed timestamp", h: headers(d.ID, "+"+d.Timestamp, d.Signature), body: body, reason: ReasonBadTimestamp},
		{name: "huge timestamp", h: headers(d.ID, strings.Repeat("9", 30), d.Signature), body: body, reason: ReasonBadTimestamp},
		{name: "RFC3339 timestamp", h: headers(d.ID, "2026-01-22T12:00:00Z", d.Signature), body: body, reason: ReasonBadTimestamp},
		{name: "signature for another id", h: headers("msg_other", d.Timestamp, d.Signature), body: body, reason: ReasonNoMatchingSignature},
		{name: "signature for another timestamp", h: headers(d.ID, ts(time.Second), d.Signature), body: body, reason: ReasonNoMatchingSignature},
		{name: "leading-zero timestamp re-formatted", h: headers(d.ID, "0"+d.Timestamp, d.Signature), body: body, reason: ReasonNoMatchingSignature},
		{name: "non-base64 signature", h: headers(d.ID, d.Timestamp, "v1,!!!not*base64!!!"), body: body, reason: ReasonNoMatchingSignature},
		{name: "empty v1 value", h: headers(d.ID, d.Timestamp, "v1,"), body: body, reason: ReasonNoMatchingSignature},
		{name: "v1a only", h: headers(d.ID, d.Timestamp, "v1a,"+sigVal), body: body, reason: ReasonNoMatchingSignature},
		{name: "upper-case version", h: headers(d.ID, d.Timestamp, "V1,"+sigVal), body: body, reason: ReasonNoMatchingSignature},
		{name: "missing version", h: headers(d.ID, d.Timestamp, sigVal), body: body, reason: ReasonNoMatchingSignature},
		{name: "last signature character changed", h: headers(d.ID, d.Timestamp, flipBeforePadding(d.Signature)), body: body, reason: ReasonNoMatchingSignature},
		{name: "truncated signature", h: headers(d.ID, d.Timestamp, d.Signature[:len(d.Signature)-4]), body: body, reason: ReasonNoMatchingSignature},
		{name: "unpadded signature", h: headers(d.ID, d.Timestamp, strings.TrimRight(d.Signature, "=")), body: body, reason: ReasonNoMatchingSignature},
		{name: "hex signature", h: headers(d.ID, d.Timestamp, "v1,"+hex.EncodeToString(macWith(rawKey))), body: body, reason: ReasonNoMatchingSignature},
		{name: "secret string used as key", h: headers(d.ID, d.Timestamp, "v1,"+base64.StdEncoding.EncodeToString(macWith([]byte(newSecret)))), body: body, reason: ReasonNoMatchingSignature},
		{name: "spec vector replayed", h: headers(f.SpecVector.ID, f.SpecVector.Timestamp, f.SpecVector.Signature), body: []byte(f.SpecVector.Body), reason: ReasonTimestampTooOld,
			cfg: func(c *Config) { c.Secrets = append(c.Secrets, f.SpecVector.Secret) }},
		{name: "token inside a v1 entry", h: headers(d.ID, d.Timestamp, "v1,"+valid), body: body, reason: ReasonNoMatchingSignature},
		{name: "bearer token", h: headers("", "", "Bearer "+valid), body: body, reason: ReasonMissingHeaders},

		// Dynamic JWT deliveries.
		{name: "alg none", h: tok("alg_none"), body: body, reason: ReasonBadToken},
		{name: "HS256 keyed with the public key PEM", h: tok("hs256_public_pem"), body: body, reason: ReasonBadToken},
		{name: "ES256", h: tok("es256"), body: body, reason: ReasonBadToken},
		{name: "PS256", h: tok("ps256"), body: body, reason: ReasonBadToken},
		{name: "expired", h: tok("expired"), body: body, reason: ReasonTokenExpired},
		{name: "nbf in the future", h: tok("not_yet_valid"), body: body, reason: ReasonTokenNotYetValid},
		{name: "wrong audience", h: tok("wrong_aud"), body: body, reason: ReasonWrongAudience},
		{name: "no aud with audience configured", h: tok("no_aud"), body: body, reason: ReasonWrongAudience},
		{name: "no exp", h: tok("no_exp"), body: body, reason: ReasonBadToken},
		{name: "no kid", h: tok("no_kid"), body: body, reason: ReasonBadToken},
		{name: "unknown kid", h: tok("unknown_kid"), body: body, reason: ReasonUnknownKID},
		{name: "other key under a known kid", h: tok("wrong_key_known_kid"), body: body, reason: ReasonBadToken},
		{name: "payload edited after signing", h: headers("", "", tampered), body: body, reason: ReasonBadToken},
		{name: "signature segment dropped", h: headers("", "", parts[0]+"."+parts[1]+"."), body: body, reason: ReasonBadToken},
		{name: "garbage segments", h: headers("", "", "aaaa.bbbb.cccc"), body: body, reason: ReasonBadToken},
		{name: "deeply nested JWT header", h: headers("", "", base64.RawURLEncoding.EncodeToString([]byte(`{"alg":`+strings.Repeat("[", 50000)+strings.Repeat("]", 50000)+`}`))+".e30.c2ln"), body: body, reason: ReasonBadToken},
		{name: "empty JSON header", h: headers("", "", "e30.e30.e30"), body: body, reason: ReasonBadToken},
		{name: "token with stale webhook-timestamp", h: withTS(tok("valid"), ts(-6*time.Minute)), body: body, reason: ReasonTimestampTooOld},
		{name: "token with future webhook-timestamp", h: withTS(tok("valid"), ts(6*time.Minute)), body: body, reason: ReasonTimestampTooNew},
		{name: "token with garbage webhook-timestamp", h: withTS(tok("valid"), "soon"), body: body, reason: ReasonBadTimestamp},
		{name: "no JWKS configured", h: tok("valid"), body: body, reason: ReasonNoJWKSConfigured,
			cfg: func(c *Config) { c.JWKSURL, c.HTTPClient = "", nil }},
		{name: "JWKS unreachable", h: tok("valid"), body: body, reason: ReasonJWKSUnavailable, cfg: jwks(e.closedURL)},
		{name: "JWKS returns 500", h: tok("valid"), body: body, reason: ReasonJWKSUnavailable, cfg: jwks(e.failing.URL)},
		{name: "JWKS is not JSON", h: tok("valid"), body: body, reason: ReasonJWKSUnavailable, cfg: jwks(e.garbage.URL)},
		{name: "JWKS over 1 MiB", h: tok("valid"), body: body, reason: ReasonJWKSUnavailable, cfg: jwks(e.huge.URL)},
		{name: "JWKS without RSA keys", h: tok("valid"), body: body, reason: ReasonJWKSUnavailable, cfg: jwks(e.noKeys.URL)},
	}
}

// flipBeforePadding changes the last significant character of a base64
// signature, so only its tail differs.
func flipBeforePadding(sig string) string {
	b := []byte(sig)
	i := len(strings.TrimRight(sig, "=")) - 1
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func TestHostileInputs(t *testing.T) {
	f := loadFixtures(t)
	env := newHostileEnv(t, f)
	cases := hostileCases(t, f, env)
	if len(cases) < 30 {
		t.Fatalf("only %d hostile cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := env.baseConfig(f, t)
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			v := mustVerifier(t, cfg)
			got, err := v.Verify(t.Context(), c.h, c.body)
			if err == nil {
				t.Fatalf("Verify accepted: %+v", got)
			}
			wantErr(t, err, c.reason)
			t.Log(err)
		})
	}
}

// TestErrorsNeverLeak runs every hostile case and checks that no error
// message contains a secret, a signature or a token (or a segment of one).
func TestErrorsNeverLeak(t *testing.T) {
	f := loadFixtures(t)
	env := newHostileEnv(t, f)
	for _, c := range hostileCases(t, f, env) {
		cfg := env.baseConfig(f, t)
		if c.cfg != nil {
			c.cfg(&cfg)
		}
		v := mustVerifier(t, cfg)
		_, err := v.Verify(t.Context(), c.h, c.body)
		if err == nil {
			t.Fatalf("%s: accepted", c.name)
		}
		var sensitive []string
		for _, s := range append(cfg.Secrets, f.Secrets["old"], f.Secrets["new"], f.Secrets["other"]) {
			sensitive = append(sensitive, s, strings.TrimPrefix(s, "whsec_"))
		}
		sig := strings.TrimSpace(c.h.Get("webhook-signature"))
		sensitive = append(sensitive, sig)
		for _, entry := range strings.Fields(sig) {
			_, val, _ := strings.Cut(entry, ",")
			sensitive = append(sensitive, entry, val)
			sensitive = append(sensitive, strings.Split(entry, ".")...)
		}
		msg := err.Error()
		for _, s := range sensitive {
			if len(s) >= 8 && strings.Contains(msg, s) {
				t.Errorf("%s: error %q leaks %q", c.name, msg, s)
			}
		}
	}
}

func TestNewVerifierErrors(t *testing.T) {
	now := func() time.Time { return time.Unix(1767000000, 0) }
	const good = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	cases := []struct {
		name    string
		cfg     Config
		want    []string // substrings the message must contain
		secrets []string // values it must not contain
	}{
		{"no clock", Config{Secrets: []string{good}}, []string{"Now"}, nil},
		{"secret without prefix", Config{Secrets: []string{good, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, Now: now},
			[]string{"LROSINK_WEBHOOK_SECRETS", "index 1", "whsec_ prefix"}, []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		{"secret not base64", Config{Secrets: []string{"whsec_not*base64*at*all"}, Now: now},
			[]string{"LROSINK_WEBHOOK_SECRETS", "index 0", "base64"}, []string{"not*base64*at*all"}},
		{"empty secret tail", Config{Secrets: []string{good, good, "whsec_"}, Now: now},
			[]string{"LROSINK_WEBHOOK_SECRETS", "index 2"}, nil},
		{"negative tolerance", Config{Tolerance: -time.Second, Now: now}, []string{"tolerance"}, nil},
		{"JWKS without client", Config{JWKSURL: "https://example.com/jwks.json", Now: now}, []string{"HTTPClient"}, nil},
		{"relative JWKS URL", Config{JWKSURL: "/jwks.json", HTTPClient: http.DefaultClient, Now: now}, []string{"JWKS URL"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := NewVerifier(c.cfg)
			if err == nil {
				t.Fatalf("NewVerifier accepted: %+v", v)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			for _, s := range c.secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q leaks the secret", err)
				}
			}
		})
	}
	// Spaces around commas in the variable are tolerated.
	if _, err := NewVerifier(Config{Secrets: []string{" " + good + " "}, Now: now}); err != nil {
		t.Fatalf("padded secret rejected: %v", err)
	}
}

func TestTimestampTolerance(t *testing.T) {
	f := loadFixtures(t)
	d := f.delivery(t, "batch.succeeded")
	sent := time.Unix(mustAtoi(t, d.Timestamp), 0)
	secret := f.secret(t, "new")
	for _, c := range []struct {
		now    time.Duration // relative to the delivery's timestamp
		reason string
	}{
		{5 * time.Minute, ""},
		{-5 * time.Minute, ""},
		{5*time.Minute + time.Second, ReasonTimestampTooOld},
		{-5*time.Minute - time.Second, ReasonTimestampTooNew},
	} {
		v := mustVerifier(t, Config{Secrets: []string{secret}, Now: func() time.Time { return sent.Add(c.now) }})
		_, err := v.Verify(t.Context(), d.header(), []byte(d.Body))
		if c.reason == "" {
			if err != nil {
				t.Errorf("now=ts%+v: %v", c.now, err)
			}
			continue
		}
		wantErr(t, err, c.reason)
	}
}

// TestSkipsMalformedEntries: unknown versions and junk entries do not stop a
// valid v1 entry later in the list from matching.
func TestSkipsMalformedEntries(t *testing.T) {
	f := loadFixtures(t)
	d := f.delivery(t, "batch.succeeded")
	v := mustVerifier(t, Config{Secrets: []string{f.secret(t, "new")}, Now: f.now})
	sig := "v1a,AAAA junk v1, ,,, v2," + strings.TrimPrefix(d.Signature, "v1,") + "  v1,AAAA=  \t" + d.Signature
	if _, err := v.Verify(t.Context(), headers(d.ID, d.Timestamp, sig), []byte(d.Body)); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

// TestSignatureSeparators pins which characters separate webhook-signature
// entries: the Standard Webhooks spec says "space delimited"; HTTP allows
// optional whitespace (SP, HTAB) around a value. So SP and HTAB separate
// entries and nothing else does: a form feed, vertical tab, line break or
// Unicode space is part of the entry, which then does not match.
func TestSignatureSeparators(t *testing.T) {
	f := loadFixtures(t)
	d := f.delivery(t, "batch.succeeded")
	v := mustVerifier(t, Config{Secrets: []string{f.secret(t, "new")}, Now: f.now})
	good := d.Signature
	for _, c := range []struct {
		header string
		ok     bool
	}{
		{good, true},
		{"  " + good + "  ", true},
		{"\t" + good + "\t", true},
		{"v1,AAAA\t" + good, true},
		{"v1,AAAA " + good, true},
		{"\f" + good, false},
		{good + "\f", false},
		{"\v" + good, false},
		{"v1,AAAA\f" + good, false},
		{"v1,AAAA\n" + good, false},
		{"v1,AAAA\r" + good, false},
		{"\u00a0" + good, false},
		{"\u0085" + good, false},
	} {
		_, err := v.Verify(t.Context(), headers(d.ID, d.Timestamp, c.header), []byte(d.Body))
		if (err == nil) != c.ok {
			t.Errorf("header %q: err = %v, want accepted = %v", c.header, err, c.ok)
		}
	}
}

// TestJWKSRefetchRateLimit counts hits on the JWKS server: an unknown kid
// triggers at most one refetch per minute of the Verifier's clock.
func TestJWKSRefetchRateLimit(t *testing.T) {
	f := loadFixtures(t)
	srv := newJWKSServer(t, f.JWT.JWKS)
	clk := testutil.NewClock(f.now())
	v := mustVerifier(t, Config{JWKSURL: srv.URL, HTTPClient: srv.Client(), Now: clk.Now})
	ctx := t.Context()
	valid := headers("", "", f.token(t, "valid"))
	unknown := headers("", "", f.token(t, "unknown_kid"))
	step := func(h http.Header, reason string, hits int64) {
		t.Helper()
		_, err := v.Verify(ctx, h, nil)
		if reason == "" {
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
		} else {
			wantErr(t, err, reason)
		}
		if got := srv.Hits(); got != hits {
			t.Fatalf("JWKS hits = %d, want %d", got, hits)
		}
	}

	step(valid, "", 1)
	step(valid, "", 1) // cached
	for range 5 {
		step(unknown, ReasonUnknownKID, 1) // fetched less than a minute ago
	}
	clk.Advance(59 * time.Second)
	step(unknown, ReasonUnknownKID, 1)
	clk.Advance(2 * time.Second)
	step(unknown, ReasonUnknownKID, 2) // a minute passed: one refetch
	for range 5 {
		step(unknown, ReasonUnknownKID, 2)
	}
	step(valid, "", 2)

	// Google rotates: the new key appears in the JWKS.
	srv.serve(http.StatusOK, f.JWT.JWKSRotated)
	step(unknown, ReasonUnknownKID, 2) // still rate-limited
	clk.Advance(time.Minute)
	step(unknown, "", 3)
	step(unknown, "", 3)
	step(valid, "", 3)
}

// TestJWKSFailures: failures answer 503, are rate-limited like successes
// (the JWKS host is not hammered), and recovery is picked up.
func TestJWKSFailures(t *testing.T) {
	f := loadFixtures(t)
	srv := newJWKSServer(t, f.JWT.JWKS)
	srv.serve(http.StatusInternalServerError, []byte("oops"))
	clk := testutil.NewClock(f.now())
	v := mustVerifier(t, Config{JWKSURL: srv.URL, HTTPClient: srv.Client(), Now: clk.Now})
	valid := headers("", "", f.token(t, "valid"))

	for i := range 3 {
		_, err := v.Verify(t.Context(), valid, nil)
		wantErr(t, err, ReasonJWKSUnavailable)
		if got := srv.Hits(); got != 1 {
			t.Fatalf("attempt %d: JWKS hits = %d, want 1", i, got)
		}
	}
	srv.serve(http.StatusOK, f.JWT.JWKS)
	clk.Advance(time.Minute)
	if _, err := v.Verify(t.Context(), valid, nil); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if got := srv.Hits(); got != 2 {
		t.Fatalf("JWKS hits = %d, want 2", got)
	}

}

// TestJWKSStaleSet: past the cache's max age the set is refetched; if that
// fails, known kids keep verifying from the stale set, unknown ones get 503.
func TestJWKSStaleSet(t *testing.T) {
	f := loadFixtures(t)
	srv := newJWKSServer(t, f.JWT.JWKS)
	clk := testutil.NewClock(f.now())
	v := mustVerifier(t, Config{JWKSURL: srv.URL, HTTPClient: srv.Client(), Now: clk.Now})
	valid := headers("", "", f.token(t, "valid"))
	if _, err := v.Verify(t.Context(), valid, nil); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	srv.serve(http.StatusBadGateway, nil)
	clk.Set(f.now().Add(time.Hour + 30*time.Second)) // the token expires at now+1h, 60 s leeway
	if _, err := v.Verify(t.Context(), valid, nil); err != nil {
		t.Fatalf("stale set: %v", err)
	}
	if got := srv.Hits(); got != 2 {
		t.Fatalf("JWKS hits = %d, want 2 (max age forces a refetch)", got)
	}
	_, err := v.Verify(t.Context(), headers("", "", f.token(t, "unknown_kid")), nil)
	wantErr(t, err, ReasonJWKSUnavailable)
	if got := srv.Hits(); got != 2 {
		t.Fatalf("JWKS hits = %d, want 2", got)
	}
}

// TestJWKSCanceledContext: a caller that gives up gets 503 and does not
// start the one-minute back-off for everybody else.
func TestJWKSCanceledContext(t *testing.T) {
	f := loadFixtures(t)
	srv := newJWKSServer(t, f.JWT.JWKS)
	v := mustVerifier(t, Config{JWKSURL: srv.URL, HTTPClient: srv.Client(), Now: f.now})
	valid := headers("", "", f.token(t, "valid"))

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := v.Verify(ctx, valid, nil)
	wantErr(t, err, ReasonJWKSUnavailable)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v does not wrap context.Canceled", err)
	}
	if _, err := v.Verify(t.Context(), valid, nil); err != nil {
		t.Fatalf("next caller: %v", err)
	}
}

// TestConcurrentVerify runs HMAC and JWT verifications in parallel (under
// -race) against one Verifier; concurrent first uses share one JWKS fetch.
func TestConcurrentVerify(t *testing.T) {
	f := loadFixtures(t)
	srv := newJWKSServer(t, f.JWT.JWKS)
	v := mustVerifier(t, Config{
		Secrets: []string{f.secret(t, "old"), f.secret(t, "new")},
		JWKSURL: srv.URL, HTTPClient: srv.Client(), Audience: f.JWT.Audience, Now: f.now,
	})
	d := f.delivery(t, "rotation.both")
	valid := f.token(t, "valid")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = v.Verify(t.Context(), headers("", "", valid), nil)
			} else {
				_, err = v.Verify(t.Context(), d.header(), []byte(d.Body))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
	}
	if got := srv.Hits(); got != 1 {
		t.Fatalf("JWKS hits = %d, want 1", got)
	}
}

func TestLooksLikeJWS(t *testing.T) {
	for s, want := range map[string]bool{
		"a.b.c":                   true,
		"a.b.":                    true,
		"eyJhbGciOi.eyJzdWIi.sig": true,
		".b.c":                    false,
		"a..c":                    false,
		"a.b":                     false,
		"a.b.c.d":                 false,
		"v1,abc.def.ghi":          false,
		"a.b.c v1,xyz":            false,
		"a+b.c/d.e=":              false,
		"":                        false,
	} {
		if got := looksLikeJWS(s); got != want {
			t.Errorf("looksLikeJWS(%q) = %v, want %v", s, got, want)
		}
	}
}

// HeaderID must stay canonical: http.Header.Get canonicalises any other
// form of a key first, an allocation per delivery on the webhook path.
func TestHeaderIDIsCanonical(t *testing.T) {
	if got := http.CanonicalHeaderKey(hdrID); HeaderID != got {
		t.Fatalf("HeaderID = %q, want the canonical %q", HeaderID, got)
	}
}
