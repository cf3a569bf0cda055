package submit

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/lrosink/lrosink/internal/gemini"
)

// The two ways a Gemini create fails (match with errors.Is).
var (
	// ErrCreateRefused: Gemini refused the create (a 4xx); nothing was
	// created. The intent stays unbound: submit again with Force and the
	// same key, or with a new key.
	ErrCreateRefused = gemini.ErrCreateRefused
	// ErrCreateUnknown: the create got no answer, or a 5xx: the operation
	// may exist. Submit again with the same key: a batch is found by
	// listing; a video or an interaction is bound by its webhook, and
	// alerted if it never comes.
	ErrCreateUnknown = gemini.ErrCreateUnknown
	// ErrAPIKeyRefused: Gemini refused the API key (check GEMINI_API_KEY).
	ErrAPIKeyRefused = gemini.ErrAPIKeyRefused
)

// GeminiConfig says how to reach the Gemini API.
type GeminiConfig struct {
	// APIKey is required (GEMINI_API_KEY). No error or log line quotes it.
	APIKey string
	// BaseURL is the API's base URL; empty: the SDK's default, or
	// GOOGLE_GEMINI_BASE_URL when set.
	BaseURL    string
	HTTPClient *http.Client
}

// Gemini is the Gemini API as submit uses it: the three creates, the
// Files API upload, the batch listing that finds a batch a crashed
// submission created, and the project's webhooks (whether completion comes
// by webhook or by polling).
type Gemini struct {
	fetcher *gemini.Fetcher
	creator *gemini.Creator
}

// NewGemini returns a Gemini for cfg. It makes no call.
func NewGemini(cfg GeminiConfig) (*Gemini, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("submit: GeminiConfig.APIKey is required (GEMINI_API_KEY)")
	}
	f, err := gemini.New(gemini.Options{APIKey: cfg.APIKey, BaseURL: cfg.BaseURL, HTTPClient: cfg.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	return &Gemini{fetcher: f, creator: gemini.NewCreator(f)}, nil
}

// enabledWebhook returns an enabled project webhook, if there is one.
func (g *Gemini) enabledWebhook(ctx context.Context) (id, uri string, ok bool, err error) {
	hooks, err := g.fetcher.ListWebhooks(ctx)
	if err != nil {
		return "", "", false, err
	}
	for _, h := range hooks {
		if !h.Disabled {
			return h.ID, h.URI, true, nil
		}
	}
	return "", "", false, nil
}
