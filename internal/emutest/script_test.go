package emutest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakePortEnv makes this test binary a fake emulator: it answers "Ok" on
// that loopback port, as both emulators do, until it is killed (or for two
// minutes, so that a failed test leaves nothing running).
const fakePortEnv = "LROSINK_FAKE_EMULATOR_PORT"

func TestMain(m *testing.M) {
	if port := os.Getenv(fakePortEnv); port != "" {
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			fmt.Println("fake emulator:", err)
			os.Exit(1)
		}
		go func() { time.Sleep(2 * time.Minute); os.Exit(0) }()
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("Ok")) }))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// lib is scripts/emulators-lib.sh, which scripts/with-emulators.sh sources.
func lib(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../scripts/emulators-lib.sh")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runLib runs script after sourcing the library, with env added; it returns
// stdout, stderr and the exit code.
func runLib(t *testing.T, script string, env ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("bash", "-c", "set -euo pipefail; . "+lib(t)+"; "+script)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// TestFreePortStaysBelowTheEphemeralRange: the emulators' ports are chosen
// below the kernel's ephemeral range, where no outgoing connection can take
// one between the check and the emulator's bind; a range that leaves too
// little room below it falls back to 20000–59999.
func TestFreePortStaysBelowTheEphemeralRange(t *testing.T) {
	for _, c := range []struct {
		rng    string
		lo, hi int // [lo, hi)
	}{
		{"32768\t60999\n", 20000, 32768},
		{"40000\t65000\n", 20000, 40000},
		{"1024\t65535\n", 20000, 60000},
	} {
		f := filepath.Join(t.TempDir(), "ip_local_port_range")
		if err := os.WriteFile(f, []byte(c.rng), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runLib(t, `for _ in $(seq 1 300); do free_port; done`, "LROSINK_PORT_RANGE_FILE="+f)
		if code != 0 {
			t.Fatalf("range %q: exit %d: %s", c.rng, code, errOut)
		}
		ports := strings.Fields(out)
		if len(ports) != 300 {
			t.Fatalf("range %q: %d ports, want 300", c.rng, len(ports))
		}
		for _, s := range ports {
			p, err := strconv.Atoi(s)
			if err != nil || p < c.lo || p >= c.hi {
				t.Fatalf("range %q: port %q, want one in [%d, %d)", c.rng, s, c.lo, c.hi)
			}
		}
	}
}

// fakeEmulator writes an emulator command that fails the first fails runs
// with log line failure, then serves "Ok" on the port it is given; runs
// counts its starts.
func fakeEmulator(t *testing.T, fails int, failure string) (cmd string, runs func() int) {
	t.Helper()
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	count := filepath.Join(dir, "count")
	script := fmt.Sprintf(`#!/usr/bin/env bash
n=$(cat %[1]q 2>/dev/null || echo 0)
echo $((n + 1)) >%[1]q
if [ "$n" -lt %[2]d ]; then echo %[3]q; exit 1; fi
%[4]s=$1 exec %[5]q
`, count, fails, failure, fakePortEnv, self)
	cmd = filepath.Join(dir, "fake-emulator")
	if err := os.WriteFile(cmd, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return cmd, func() int {
		b, err := os.ReadFile(count)
		if err != nil {
			return 0
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
}

const (
	bindFailure  = "java.net.BindException: Address already in use"
	otherFailure = "SEVERE: Exiting due to unexpected exception: no JRE"
	// launchAndAwait starts the fake emulator, waits for it, prints its
	// port and stops it.
	launchAndAwait = `emu_launch Fake "$LOGDIR/fake.log" "$FAKE" "{port}"; emu_await Fake; echo "ready ${emu_port[Fake]}"; kill -TERM -- "-${emu_pid[Fake]}"`
)

// TestEmulatorStartedAgainWhenItsPortWasTaken: an emulator that exits
// because its port was taken before it bound is started again on another
// port, and the run goes on once it answers.
func TestEmulatorStartedAgainWhenItsPortWasTaken(t *testing.T) {
	fake, runs := fakeEmulator(t, 1, bindFailure)
	out, errOut, code := runLib(t, launchAndAwait, "FAKE="+fake, "LOGDIR="+t.TempDir(), "EMULATOR_READY_TIMEOUT=60")
	if code != 0 || !strings.HasPrefix(out, "ready ") {
		t.Fatalf("exit %d, stdout %q, stderr %q: want the emulator ready on its second start", code, out, errOut)
	}
	if n := runs(); n != 2 {
		t.Fatalf("the emulator was started %d times, want 2", n)
	}
	if !strings.Contains(errOut, "was taken before it bound; starting it on another") {
		t.Fatalf("stderr %q does not say why the emulator was started again", errOut)
	}
}

// TestEmulatorStartFailuresEndTheRun: a start-up failure of another kind
// ends the run at once with the emulator's log, and a port taken three
// times in a row ends it too; neither is retried beyond that.
func TestEmulatorStartFailuresEndTheRun(t *testing.T) {
	for _, c := range []struct {
		failure string
		runs    int
	}{
		{otherFailure, 1},
		{bindFailure, 3},
	} {
		fake, runs := fakeEmulator(t, 10, c.failure)
		out, errOut, code := runLib(t, launchAndAwait, "FAKE="+fake, "LOGDIR="+t.TempDir(), "EMULATOR_READY_TIMEOUT=60")
		if code != 2 || out != "" {
			t.Fatalf("%q: exit %d, stdout %q: want exit 2 and no emulator ready", c.failure, code, out)
		}
		if n := runs(); n != c.runs {
			t.Fatalf("%q: the emulator was started %d times, want %d", c.failure, n, c.runs)
		}
		if !strings.Contains(errOut, "exited before it answered") || !strings.Contains(errOut, c.failure) {
			t.Fatalf("%q: stderr %q does not say the emulator exited, with its log", c.failure, errOut)
		}
	}
}
