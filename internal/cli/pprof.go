package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
)

// pprofEnv names the opt-in profiling listener of serve.
const pprofEnv = "LROSINK_PPROF_ADDR"

// pprofAddr is LROSINK_PPROF_ADDR checked: "" (off) or a loopback
// HOST:PORT. Profiles show code paths and memory, never served beyond
// this machine, so no other address is accepted (not even with
// LROSINK_ADMIN_TOKEN).
func pprofAddr(ctx context.Context, getenv func(string) string) (string, error) {
	addr := getenv(pprofEnv)
	if addr == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || !validPort(port) {
		return "", &command.ConfigError{Err: fmt.Errorf("%s: %q is not HOST:PORT with a port number 0-65535 (e.g. 127.0.0.1:6060)", pprofEnv, addr)}
	}
	if !loopback(ctx, host) {
		return "", &command.ConfigError{Err: fmt.Errorf("%s: %q is not a loopback address: profiles are served on 127.0.0.1 or [::1] only", pprofEnv, addr)}
	}
	return addr, nil
}

// startPprof serves net/http/pprof's handlers on addr, on a mux of its own
// (never on serve's), and prints where. stop closes it.
func startPprof(e *env, addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &command.ConfigError{Err: fmt.Errorf("%s: %w", pprofEnv, listenError(addr, err))}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ErrServerClosed on stop
	fmt.Fprintf(e.stderr, "lrosink: pprof on http://%s/debug/pprof/\n", ln.Addr())
	return func() { _ = srv.Close() }, nil
}
