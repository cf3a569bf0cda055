// Command lrosink runs lrosink locally (`lrosink serve`) and operates its
// ledger (register, ops, replay). See `lrosink --help`; the commands live in
// internal/cli.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/lrosink/lrosink/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal starts a graceful stop, a second one kills.
	go func() {
		<-ctx.Done()
		stop()
	}()
	opts := []cli.Option{cli.WithProcs(runtime.GOMAXPROCS)}
	faults, err := faultsFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lrosink:", err)
		os.Exit(2)
	}
	opts = append(opts, faults...)
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv, opts...)
	stop()
	os.Exit(code)
}
