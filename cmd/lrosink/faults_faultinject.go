//go:build faultinject

package main

import (
	"context"
	"fmt"
	"os"

	"github.com/lrosink/lrosink/internal/ingest"
)

// crashExitCode is what a shell reports for a process killed by SIGKILL.
const crashExitCode = 137

// faultsFromEnv reads LROSINK_FAULT: crash-after-commit or
// crash-after-publish makes the process exit at once, like SIGKILL, the
// first time the ingest door reaches that boundary.
func faultsFromEnv(getenv func(string) string) (ingest.Faults, error) {
	switch v := getenv("LROSINK_FAULT"); v {
	case "":
		return nil, nil
	case "crash-after-commit":
		return crashAt{point: ingest.FaultAfterCommit}, nil
	case "crash-after-publish":
		return crashAt{point: ingest.FaultAfterPublish}, nil
	default:
		return nil, fmt.Errorf("LROSINK_FAULT: %q is not crash-after-commit or crash-after-publish", v)
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
