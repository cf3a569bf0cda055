//go:build !linux

package main

import "testing"

// testServeStreamInATerminal needs Linux's /dev/ptmx to give serve a
// terminal; the stream's format is tested everywhere
// (internal/logging's golden test, LROSINK_LOG_FORMAT=text above).
func testServeStreamInATerminal(t *testing.T, _ string) {
	t.Skip("a pseudo-terminal is opened with Linux's ioctls only")
}
