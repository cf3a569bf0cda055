package webhook

import (
	"context"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	// jwksRefetchInterval bounds JWKS fetches: an attacker sending random
	// kids or bad v1a signatures must not turn us into a load generator
	// against the JWKS host, and a key Google adds must not wait an hour.
	jwksRefetchInterval = time.Minute
	// jwksMaxAge makes a key removed from the JWKS (revoked) stop verifying
	// within an hour even if we keep seeing it used.
	jwksMaxAge = time.Hour
	// jwksTimeout caps one fetch; Gemini waits only seconds for our answer.
	jwksTimeout = 5 * time.Second
	// jwksMaxBytes caps the JWKS body; real ones are a few KiB.
	jwksMaxBytes = 1 << 20
)

// keySet is one fetched JWKS, reduced to what lrosink verifies with: RS256
// keys by kid for dynamic-webhook JWTs, and every Ed25519 key for
// Standard Webhooks v1a signatures (the delivery names no key). It is never
// modified after parseJWKS, so callers may use it outside the cache's lock.
type keySet struct {
	rsa *jose.JSONWebKeySet
	ed  []ed25519.PublicKey
}

// rsaKey returns the RS256 key published under kid, or nil.
func (s *keySet) rsaKey(kid string) *rsa.PublicKey {
	for _, k := range s.rsa.Key(kid) {
		if pub, ok := k.Key.(*rsa.PublicKey); ok {
			return pub
		}
	}
	return nil
}

// jwksCache holds the last good key set and rate-limits refetches.
//
// A refetch is recorded (attemptAt) when it starts and runs detached from
// the caller that triggered it, bounded by jwksTimeout: a caller that hangs
// up neither erases the attempt (forged tokens with random kids would then
// drive unbounded fetches) nor wastes the fetch, which still fills the cache.
// Callers needing the outcome wait for it or for their own context; a
// caller arriving while a fetch runs shares it.
type jwksCache struct {
	url    *url.URL
	client *http.Client

	mu        sync.Mutex
	set       *keySet       // last good set; nil before the first success
	fetchedAt time.Time     // when set was fetched
	attemptAt time.Time     // start of the last fetch, successful or not
	lastErr   error         // error of the last finished fetch; nil after a success
	inflight  chan struct{} // non-nil while a fetch runs; closed when it ends
}

func newJWKSCache(u *url.URL, c *http.Client) *jwksCache {
	return &jwksCache{url: u, client: c}
}

