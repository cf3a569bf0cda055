// Command server is the container entry point: functions-framework serving
// lrosink's functions. With FUNCTION_TARGET=Webhook (or Reconcile, Register,
// Console) it serves that one function at "/" (the console's pages are under
// /ui/, so the console needs its own target); without it, Webhook, Reconcile
// and Register at /Webhook, /Reconcile and /Register. PORT selects the port
// (default 8080).
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	_ "github.com/lrosink/lrosink/functions" // registers the functions
	"github.com/lrosink/lrosink/internal/config"
)

func main() {
	if err := run(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "lrosink:", line)
		}
		os.Exit(2)
	}
}

func run() error {
	// Validate before serving: a bad deployment fails here, with one line
	// per bad variable, instead of at the first request.
	if _, err := config.Load(os.Getenv, config.Container()); err != nil {
		return err
	}
	switch t := os.Getenv("FUNCTION_TARGET"); t {
	case "", "Webhook", "Reconcile", "Register", "Console":
	default:
		return fmt.Errorf("FUNCTION_TARGET: %q is not one of Webhook, Reconcile, Register, Console", t)
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	// Cloud Run stops instances with SIGTERM; functions-framework has no
	// graceful shutdown, and none is needed for correctness: a request cut
	// short is answered by nobody, so Gemini redelivers it, and every crash
	// point of the ingest door is safe (docs/ARCHITECTURE.md).
	return funcframework.StartHostPort(os.Getenv("HOST"), port)
}
