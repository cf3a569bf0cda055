// Package urlopen parses, validates and opens lrosink's URL-like settings,
// LROSINK_STORE and LROSINK_RESULTS, through one registry of schemes (the
// idea of go-cloud's URLMux: a setting is "scheme:rest", the scheme selects
// an opener, and a binary can open only the schemes registered with it).
//
// There is no global registry: each binary builds its set explicitly
// (Cloud for the container, which has no SQLite; cmd/lrosink adds the
// sqlite: scheme from internal/urlopen/sqliteurl), and configuration
// validation, the app, the CLI and the simulator all go through that set,
// so a value is accepted or refused the same way everywhere.
package urlopen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/sink"
)

// The settings this package opens.
const (
	StoreVar   = "LROSINK_STORE"
	ResultsVar = "LROSINK_RESULTS"
)

// Env is what openers need besides the setting itself. It comes from the
// validated configuration; no opener reads the environment on its own.
type Env struct {
	// Project is GOOGLE_CLOUD_PROJECT (see FirestoreClient for the fallback).
	Project string
	// FirestoreDatabase is LROSINK_FIRESTORE_DATABASE ("" means "(default)").
	FirestoreDatabase string
	// FirestoreEmulatorHost is FIRESTORE_EMULATOR_HOST.
	FirestoreEmulatorHost string
	// StoreTimeout is LROSINK_STORE_TIMEOUT: the bound of every call to a
	// networked store (ledger.DefaultCallTimeout when zero).
	StoreTimeout time.Duration
	// Retention is LROSINK_RETENTION: Firestore writes expire_at on
	// settled operations for its TTL policy (0: none).
	Retention time.Duration
	// Stdout receives `stdout` results; Open fails without it.
	Stdout io.Writer
	// Log receives what opening a value has to say (a `file:` results file
	// whose incomplete last line was removed); Open of `file:` fails
	// without it.
	Log *slog.Logger
}

// Scheme opens one scheme of a setting.
type Scheme[T any] struct {
	// Name is the scheme: the part before the first ':' ("sqlite"), or the
	// whole value for a scheme that takes nothing after it ("stdout").
	Name string
	// Form is how the value is written, for messages ("sqlite:PATH").
	Form string
	// Check validates rest (what follows "Name:") without any I/O, so a bad
	// value fails when the configuration is loaded.
	Check func(rest string, env Env) error
	// Open opens the value; close releases what it opened.
	Open func(ctx context.Context, rest string, env Env) (value T, close func() error, err error)
}

// Registry is the set of schemes one binary can open for one setting.
type Registry[T any] struct {
	variable string
	schemes  map[string]Scheme[T]
}

// NewRegistry registers schemes for variable. Registering a scheme twice is
// a programming error and panics, as two openers for one value would make
// the choice depend on order.
func NewRegistry[T any](variable string, schemes ...Scheme[T]) *Registry[T] {
	r := &Registry[T]{variable: variable, schemes: map[string]Scheme[T]{}}
	for _, s := range schemes {
		r.register(s)
	}
	return r
}

func (r *Registry[T]) register(s Scheme[T]) {
	if s.Name == "" || s.Check == nil || s.Open == nil {
		panic(fmt.Sprintf("urlopen: %s: incomplete scheme %q", r.variable, s.Name))
	}
	if _, dup := r.schemes[s.Name]; dup {
		panic(fmt.Sprintf("urlopen: %s: scheme %q registered twice", r.variable, s.Name))
	}
	r.schemes[s.Name] = s
}

// With returns a copy of r with more schemes (r is not changed).
func (r *Registry[T]) With(schemes ...Scheme[T]) *Registry[T] {
	c := &Registry[T]{variable: r.variable, schemes: maps.Clone(r.schemes)}
	for _, s := range schemes {
		c.register(s)
	}
	return c
}

// Names lists the registered schemes in order.
func (r *Registry[T]) Names() []string { return slices.Sorted(maps.Keys(r.schemes)) }

