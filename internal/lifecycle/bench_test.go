package lifecycle_test

import (
	"testing"

	"github.com/lrosink/lrosink/internal/lifecycle"
)

var benchSink lifecycle.Decision

// BenchmarkApply runs Apply over a fixed mix of realistic shuffled streams
// (seeded), each from the zero Current, so every decision branch is
// represented.
func BenchmarkApply(b *testing.B) {
	r := newRand(propSeed)
	var streams [][]lifecycle.Event
	for range 64 {
		streams = append(streams, genStream(r, 1+r.IntN(2)).events)
	}
	var (
		c    lifecycle.Current
		s, i int
	)
	b.ReportAllocs()
	for b.Loop() {
		benchSink = lifecycle.Apply(c, streams[s][i])
		c = benchSink.Next
		if i++; i == len(streams[s]) {
			i, c = 0, lifecycle.Current{}
			s = (s + 1) % len(streams)
		}
	}
}
