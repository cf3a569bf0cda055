//go:build !faultinject

package main

import (
	"errors"

	"github.com/lrosink/lrosink/internal/cli"
)

// faultsFromEnv: this build injects no faults. LROSINK_FAULT set here is a
// mistake (a crash test that would pass without crashing), so it is refused.
func faultsFromEnv(getenv func(string) string) ([]cli.Option, error) {
	if getenv("LROSINK_FAULT") != "" {
		return nil, errors.New("LROSINK_FAULT: set, but this binary was built without -tags faultinject")
	}
	return nil, nil
}
