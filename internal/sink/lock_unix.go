//go:build unix

package sink

import (
	"os"
	"syscall"
)

// lockAlone takes an exclusive advisory lock on f if no other File holds
// the file open (each holds a shared one while it is open) and reports
// whether it got it. Only a File alone with its file may cut an incomplete
// last line when it opens: a line another process is writing (`lrosink
// replay` beside `serve`) looks incomplete to a reader until its write
// returns.
func lockAlone(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// lockShared holds f's shared lock from now on (it replaces the exclusive
// one lockAlone took).
func lockShared(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_SH)
}