// forms lists how each registered scheme is written.
func (r *Registry[T]) forms() string {
	var f []string
	for _, n := range r.Names() {
		f = append(f, r.schemes[n].Form)
	}
	return strings.Join(f, ", ")
}

// lookup splits value into its scheme and the rest and finds the scheme.
func (r *Registry[T]) lookup(value string) (Scheme[T], string, error) {
	if value == "" {
		return Scheme[T]{}, "", fmt.Errorf("%s: required (%s)", r.variable, r.forms())
	}
	name, rest, hasRest := strings.Cut(value, ":")
	if !validSchemeName(name) {
		return Scheme[T]{}, "", fmt.Errorf("%s: %q has no scheme (want %s)", r.variable, value, r.forms())
	}
	s, ok := r.schemes[name]
	if !ok {
		return Scheme[T]{}, "", fmt.Errorf("%s: scheme %q is not available in this binary (available: %s)",
			r.variable, name, strings.Join(r.Names(), ", "))
	}
	if hasRest && !strings.Contains(s.Form, ":") {
		return Scheme[T]{}, "", fmt.Errorf("%s: %q: %s takes nothing after it", r.variable, value, name)
	}
	return s, rest, nil
}

// validSchemeName is RFC 3986's scheme syntax, lowercase only: STDOUT is a
// typo, not another scheme.
func validSchemeName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Check validates value without opening it. The error is one line that
// starts with the variable's name.
func (r *Registry[T]) Check(value string, env Env) error {
	_, _, err := r.checked(value, env)
	return err
}

// checked finds value's scheme and runs its check; rest follows "scheme:".
func (r *Registry[T]) checked(value string, env Env) (Scheme[T], string, error) {
	s, rest, err := r.lookup(value)
	if err != nil {
		return s, "", err
	}
	if err := s.Check(rest, env); err != nil {
		return s, "", r.wrap(err, "%q is not %s", value, s.Form)
	}
	return s, rest, nil
}

// Open validates and opens value. close is never nil when err is nil.
func (r *Registry[T]) Open(ctx context.Context, value string, env Env) (T, func() error, error) {
	var zero T
	s, rest, err := r.checked(value, env)
	if err != nil {
		return zero, nil, err
	}
	v, closeFn, err := s.Open(ctx, rest, env)
	if err != nil {
		return zero, nil, r.wrap(err, "open %s", value)
	}
	return v, closeFn, nil
}

// wrap names the setting, unless the scheme's error names another variable
// (GOOGLE_CLOUD_PROJECT): that one is what to fix.
func (r *Registry[T]) wrap(err error, format string, a ...any) error {
	if ve := (*VarError)(nil); errors.As(err, &ve) {
		return err
	}
	return fmt.Errorf("%s: %s: %w", r.variable, fmt.Sprintf(format, a...), err)
}

// VarError is a scheme's error about another variable than the setting
// being opened (e.g. GOOGLE_CLOUD_PROJECT for firestore).
type VarError struct {
	Var string
	Err error
}

func (e *VarError) Error() string { return e.Var + ": " + e.Err.Error() }
func (e *VarError) Unwrap() error { return e.Err }

// Openers is what one binary can open for each setting.
type Openers struct {
	Stores  *Registry[ledger.Ledger]
	Results *Registry[sink.Sink]
}

// Cloud is the container's set (cmd/server, functions/): Firestore for the
// ledger; Pub/Sub, a file or stdout for results. extraStores adds ledger
// schemes a binary can open besides (cmd/lrosink: sqlite).
func Cloud(extraStores ...Scheme[ledger.Ledger]) Openers {
	return Openers{
		Stores:  NewRegistry(StoreVar, Firestore()).With(extraStores...),
		Results: NewRegistry(ResultsVar, PubSub(), File(), Stdout()),
	}
}

// Check validates both settings; the error holds one line per bad one.
func (o Openers) Check(store, results string, env Env) error {
	if o.Stores == nil || o.Results == nil {
		return errors.New("urlopen: no openers given (a programming error)")
	}
	return errors.Join(o.Stores.Check(store, env), o.Results.Check(results, env))
}
