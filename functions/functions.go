// Package functions registers lrosink's Cloud Run functions with
// functions-framework-go: Webhook, Register, Reconcile and Console (the
// read-only console, served privately: IAM invoker only), and metrics (GET
// /metrics when every function is served), all served by one App that the
// caller has already built. cmd/server builds the App from the environment
// before it registers and listens, so a bad deployment exits at start-up
// with one line naming the variable instead of answering every request
// with 503.
package functions

import (
	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/lrosink/lrosink/internal/app"
)

// Names are the functions Register registers (FUNCTION_TARGET values).
func Names() []string { return []string{"Webhook", "Register", "Reconcile", "Console"} }

// Register registers the functions, served by a, with functions-framework.
// Call it once, before funcframework starts. target is FUNCTION_TARGET (""
// serves every function): a service that serves the Console alone runs no
// reconcile passes, so its console does not wait for any.
func Register(a *app.App, target string) error {
	console, err := a.Console(target != "Console")
	if err != nil {
		return err // embedded templates that do not parse: a broken build
	}
	functions.HTTP("Webhook", a.Webhook().ServeHTTP)
	functions.HTTP("Register", a.Register().ServeHTTP)
	functions.HTTP("Reconcile", a.Reconcile().ServeHTTP)
	// Served at /metrics when cmd/server runs every function (no
	// FUNCTION_TARGET); a Cloud Run service serving one function never
	// exposes it, and it is not a FUNCTION_TARGET (Names).
	functions.HTTP("metrics", a.MetricsHandler().ServeHTTP)
	functions.HTTP("Console", console.ServeHTTP)
	return nil
}
