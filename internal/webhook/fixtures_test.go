package webhook

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/lifecycle"
	"github.com/lrosink/lrosink/internal/opname"
	"github.com/lrosink/lrosink/internal/testutil"
)

// TestSpecVector checks the Standard Webhooks spec's own example (from the
// spec's reference library test "sign function works"), the same value as
// produced by the standardwebhooks npm package in the fixtures.
func TestSpecVector(t *testing.T) {
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts     = "1614265330"
		body   = `{"test": 2432232314}`
		want   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	f := loadFixtures(t)
	if f.SpecVector.Signature != want || f.SpecVector.Secret != secret || f.SpecVector.Body != body {
		t.Fatalf("standardwebhooks (node) signed the spec vector as %q, want %q", f.SpecVector.Signature, want)
	}
	if got := signV1(secret, id, ts, []byte(body)); got != want {
		t.Fatalf("test signer = %q, want %q", got, want)
	}
	v := mustVerifier(t, Config{Secrets: []string{secret}, Now: func() time.Time { return time.Unix(1614265330, 0) }})
	got, err := v.Verify(t.Context(), headers(id, ts, want), []byte(body))
	if err != nil {
		t.Fatalf("Verify(spec vector): %v", err)
	}
	if got.ID != id || got.Method != MethodHMAC || !got.Timestamp.Equal(time.Unix(1614265330, 0)) {
		t.Fatalf("Verified = %+v", got)
	}
	// Re-serialised JSON (no space) must not verify: only raw bytes do.
	_, err = v.Verify(t.Context(), headers(id, ts, want), []byte(`{"test":2432232314}`))
	wantErr(t, err, ReasonNoMatchingSignature)
}

// fixtureExpect is what Parse must produce for each HMAC fixture body.
type fixtureExpect struct {
	name  string
	state lifecycle.State
	kind  opname.Kind
	time  time.Time
	out   map[string]any
	err   *event.ErrorInfo
	meta  map[string]any
}

func fixtureExpectations() map[string]fixtureExpect {
	ts := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		return t
	}
	list := []fixtureExpect{
		{"batch.succeeded", lifecycle.Succeeded, opname.KindBatch, ts("2026-01-22T12:00:00Z"),
			map[string]any{"output_file_uri": "gs://my-bucket/results.jsonl"}, nil, nil},
		{"batch.completed", lifecycle.Succeeded, opname.KindBatch, ts("2026-01-22T12:00:01.5Z"),
			map[string]any{"output_file_uri": "files/out-1"}, nil, nil},
		{"batch.failed", lifecycle.Failed, opname.KindBatch, ts("2026-01-22T12:00:02Z"), nil,
			&event.ErrorInfo{Code: 3, Message: "invalid input file"}, nil},
		{"batch.failed.stringcode", lifecycle.Failed, opname.KindBatch, ts("2026-01-22T12:00:02Z"), nil,
			&event.ErrorInfo{Code: 0, Message: "INVALID_ARGUMENT: bad request"}, nil},
		{"batch.cancelled", lifecycle.Cancelled, opname.KindBatch, ts("2026-01-22T12:00:03Z"), nil, nil, nil},
		{"batch.expired", lifecycle.Expired, opname.KindBatch, ts("2026-01-22T11:00:04Z"), nil, nil, nil},
		{"interaction.completed", lifecycle.Succeeded, opname.KindInteraction, ts("2026-01-22T12:00:05Z"), nil, nil,
			map[string]any{"job": "top-level"}},
		{"interaction.failed", lifecycle.Failed, opname.KindInteraction, ts("2026-01-22T12:00:06Z"), nil,
			&event.ErrorInfo{Code: 13, Message: "internal"}, nil},
		{"interaction.cancelled", lifecycle.Cancelled, opname.KindInteraction, ts("2026-01-22T12:00:07Z"), nil, nil, nil},
		{"interaction.requires_action", lifecycle.RequiresAction, opname.KindInteraction, ts("2026-01-22T12:00:08Z"), nil, nil,
			map[string]any{"job": "j-ra"}},
		{"video.generated", lifecycle.Succeeded, opname.KindVideo, ts("2026-01-22T12:00:09Z"),
			map[string]any{"output_file_uri": "gs://b/v.mp4", "file_name": "files/v1"}, nil, nil},
		{"video.generated.video_uri", lifecycle.Succeeded, opname.KindVideo, ts("2026-01-22T12:00:10Z"),
			map[string]any{"video_uri": "https://example.com/v2.mp4"}, nil, map[string]any{"caption": "café 🎬"}},
		{"video.generated.error", lifecycle.Failed, opname.KindVideo, ts("2026-01-22T12:00:11Z"), nil,
			&event.ErrorInfo{Code: 8, Message: "quota exhausted"}, nil},
		{"rotation.both", lifecycle.Succeeded, opname.KindBatch, ts("2026-01-22T13:00:00Z"),
			map[string]any{"output_file_uri": "files/rot"}, nil, nil},
		{"rotation.old_only", lifecycle.Succeeded, opname.KindBatch, ts("2026-01-22T13:00:00Z"),
			map[string]any{"output_file_uri": "files/rot"}, nil, nil},
	}
	m := make(map[string]fixtureExpect, len(list))
	for _, e := range list {
		m[e.name] = e
	}
	return m
}

