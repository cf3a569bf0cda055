package webhooks

import (
	"context"
	"errors"
	"strings"
	"testing"

	"cloud.google.com/go/secretmanager/apiv1/secretmanagerpb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type stubAdder struct {
	req *secretmanagerpb.AddSecretVersionRequest
	err error
}

func (s *stubAdder) AddSecretVersion(_ context.Context, req *secretmanagerpb.AddSecretVersionRequest, _ ...gax.CallOption) (*secretmanagerpb.SecretVersion, error) {
	s.req = req
	if s.err != nil {
		return nil, s.err
	}
	return &secretmanagerpb.SecretVersion{Name: req.GetParent() + "/versions/7"}, nil
}

func (s *stubAdder) AccessSecretVersion(_ context.Context, req *secretmanagerpb.AccessSecretVersionRequest, _ ...gax.CallOption) (*secretmanagerpb.AccessSecretVersionResponse, error) {
	if s.req == nil {
		return nil, status.Error(codes.NotFound, "no versions")
	}
	return &secretmanagerpb.AccessSecretVersionResponse{Name: req.GetName(), Payload: s.req.GetPayload()}, nil
}

func TestSecretManagerWriterReadsLatest(t *testing.T) {
	stub := &stubAdder{}
	w := &SecretManagerWriter{client: stub}
	if _, ok, err := w.Latest(t.Context(), "projects/p/secrets/s"); ok || err != nil {
		t.Fatalf("no version yet: ok=%v err=%v", ok, err)
	}
	if _, err := w.AddVersion(t.Context(), "projects/p/secrets/s", []byte("whsec_a,whsec_b")); err != nil {
		t.Fatal(err)
	}
	got, ok, err := w.Latest(t.Context(), "projects/p/secrets/s")
	if !ok || err != nil || string(got) != "whsec_a,whsec_b" {
		t.Fatalf("latest = %q %v %v", got, ok, err)
	}
	if v := withCurrent("whsec_n", got); v != "whsec_n,whsec_a,whsec_b" {
		t.Errorf("withCurrent = %q", v)
	}
	if v := withCurrent("whsec_a", []byte(" whsec_a , ,whsec_b")); v != "whsec_a,whsec_b" {
		t.Errorf("withCurrent dedupe = %q", v)
	}
}

func TestSecretManagerWriterSendsPayloadWithCRC32C(t *testing.T) {
	stub := &stubAdder{}
	w := &SecretManagerWriter{client: stub}
	v, err := w.AddVersion(t.Context(), "projects/p/secrets/s", []byte("123456789"))
	if err != nil {
		t.Fatal(err)
	}
	if v != "projects/p/secrets/s/versions/7" {
		t.Errorf("version = %q", v)
	}
	if stub.req.GetParent() != "projects/p/secrets/s" || string(stub.req.GetPayload().GetData()) != "123456789" {
		t.Errorf("request = %v", stub.req)
	}
	// CRC-32C (Castagnoli) check value of "123456789"; the IEEE CRC-32
	// would be 0xCBF43926.
	if c := stub.req.GetPayload().DataCrc32C; c == nil || *c != 0xE3069283 {
		t.Errorf("data_crc32c = %v, want 0xE3069283", c)
	}

	stub.err = errors.New("PermissionDenied")
	if _, err := w.AddVersion(t.Context(), "projects/p/secrets/s", []byte("x")); err == nil ||
		!errors.Is(err, stub.err) || !strings.Contains(err.Error(), "projects/p/secrets/s") {
		t.Errorf("err = %v, want the wrapped failure naming the secret", err)
	}
}

func TestTruncate(t *testing.T) {
	for in, want := range map[string]string{
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw": "whsec_...LaSw",
		"whsec_short":                            "whsec_...",
		"":                                       "whsec_...",
	} {
		if got := truncate(in); got != want {
			t.Errorf("truncate(%q) = %q, want %q", in, got, want)
		}
	}
	if got := displayTruncated("whsec_...3frh"); got != "whsec_...3frh" {
		t.Errorf("displayTruncated kept form = %q", got)
	}
	// A full secret where a truncated one belongs is truncated here.
	if got := displayTruncated("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"); got != "whsec_...LaSw" {
		t.Errorf("displayTruncated(full) = %q", got)
	}
}

func TestValidSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"projects/p/secrets/s":            true,
		"projects/my-proj/secrets/hook-1": true,
		"projects/p/secrets/s/versions/1": false,
		"projects//secrets/s":             false,
		"secrets/s":                       false,
		"projects/p/secret/s":             false,
		"":                                false,
	} {
		if got := validSecretName(name); got != want {
			t.Errorf("validSecretName(%q) = %v, want %v", name, got, want)
		}
	}
}
