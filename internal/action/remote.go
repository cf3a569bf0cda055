package action

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/compute/metadata"
)

// maxAnswer bounds the Reconcile function's answer to an action.
const maxAnswer = 64 << 10

// HTTP returns the Doer of the Reconcile function at reconcileURL: each
// action is a POST of its Request, answered with its Result (CONTRACT.md
// §4). client carries the authentication (IDTokenTransport on Cloud Run);
// nil: http.DefaultClient. The Console service on Cloud Run acts through
// it, so that it never needs a ledger write role of its own.
func HTTP(reconcileURL string, client *http.Client) Doer {
	if client == nil {
		client = http.DefaultClient
	}
	return remote{url: reconcileURL, client: client}
}

type remote struct {
	url    string
	client *http.Client
}

func (r remote) Do(ctx context.Context, req Request) (Result, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Result{}, fmt.Errorf("action: encode the request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return Result{}, fmt.Errorf("action: the Reconcile function's URL: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(hr)
	if err != nil {
		return Result{}, fmt.Errorf("action: call the Reconcile function: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return Result{}, fmt.Errorf("action: read the Reconcile function's answer (%d): %w", resp.StatusCode, err)
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil || res.Outcome == "" {
		// Not an action's answer: an IAM refusal (401, 403 from Cloud
		// Run's front end), a proxy's page, an older Reconcile function.
		return Result{}, fmt.Errorf("action: the Reconcile function answered %d, not an action's result", resp.StatusCode)
	}
	return res, nil
}

// TokenSource returns an OIDC ID token for audience.
type TokenSource func(ctx context.Context, audience string) (string, error)

// MetadataIDToken is the ID token of the instance's service account, from
// the metadata server (Cloud Run, GCE): the Console's own identity, which
// the Reconcile service's run.invoker binding lets in.
func MetadataIDToken(ctx context.Context, audience string) (string, error) {
	tok, err := metadata.NewClient(nil).GetWithContext(ctx,
		"instance/service-accounts/default/identity?audience="+url.QueryEscape(audience)+"&format=full")
	if err != nil {
		return "", fmt.Errorf("action: ID token from the metadata server: %w", err)
	}
	return strings.TrimSpace(tok), nil
}

// IDTokenTransport adds "Authorization: Bearer <ID token for audience>" to
// every request, the token from src (MetadataIDToken on Cloud Run), kept
// until a minute before it expires. base nil: http.DefaultTransport. The
// token is never logged.
func IDTokenTransport(audience string, src TokenSource, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &idTransport{aud: audience, src: src, base: base, now: time.Now}
}

type idTransport struct {
	aud  string
	src  TokenSource
	base http.RoundTripper
	now  func() time.Time

	mu  sync.Mutex
	tok string
	exp time.Time
}

func (t *idTransport) token(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok != "" && t.now().Before(t.exp.Add(-time.Minute)) {
		return t.tok, nil
	}
	tok, err := t.src(ctx, t.aud)
	if err != nil {
		return "", err
	}
	if tok == "" {
		return "", errors.New("action: the token source gave an empty ID token")
	}
	t.tok, t.exp = tok, expiry(tok, t.now())
	return tok, nil
}

func (t *idTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := t.token(r.Context())
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.base.RoundTrip(r)
}

// expiry reads a JWT's exp claim (unverified: it is our own token, from the
// metadata server); a token it cannot read is kept 5 minutes.
func expiry(tok string, now time.Time) time.Time {
	parts := strings.Split(tok, ".")
	if len(parts) == 3 {
		if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			var c struct {
				Exp int64 `json:"exp"`
			}
			if json.Unmarshal(b, &c) == nil && c.Exp > 0 {
				return time.Unix(c.Exp, 0)
			}
		}
	}
	return now.Add(5 * time.Minute)
}
