package testutil

import (
	"bytes"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// FailsBeforeListening runs cmd, which is configured to listen on addr
// (host:port), and requires that it exits with status 2 before it ever
// accepts a connection on addr, with exactly one line on stderr that names
// variable and does not contain any of secrets. While the process runs the
// address is probed; an accepted connection fails the test at once (the old
// behaviour of serving a broken configuration), so a process that would serve
// forever cannot hang the test.
func FailsBeforeListening(t *testing.T, cmd *exec.Cmd, addr, variable string, secrets ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
probe:
	for {
		select {
		case err = <-exited:
			break probe
		default:
		}
		if c, derr := net.DialTimeout("tcp", addr, time.Second); derr == nil {
			c.Close()
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("the process listened on %s with a bad %s; stderr:\n%s", addr, variable, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want status 2; stderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], variable) {
		t.Fatalf("stderr %q: want one line naming %s", stderr.String(), variable)
	}
	for _, s := range secrets {
		if strings.Contains(stderr.String(), s) {
			t.Fatalf("stderr reveals a secret: %q", stderr.String())
		}
	}
	if strings.Contains(stdout.String()+stderr.String(), "listening") {
		t.Fatalf("a listening line was printed:\n%s%s", stdout.String(), stderr.String())
	}
}
