//go:build linux

package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/lrosink/lrosink/internal/testutil"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// openPTY opens a pseudo-terminal pair with the kernel's own calls (no
// dependency for one test): what serve's stderr is in a developer's
// terminal.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlock the pty: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("pty number: %v", e)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pty's terminal: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// testServeStreamInATerminal: with stderr a terminal and no
// LROSINK_LOG_FORMAT, serve prints its human stream: the delivery's one
// line, and no JSON.
func testServeStreamInATerminal(t *testing.T, bin string) {
	master, tty := openPTY(t)
	secret, addr := webhooktest.NewSecret(), freeAddr(t)
	cmd := exec.Command(bin, "serve", "--addr", addr)
	cmd.Dir, cmd.Env = t.TempDir(), childEnv("LROSINK_WEBHOOK_SECRETS="+secret)
	cmd.Stdout, cmd.Stderr = nil, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // serve holds its own copy
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	out := &testutil.SyncBuffer{}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			_, _ = out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	base := "http://" + addr
	for i := 0; ; i++ {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if i == 600 {
			t.Fatalf("serve did not come up:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	mustDeliver(t, base, secret, "fmt_tty", "msg_tty", "completed")
	deadline, want := time.Now().Add(30*time.Second), streamLine("fmt_tty")
	for !want.MatchString(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no stream line for the delivery on the terminal (want %s):\n%s", want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "{") {
			t.Errorf("a terminal got JSON: %q", l)
		}
	}
}
