package deploy_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/testutil"
)

// fakeGo is a `go` for scripts/tflint.sh: `go env GOPATH` names the test's
// directory and `go install` counts itself in $FAKE_DIR/installs, waits
// until $FAKE_DIR/gate exists (or the directory is gone), then fails when
// $FAKE_DIR/fail-N exists for its N-th call, or else writes a tflint that
// echoes its arguments.
const fakeGo = `#!/usr/bin/env bash
set -euo pipefail
case "$1" in
env) echo "$FAKE_DIR/gopath" ;;
install)
	echo install >>"$FAKE_DIR/installs"
	n=$(wc -l <"$FAKE_DIR/installs")
	# A test that ended early removed its directory: stop, never spin on.
	while [ ! -e "$FAKE_DIR/gate" ]; do [ -d "$FAKE_DIR" ] || exit 1; sleep 0.05; done
	if [ -e "$FAKE_DIR/fail-$n" ]; then echo "go: proxy refused tflint" >&2; exit 1; fi
	mkdir -p "$GOBIN"
	printf '#!/bin/sh\necho "fake tflint $*"\n' >"$GOBIN/tflint.tmp"
	chmod +x "$GOBIN/tflint.tmp"
	mv "$GOBIN/tflint.tmp" "$GOBIN/tflint"
	;;
*) echo "fake go: $*" >&2; exit 2 ;;
esac
`

// tflintEnv is a directory with the fake go first on PATH.
func tflintEnv(t *testing.T) (dir string, env []string) {
	t.Helper()
	dir = t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, append(os.Environ(), "FAKE_DIR="+dir, "PATH="+bin+":"+os.Getenv("PATH"))
}

func tflintCmd(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("../scripts/tflint.sh", args...)
	cmd.Env = env
	return cmd
}

func runTFLint(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := tflintCmd(env, args...)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil { // it never ran
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func installs(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "installs"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "install\n")
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTFLintLintWaitsForTheBackgroundInstall: `make test` prefetches tflint
// and lints after the tests. The prefetch returns while the install is held
// at the gate; the lint waits for that install instead of starting its own
// or running a missing tool, and lints once it is done.
func TestTFLintLintWaitsForTheBackgroundInstall(t *testing.T) {
	dir, env := tflintEnv(t)
	out, code := runTFLint(t, env, "prefetch")
	if code != 0 || !strings.Contains(out, "installing in the background") {
		t.Fatalf("prefetch: exit %d, output %q", code, out)
	}
	// The install cannot finish before the gate opens, so prefetch returned
	// without waiting for it.
	testutil.WaitFor(t, "the background install to start", time.Minute, func() bool { return installs(t, dir) == 1 })

	lint := tflintCmd(env)
	var lintOut strings.Builder
	lint.Stdout, lint.Stderr = &lintOut, &lintOut
	if err := lint.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- lint.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("the lint ended while the install was still running (%v): %q", err, lintOut.String())
	case <-time.After(300 * time.Millisecond):
	}
	touch(t, filepath.Join(dir, "gate"))
	if err := <-done; err != nil {
		t.Fatalf("lint: %v: %q", err, lintOut.String())
	}
	if got := lintOut.String(); !strings.Contains(got, "fake tflint --chdir=terraform") || !strings.Contains(got, "tflint: ok") {
		t.Fatalf("the lint did not run the installed tflint: %q", got)
	}
	if n := installs(t, dir); n != 1 {
		t.Fatalf("%d installs, want 1 (the lint must reuse the background one)", n)
	}

	// Installed: a prefetch does nothing, a lint installs nothing.
	if out, code := runTFLint(t, env, "prefetch"); code != 0 || out != "" {
		t.Fatalf("prefetch with tflint installed: exit %d, output %q", code, out)
	}
	if out, code := runTFLint(t, env); code != 0 || !strings.Contains(out, "tflint: ok") {
		t.Fatalf("lint with tflint installed: exit %d, output %q", code, out)
	}
	if n := installs(t, dir); n != 1 {
		t.Fatalf("%d installs after the tool was there, want 1", n)
	}
}

// TestTFLintFailedBackgroundInstallIsRetriedInTheForeground: a background
// install that failed (its output only in its log) is tried again by the
// lint, whose own output then shows why when that fails too.
func TestTFLintFailedBackgroundInstallIsRetriedInTheForeground(t *testing.T) {
	t.Run("second try succeeds", func(t *testing.T) {
		dir, env := failedPrefetch(t, 1)
		out, code := runTFLint(t, env)
		if code != 0 || !strings.Contains(out, "tflint: ok") {
			t.Fatalf("lint: exit %d, output %q", code, out)
		}
		if n := installs(t, dir); n != 2 {
			t.Fatalf("%d installs, want 2 (the failed background one, then the lint's)", n)
		}
	})
	t.Run("both fail", func(t *testing.T) {
		_, env := failedPrefetch(t, 1, 2)
		out, code := runTFLint(t, env)
		if code == 0 || !strings.Contains(out, "proxy refused tflint") || strings.Contains(out, "tflint: ok") {
			t.Fatalf("lint after two failed installs: exit %d, output %q (want a failure naming the cause)", code, out)
		}
	})
}

// failedPrefetch prefetches with the n-th install failing for each n in
// failing, and returns once the background install (the first) has failed,
// so the lint's is the second and not the first.
func failedPrefetch(t *testing.T, failing ...int) (string, []string) {
	t.Helper()
	dir, env := tflintEnv(t)
	touch(t, filepath.Join(dir, "gate"))
	for _, n := range failing {
		touch(t, filepath.Join(dir, fmt.Sprintf("fail-%d", n)))
	}
	if out, code := runTFLint(t, env, "prefetch"); code != 0 {
		t.Fatalf("prefetch: exit %d, output %q", code, out)
	}
	// The script names the log after its tflint version; the test does not
	// repeat that version.
	logs := filepath.Join(dir, "gopath", "bin", "lrosink-tools", "tflint-*.install.log")
	testutil.WaitFor(t, "the background install to fail", time.Minute, func() bool {
		found, _ := filepath.Glob(logs)
		for _, log := range found {
			if b, _ := os.ReadFile(log); strings.Contains(string(b), "proxy refused tflint") {
				return true
			}
		}
		return false
	})
	return dir, env
}
