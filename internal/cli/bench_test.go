package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/config"
	"github.com/lrosink/lrosink/internal/logging"
)

// BenchmarkServeCompletions measures completions through serve's HTTP
// handler on SQLite: b.N signed batch.succeeded deliveries with distinct
// ids, from a few concurrent senders, each verified, committed with its
// claim, published (to a discarding stdout sink) and committed DONE.
// Reports completions per second and the p50/p99 request latency.
//
//	go test -run='^$' -bench=BenchmarkServeCompletions -benchtime=2000x ./internal/cli/
func BenchmarkServeCompletions(b *testing.B) {
	const senders = 4
	ctx := b.Context()
	secret := "whsec_" + "YmVuY2htYXJrYmVuY2htYXJrYmVuY2htYXJrISE="
	cfg, err := config.Load(mapEnv(map[string]string{
		"LROSINK_STORE":           "sqlite:" + filepath.Join(b.TempDir(), "bench.db"),
		"LROSINK_WEBHOOK_SECRETS": secret,
	}), config.Serve(openers(false)))
	if err != nil {
		b.Fatal(err)
	}
	e := &env{stdout: io.Discard, now: time.Now}
	a, err := e.newApp(ctx, cfg, logging.Discard(), true)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Mux())
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: senders}}

	run := fmt.Sprint(time.Now().UnixNano()) // ids distinct across -count runs
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range senders {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				req, err := signedDelivery(srv.URL, secret, fmt.Sprintf("bench_%s_%d", run, i), fmt.Sprintf("msg_%d", i))
				if err != nil {
					b.Error(err)
					return
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				var ans struct{ Outcome string }
				_ = json.NewDecoder(resp.Body).Decode(&ans)
				resp.Body.Close()
				lat[i] = time.Since(t0)
				if resp.StatusCode != http.StatusOK || ans.Outcome != "completed" {
					b.Errorf("delivery %d: %d %q", i, resp.StatusCode, ans.Outcome)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { // nearest rank
		i := max(0, int(math.Ceil(p*float64(len(lat))))-1)
		return float64(lat[i].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
