//go:build faultinject

package main

import (
	"context"
	"fmt"
	"os"

	"github.com/lrosink/lrosink/internal/cli"
	"github.com/lrosink/lrosink/internal/ingest"
)

// crashExitCode is what a shell reports for a process killed by SIGKILL.
const crashExitCode = 137

// faultsFromEnv reads LROSINK_FAULT: crash-after-commit or
// crash-after-publish makes the process exit at once, like SIGKILL, the
// first time the ingest door reaches that boundary; crash-before-bind, the
// first time `lrosink submit` is about to bind the operation it created.
func faultsFromEnv(getenv func(string) string) ([]cli.Option, error) {
	switch v := getenv("LROSINK_FAULT"); v {
	case "":
		return nil, nil
	case "crash-after-commit":
		return []cli.Option{cli.WithFaults(crashAt{point: ingest.FaultAfterCommit})}, nil
	case "crash-after-publish":
		return []cli.Option{cli.WithFaults(crashAt{point: ingest.FaultAfterPublish})}, nil
	case "crash-before-bind":
		return []cli.Option{cli.WithBeforeBind(func(key, name string) {
			fmt.Fprintf(os.Stderr, "lrosink: LROSINK_FAULT: crashing before binding %s to intent %s\n", name, key)
			os.Exit(crashExitCode)
		})}, nil
	default:
		return nil, fmt.Errorf("LROSINK_FAULT: %q is not crash-after-commit, crash-after-publish or crash-before-bind", v)
	}
}

// crashAt exits the process at one boundary. os.Exit runs no deferred
// cleanup, releases no claim and flushes nothing, as a kill would; results
// already written to stdout are out, since the stdout sink does not buffer.
type crashAt struct{ point ingest.FaultPoint }

func (c crashAt) At(_ context.Context, p ingest.FaultPoint, operation string) error {
	if p == c.point {
		fmt.Fprintf(os.Stderr, "lrosink: LROSINK_FAULT: crashing at %s of %s\n", p, operation)
		os.Exit(crashExitCode)
	}
	return nil
}
