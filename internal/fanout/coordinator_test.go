package fanout_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/fanout"
	"github.com/lrosink/lrosink/internal/logging"
	"github.com/lrosink/lrosink/internal/reconcile"
	"github.com/lrosink/lrosink/internal/testutil"
)

// publisher records what it was asked to publish and fails after ok
// requests when fail is set.
type publisher struct {
	got  []fanout.Request
	ok   int
	fail error
}

func (p *publisher) Publish(_ context.Context, reqs []fanout.Request) (int, error) {
	p.got = append(p.got, reqs...)
	if p.fail != nil {
		return min(p.ok, len(reqs)), p.fail
	}
	return len(reqs), nil
}

type shared struct{ runs int }

func (s *shared) PassShared(context.Context) (reconcile.Summary, error) {
	s.runs++
	return reconcile.Summary{ClaimsRetried: 1}, nil
}

// One shard is no fan-out: the plain pass is it, so no coordinator is built.
func TestCoordinatorNeedsShards(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 65} {
		if _, err := fanout.NewCoordinator(fanout.Coordinator{Shared: &shared{}, Publisher: &publisher{}, Shards: n, Now: time.Now, Log: logging.Discard()}); err == nil {
			t.Errorf("%d shards: a coordinator was built", n)
		}
	}
}

// The coordinator publishes the tick's ranges, each with the tick, then
// runs the shared duties once.
func TestCoordinatorHandsOutEveryRange(t *testing.T) {
	clock := testutil.NewClock(time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC))
	p, s := &publisher{}, &shared{}
	c, err := fanout.NewCoordinator(fanout.Coordinator{Shared: s, Publisher: p, Shards: 5, Now: clock.Now, Log: logging.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Coordinate(t.Context())
	if err != nil || res.ShardPasses != 5 || res.ClaimsRetried != 1 || s.runs != 1 {
		t.Fatalf("Coordinate = %+v, %v; shared ran %d times", res, err, s.runs)
	}
	want, _ := fanout.Requests(5, clock.Now())
	if len(p.got) != len(want) {
		t.Fatalf("published %v, want %v", p.got, want)
	}
	for i := range want {
		if p.got[i].Range != want[i].Range || !p.got[i].Tick.Equal(clock.Now()) {
			t.Errorf("request %d = %+v, want %+v", i, p.got[i], want[i])
		}
	}
}

// A publish that failed is the coordinator's error (503: the Scheduler
// retries the tick), and the shared duties still ran.
func TestCoordinatorPublishFailure(t *testing.T) {
	p, s := &publisher{ok: 2, fail: errors.New("topic gone")}, &shared{}
	c, err := fanout.NewCoordinator(fanout.Coordinator{Shared: s, Publisher: p, Shards: 4, Now: time.Now, Log: logging.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Coordinate(t.Context())
	if err == nil || !strings.Contains(err.Error(), "topic gone") || res.ShardPasses != 2 || s.runs != 1 {
		t.Fatalf("Coordinate = %+v, %v; shared ran %d times", res, err, s.runs)
	}
}