// TestFixturesHMAC verifies every delivery signed by the standardwebhooks
// npm package, checks that changing any single body byte breaks it, and
// parses it.
func TestFixturesHMAC(t *testing.T) {
	f := loadFixtures(t)
	expect := fixtureExpectations()
	seen := map[string]bool{}
	for _, d := range f.HMAC {
		t.Run(d.Name, func(t *testing.T) {
			var secrets []string
			for _, s := range d.Secrets {
				secrets = append(secrets, f.secret(t, s))
			}
			v := mustVerifier(t, Config{Secrets: secrets, Now: f.now})
			body := []byte(d.Body)
			got, err := v.Verify(t.Context(), d.header(), body)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got.ID != d.ID || got.Method != MethodHMAC || got.Claims != nil ||
				got.Timestamp.Unix() != mustAtoi(t, d.Timestamp) {
				t.Fatalf("Verified = %+v", got)
			}

			for _, i := range []int{0, len(body) / 2, len(body) - 1} {
				tampered := append([]byte(nil), body...)
				tampered[i] ^= 0x01
				_, err := v.Verify(t.Context(), d.header(), tampered)
				wantErr(t, err, ReasonNoMatchingSignature)
			}

			ev, err := Parse(body, got)
			if d.Name == "unknown.type" {
				if !errors.Is(err, ErrUnknownType) {
					t.Fatalf("Parse = %v, want ErrUnknownType", err)
				}
				seen[d.Name] = true
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			e, ok := expect[d.Name]
			if !ok {
				t.Fatalf("no expectation for fixture %q", d.Name)
			}
			seen[d.Name] = true
			var env struct {
				Type string `json:"type"`
				Data struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatal(err)
			}
			want := event.Event{
				Name: env.Data.ID, Kind: e.kind, State: e.state, GeminiStatus: env.Type, UpdateTime: e.time,
				Source: event.SourceWebhook, DeliveryID: d.ID, DeliveredAt: got.Timestamp, Output: e.out, Error: e.err, UserMetadata: e.meta,
			}
			if !eventsEqual(ev, want) {
				t.Fatalf("Parse =\n %+v\nwant\n %+v", ev, want)
			}
		})
	}
	// Every event type must be covered by a fixture.
	for name := range expect {
		if !seen[name] {
			t.Errorf("expectation %q has no fixture", name)
		}
	}
	if !seen["unknown.type"] {
		t.Error("no unknown-type fixture")
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		t.Fatalf("not an integer: %q", s)
	}
	return n
}

func eventsEqual(a, b event.Event) bool {
	if !a.UpdateTime.Equal(b.UpdateTime) {
		return false
	}
	a.UpdateTime, b.UpdateTime = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// TestRotation: during rotation Gemini sends one v1 entry per active secret.
func TestRotation(t *testing.T) {
	f := loadFixtures(t)
	both := f.delivery(t, "rotation.both")
	oldOnly := f.delivery(t, "rotation.old_only")
	oldS, newS := f.secret(t, "old"), f.secret(t, "new")
	cases := []struct {
		name    string
		d       hmacFixture
		secrets []string
		ok      bool
	}{
		{"both sigs, new secret", both, []string{newS}, true},
		{"both sigs, old secret", both, []string{oldS}, true},
		{"both sigs, both secrets", both, []string{oldS, newS}, true},
		{"old sig, old+new secrets", oldOnly, []string{newS, oldS}, true},
		{"old sig, only new secret", oldOnly, []string{newS}, false},
		{"both sigs, unrelated secret", both, []string{f.secret(t, "other")}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := mustVerifier(t, Config{Secrets: c.secrets, Now: f.now})
			_, err := v.Verify(t.Context(), c.d.header(), []byte(c.d.Body))
			if c.ok {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			wantErr(t, err, ReasonNoMatchingSignature)
		})
	}
}

// TestFixturesJWT verifies tokens made by the jose npm package.
func TestFixturesJWT(t *testing.T) {
	f := loadFixtures(t)
	srv := newJWKSServer(t, f.JWT.JWKS)
	newV := func(aud string) *Verifier {
		return mustVerifier(t, Config{JWKSURL: srv.URL, HTTPClient: srv.Client(), Audience: aud, Now: f.now})
	}
	body := []byte(f.delivery(t, "batch.succeeded").Body)

	t.Run("valid", func(t *testing.T) {
		got, err := newV(f.JWT.Audience).Verify(t.Context(), headers("", "", f.token(t, "valid")), body)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if got.Method != MethodJWT || got.ID != "jti-fixture-1" || !got.Timestamp.Equal(f.now()) {
			t.Fatalf("Verified = %+v", got)
		}
		if got.Claims["iss"] == nil || got.Claims["aud"] != f.JWT.Audience {
			t.Fatalf("claims = %v", got.Claims)
		}
		ev, err := Parse(body, got)
		if err != nil || ev.Name != "batch_123456" || ev.State != lifecycle.Succeeded {
			t.Fatalf("Parse = %+v, %v", ev, err)
		}
	})
	t.Run("valid with webhook headers", func(t *testing.T) {
		ts := f.now().Add(-time.Minute)
		h := headers("msg_dyn_1", itoa(ts.Unix()), f.token(t, "valid"))
		got, err := newV(f.JWT.Audience).Verify(t.Context(), h, body)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if got.ID != "msg_dyn_1" || !got.Timestamp.Equal(ts) {
			t.Fatalf("Verified = %+v", got)
		}
	})
	t.Run("aud array", func(t *testing.T) {
		if _, err := newV(f.JWT.Audience).Verify(t.Context(), headers("", "", f.token(t, "valid_aud_array")), body); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})
	t.Run("no audience configured accepts any aud", func(t *testing.T) {
		for _, name := range []string{"no_aud", "wrong_aud", "valid"} {
			if _, err := newV("").Verify(t.Context(), headers("", "", f.token(t, name)), body); err != nil {
				t.Fatalf("Verify(%s): %v", name, err)
			}
		}
	})
	t.Run("surrounding whitespace", func(t *testing.T) {
		h := http.Header{"Webhook-Signature": {"  " + f.token(t, "valid") + " "}}
		if _, err := newV(f.JWT.Audience).Verify(t.Context(), h, body); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})
	t.Run("exp leeway boundary", func(t *testing.T) {
		clk := testutil.NewClock(f.now().Add(time.Hour + 59*time.Second)) // exp is now+1h
		v := mustVerifier(t, Config{JWKSURL: srv.URL, HTTPClient: srv.Client(), Now: clk.Now})
		h := headers("", "", f.token(t, "valid"))
		if _, err := v.Verify(t.Context(), h, body); err != nil {
			t.Fatalf("within 60s leeway: %v", err)
		}
		clk.Advance(2 * time.Second)
		_, err := v.Verify(t.Context(), h, body)
		wantErr(t, err, ReasonTokenExpired)
	})
	t.Run("envelope in claims, empty body", func(t *testing.T) {
		got, err := newV(f.JWT.Audience).Verify(t.Context(), headers("msg_dyn_2", "", f.token(t, "valid_envelope_claims")), nil)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		ev, err := Parse(nil, got)
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		want := event.Event{
			Name: "batch_jwt", Kind: opname.KindBatch, State: lifecycle.Succeeded, GeminiStatus: "batch.succeeded",
			UpdateTime: time.Date(2026, 1, 22, 14, 0, 0, 0, time.UTC), Source: event.SourceWebhook,
			DeliveryID: "msg_dyn_2", DeliveredAt: got.Timestamp, Output: map[string]any{"output_file_uri": "files/jwt-out"},
			UserMetadata: map[string]any{"job": "jwt"},
		}
		if !eventsEqual(ev, want) {
			t.Fatalf("Parse =\n %+v\nwant\n %+v", ev, want)
		}
	})
	t.Run("envelope body wins over claims", func(t *testing.T) {
		got, err := newV(f.JWT.Audience).Verify(t.Context(), headers("", "", f.token(t, "valid_envelope_claims")), body)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		ev, err := Parse(body, got)
		if err != nil || ev.Name != "batch_123456" {
			t.Fatalf("Parse = %+v, %v", ev, err)
		}
	})
	t.Run("empty body without envelope claims", func(t *testing.T) {
		got, err := newV(f.JWT.Audience).Verify(t.Context(), headers("", "", f.token(t, "valid")), nil)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		_, err = Parse(nil, got)
		var be *BadEnvelopeError
		if !errors.As(err, &be) {
			t.Fatalf("Parse = %v, want BadEnvelopeError", err)
		}
	})
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
