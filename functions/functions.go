// Package functions serves lrosink's Cloud Run functions: Webhook,
// Register, Reconcile and Console (the read-only console, served privately:
// IAM invoker only), and metrics (GET /metrics when every function is
// served), all served by one App that the caller has already built.
// cmd/server builds the App from the environment before it listens, so a
// bad deployment exits at start-up with one line naming the variable instead
// of answering every request with 503.
//
// The routing is functions-framework's (FUNCTION_TARGET: that one function
// at "/"; none: each at /Name), served by cmd/server's own http.Server,
// because functions-framework-go's server cannot be shut down gracefully.
package functions

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/lrosink/lrosink/internal/app"
)

// Names are the functions Handler serves (FUNCTION_TARGET values).
func Names() []string { return []string{"Webhook", "Register", "Reconcile", "Console"} }

// CheckTarget reports whether target ("" or one of Names) can be served,
// naming FUNCTION_TARGET when it cannot: cmd/server checks it before it
// opens anything.
func CheckTarget(target string) error {
	if target != "" && !slices.Contains(Names(), target) {
		return fmt.Errorf("FUNCTION_TARGET: %q is not one of %s", target, strings.Join(Names(), ", "))
	}
	return nil
}

// Handler serves the functions of a. target is FUNCTION_TARGET: one of
// Names, served at "/" (and every path below it); "" serves each function
// at /Name and the metrics at /metrics. A service that serves the Console
// alone runs no reconcile passes, so its console does not wait for any.
func Handler(a *app.App, target string) (http.Handler, error) {
	if err := CheckTarget(target); err != nil {
		return nil, err
	}
	console, err := a.Console(target != "Console")
	if err != nil {
		return nil, err // embedded templates that do not parse: a broken build
	}
	fns := map[string]http.Handler{"Webhook": a.Webhook(), "Register": a.Register(), "Reconcile": a.Reconcile(), "Console": console}
	mux := http.NewServeMux()
	if target != "" {
		mux.Handle("/", fns[target])
		return mux, nil
	}
	for name, h := range fns {
		mux.Handle("/"+name, h)
	}
	// Only when every function is served: a Cloud Run service serving one
	// function never exposes it, and it is not a FUNCTION_TARGET (Names).
	mux.Handle("/metrics", a.MetricsHandler())
	return mux, nil
}