// rsaKey returns the RS256 verification key for kid (JWT path).
func (c *jwksCache) rsaKey(ctx context.Context, kid string, now time.Time) (*rsa.PublicKey, *Error) {
	var key *rsa.PublicKey
	found, err := c.find(ctx, now, func(s *keySet) bool {
		key = s.rsaKey(kid)
		return key != nil
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, unauthorized(ReasonUnknownKID, "kid "+quoteShort(kid)+" is not in the JWKS")
	}
	return key, nil
}

// find reports whether match accepts the current key set. When it does
// not (an unknown kid, a v1a signature no key verifies) or the set is older
// than jwksMaxAge, the JWKS is refetched, at most once per
// jwksRefetchInterval (measured with the Verifier's clock), and match is
// asked again about a set it has not seen. match runs outside the lock (a
// signature check must not serialise deliveries) and may run twice.
func (c *jwksCache) find(ctx context.Context, now time.Time, match func(*keySet) bool) (bool, *Error) {
	c.mu.Lock()
	var seen *keySet
	if c.set != nil && now.Sub(c.fetchedAt) < jwksMaxAge {
		seen = c.set
	}
	c.mu.Unlock()
	if seen != nil && match(seen) {
		return true, nil
	}

	c.mu.Lock()
	wait := c.inflight
	if wait == nil && (c.attemptAt.IsZero() || now.Sub(c.attemptAt) >= jwksRefetchInterval) {
		if err := ctx.Err(); err != nil {
			// Gone before anything started: start nothing on its behalf.
			c.mu.Unlock()
			return false, unavailable("", err)
		}
		wait = make(chan struct{})
		c.inflight, c.attemptAt = wait, now
		go c.refresh(now, wait)
	}
	c.mu.Unlock()

	if wait != nil {
		select {
		case <-wait:
		default:
			select {
			case <-wait:
			case <-ctx.Done():
				return false, unavailable("waiting for the JWKS", ctx.Err())
			}
		}
	}

	c.mu.Lock()
	set, lastErr := c.set, c.lastErr
	c.mu.Unlock()
	// A stale set still answers when the refetch failed: a JWKS outage
	// should not reject deliveries we can verify.
	if set != nil && set != seen && match(set) {
		return true, nil
	}
	if lastErr != nil {
		// We cannot tell an unknown key from a key we failed to load:
		// answer 503 so Gemini redelivers.
		return false, unavailable("", lastErr)
	}
	return false, nil
}

// refresh runs one fetch started at now (the Verifier's clock) and closes
// done when it has recorded the outcome. Its context is its own: no caller
// can cancel it, and jwksTimeout bounds it, so it cannot leak.
func (c *jwksCache) refresh(now time.Time, done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), jwksTimeout)
	defer cancel()
	set, err := c.fetch(ctx)
	c.mu.Lock()
	if err == nil {
		c.set, c.fetchedAt, c.lastErr = set, now, nil
	} else {
		c.lastErr = err
	}
	c.inflight = nil
	c.mu.Unlock()
	close(done)
}

func (c *jwksCache) fetch(ctx context.Context) (*keySet, error) {
	var r io.ReadCloser
	if c.url.Scheme == "file" {
		// A local JWKS (development: `lrosink serve` against keys made
		// with openssl); read anew on each refetch like a remote one.
		f, err := os.Open(c.url.Path)
		if err != nil {
			return nil, fmt.Errorf("opening JWKS file: %w", err)
		}
		r = f
	} else {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url.String(), nil)
		if err != nil {
			return nil, fmt.Errorf("building JWKS request: %w", err)
		}
		req.Header.Set("Accept", "application/json")
		resp, err := c.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("requesting JWKS: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("JWKS answered status %d", resp.StatusCode)
		}
		r = resp.Body
	}
	defer r.Close()
	raw, err := io.ReadAll(io.LimitReader(r, jwksMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading JWKS: %w", err)
	}
	if len(raw) > jwksMaxBytes {
		return nil, errors.New("JWKS larger than 1 MiB")
	}
	return parseJWKS(raw)
}

// parseJWKS keeps public RSA signing keys with a kid (RS256, for JWTs) and
// OKP Ed25519 keys (for v1a). Keys are decoded one by one so that a key
// type go-jose does not know (or a malformed key) cannot disable the
// others; a key is used only by the path its type belongs to, so an RSA
// key can never check a v1a signature nor an Ed25519 key a JWT.
func parseJWKS(raw []byte) (*keySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("decoding JWKS: %w", err)
	}
	set := &keySet{rsa: &jose.JSONWebKeySet{}}
	for _, r := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(r); err != nil {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch pub := k.Key.(type) {
		case *rsa.PublicKey:
			if k.KeyID != "" && (k.Algorithm == "" || k.Algorithm == string(jose.RS256)) {
				set.rsa.Keys = append(set.rsa.Keys, k)
			}
		case ed25519.PublicKey:
			// RFC 8037 names the algorithm EdDSA; RFC 9864 adds Ed25519.
			if k.Algorithm == "" || k.Algorithm == string(jose.EdDSA) || k.Algorithm == "Ed25519" {
				set.ed = append(set.ed, pub)
			}
		}
	}
	if len(set.rsa.Keys) == 0 && len(set.ed) == 0 {
		return nil, errors.New("JWKS has no usable RS256 or Ed25519 keys")
	}
	return set, nil
}
