package submit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/lrosink/lrosink/internal/app/apptest"
	"github.com/lrosink/lrosink/internal/fakegemini"
	"github.com/lrosink/lrosink/submit"
)

// exampleServers starts a fake Gemini and lrosink's own Register function
// (serve's handlers over a SQLite ledger in a temporary directory) for the
// examples; a real program uses the Gemini API and `lrosink serve`'s (or
// the Cloud Run service's) /Register.
func exampleServers() (geminiURL, registerURL string, stop func()) {
	g := httptest.NewServer(fakegemini.New().Handler())
	dir, err := os.MkdirTemp("", "submit-example")
	if err != nil {
		panic(err)
	}
	r, stopR, err := apptest.Serve(context.Background(), dir, apptest.Options{})
	if err != nil {
		panic(err)
	}
	return g.URL, r.RegisterURL(), func() { g.Close(); stopR(); _ = os.RemoveAll(dir) }
}

// A batch job from a JSONL file of requests: the intent is recorded, the
// job created with the intent key in its webhook user_metadata, and bound.
func ExampleClient_Batch() {
	geminiURL, registerURL, stop := exampleServers()
	defer stop()
	ctx := context.Background()

	g, err := submit.NewGemini(submit.GeminiConfig{APIKey: fakegemini.DefaultAPIKey, BaseURL: geminiURL})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := submit.New(g, submit.HTTP(registerURL, nil), submit.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	input := `{"key":"q1","request":{"contents":[{"parts":[{"text":"Why is the sky blue?"}]}]}}` + "\n"
	sub, err := c.Batch(ctx, submit.Batch{
		Key:   "nightly-2026-12-01", // optional: without it a random int_… key is made
		Model: "gemini-2.5-flash", Input: strings.NewReader(input), InputSize: int64(len(input)),
		Metadata: map[string]any{"team": "data"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sub.Operation, sub.Key, sub.Completion)
	// Output: batches/batch-000001 nightly-2026-12-01 polling
}

// A retried submission of a video whose first attempt died after the
// create: nothing is created twice. Videos have no list API, so while the
// intent is unbound the retry refuses; Force creates anew under the key.
func ExampleErrIntentUnbound() {
	geminiURL, registerURL, stop := exampleServers()
	defer stop()
	ctx := context.Background()
	g, _ := submit.NewGemini(submit.GeminiConfig{APIKey: fakegemini.DefaultAPIKey, BaseURL: geminiURL})

	dying, _ := submit.New(g, killedBeforeBind{submit.HTTP(registerURL, nil)}, submit.Options{})
	v := submit.Video{Key: "promo-7", Model: "veo-3.0-generate-001", Prompt: "a red balloon over a lake"}
	_, err := dying.Video(ctx, v)
	fmt.Println("first attempt bound:", err == nil)

	c, _ := submit.New(g, submit.HTTP(registerURL, nil), submit.Options{})
	_, err = c.Video(ctx, v)
	fmt.Println("retry refused:", errors.Is(err, submit.ErrIntentUnbound))

	v.Force = true
	sub, err := c.Video(ctx, v)
	fmt.Println(sub.APIName, err)
	// Output:
	// first attempt bound: false
	// retry refused: true
	// models/veo-3.0-generate-001/operations/video-000002 <nil>
}

// Against a Register function guarded by LROSINK_ADMIN_TOKEN, the token
// goes as a Bearer header. On Cloud Run the service is guarded by IAM
// instead: use an ID-token client (google.golang.org/api/idtoken).
func ExampleHTTP() {
	client := &http.Client{Transport: submit.BearerTransport(os.Getenv("LROSINK_ADMIN_TOKEN"), nil)}
	intents := submit.HTTP("http://127.0.0.1:8080/Register", client)
	_ = intents
}
