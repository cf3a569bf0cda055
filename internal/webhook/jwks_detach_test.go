package webhook

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/testutil"
)

// forgedToken is a compact RS256 JWS naming kid, with a signature that does
// not verify: the kid is looked up before any signature is checked, so this
// is all an attacker needs to make us consult the JWKS.
func forgedToken(kid string) string {
	enc := base64.RawURLEncoding.EncodeToString
	head := enc(fmt.Appendf(nil, `{"alg":"RS256","typ":"JWT","kid":%q}`, kid))
	return head + "." + enc([]byte(`{"exp":9999999999}`)) + "." + enc([]byte("not a signature"))
}

// hangUpCtx is a caller that hangs up as soon as it starts waiting: the
// first call of Done tells the test, which then cancels it. This cancels each
// caller while the JWKS fetch it depends on is still outstanding, without
// sleeps or timeouts.
type hangUpCtx struct {
	context.Context
	once    sync.Once
	waiting chan<- struct{}
}

func (c *hangUpCtx) Done() <-chan struct{} {
	c.once.Do(func() { c.waiting <- struct{}{} })
	return c.Context.Done()
}

// countingTransport counts the JWKS requests the cache starts, including
// those whose caller's context was already cancelled (which never reach
// the server).
type countingTransport struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(r)
}

// TestJWKSFetchOutlivesCallers: callers with random kids that hang up while
// the (slow) JWKS fetch is outstanding neither start more fetches nor abort
// the one running; the fetch still fills the cache, and fetches stay bounded
// by the refetch interval on the Verifier's clock.
func TestJWKSFetchOutlivesCallers(t *testing.T) {
	f := loadFixtures(t)
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := newJWKSServer(t, f.JWT.JWKS)
	slow := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done(): // the fetch was abandoned
			return
		}
		slow.ServeHTTP(w, r)
	})
	rt := &countingTransport{next: srv.Client().Transport}
	clk := testutil.NewClock(f.now())
	v := mustVerifier(t, Config{JWKSURL: srv.URL, HTTPClient: &http.Client{Transport: rt}, Now: clk.Now})

	hangUps := func(n int) {
		t.Helper()
		for i := range n {
			waiting := make(chan struct{}, 1)
			parent, cancel := context.WithCancel(t.Context())
			ctx := &hangUpCtx{Context: parent, waiting: waiting}
			errc := make(chan error, 1)
			go func() {
				_, err := v.Verify(ctx, headers("", "", forgedToken(fmt.Sprintf("random-%d-%d", clk.Now().Unix(), i))), nil)
				errc <- err
			}()
			var err error
			select {
			case <-waiting:
				cancel()
				err = <-errc
			case err = <-errc: // answered without waiting (rate-limited)
				cancel()
			}
			var we *Error
			if err == nil || !errors.As(err, &we) || (we.Reason != ReasonJWKSUnavailable && we.Reason != ReasonUnknownKID) {
				t.Fatalf("caller %d: %v, want jwks-unavailable or unknown-kid", i, err)
			}
		}
	}

	hangUps(50)
	<-arrived // the fetch runs on its own goroutine: wait until it has been sent
	if got := rt.n.Load(); got != 1 {
		t.Fatalf("%d JWKS fetches for 50 callers that hung up, want 1 (the attempt must be recorded when it starts)", got)
	}
	close(release)

	// The detached fetch completes and fills the cache: a known kid now
	// verifies without another fetch (the clock has not moved, so a second
	// fetch would also break the rate limit).
	if _, err := v.Verify(t.Context(), headers("", "", f.token(t, "valid")), nil); err != nil {
		t.Fatalf("known kid after the detached fetch: %v", err)
	}
	if got := rt.n.Load(); got != 1 {
		t.Fatalf("JWKS fetches = %d, want 1", got)
	}

	// More random kids within the interval: no fetch; after it: exactly one.
	clk.Advance(jwksRefetchInterval - time.Second)
	hangUps(20)
	if got := rt.n.Load(); got != 1 {
		t.Fatalf("JWKS fetches = %d within the refetch interval, want 1", got)
	}
	clk.Advance(time.Second)
	hangUps(20)
	// A caller that does not hang up waits for a fetch still in flight, so
	// the count below is final.
	_, err := v.Verify(t.Context(), headers("", "", forgedToken("patient")), nil)
	wantErr(t, err, ReasonUnknownKID)
	if got := rt.n.Load(); got != 2 {
		t.Fatalf("JWKS fetches = %d after the refetch interval, want 2", got)
	}
}
