// Package sqliteurl is the `sqlite:PATH` ledger scheme. It is a package of
// its own so that only binaries that register it (cmd/lrosink) link SQLite;
// the container (cmd/server) does not, and refuses sqlite: at start-up.
package sqliteurl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/urlopen"
)

// ErrBadPath: the path cannot hold a database file (a directory, or in a
// directory that does not exist): a configuration error. Match it with
// errors.Is; the message is badPath's, in the user's words.
var ErrBadPath = errors.New("not a database file path")

type badPath struct{ msg string }

func (e *badPath) Error() string        { return e.msg }
func (e *badPath) Is(target error) bool { return target == ErrBadPath }

// checkPath says, in the user's words and naming the path, why path cannot
// be a database file, before SQLite says "unable to open database file (14)".
func checkPath(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return &badPath{fmt.Sprintf("%s is a directory, not a database file (e.g. sqlite:%s)", path, filepath.Join(path, "lrosink.db"))}
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return &badPath{fmt.Sprintf("directory %s does not exist (create it, or choose another path)", dir)}
	} else if err == nil && !st.IsDir() {
		return &badPath{fmt.Sprintf("%s is not a directory", dir)}
	}
	return nil
}

// ErrNoLedger: mustExist and there is no database at the path (match with
// errors.Is): a configuration error; the message names the path and what
// to do.
var ErrNoLedger = errors.New("no ledger at the path")

// NoLedgerError is ErrNoLedger with the path (absolute) in its message.
type NoLedgerError struct{ Path string }

func (e *NoLedgerError) Error() string {
	return fmt.Sprintf("no ledger at %s: start `lrosink serve` there or set LROSINK_STORE", e.Path)
}
func (e *NoLedgerError) Is(target error) bool { return target == ErrNoLedger }

// Scheme opens sqlite:PATH. With mustExist it refuses to create a new
// database: a command other than serve pointed at a mistyped path (or run
// in the wrong directory) must fail, not create a ledger no serve sees or
// report an empty one.
func Scheme(mustExist bool) urlopen.Scheme[ledger.Ledger] {
	return urlopen.Scheme[ledger.Ledger]{
		Name: "sqlite",
		Form: "sqlite:PATH",
		Check: func(path string, _ urlopen.Env) error {
			if path == "" {
				return errors.New("empty path")
			}
			return nil
		},
		Open: func(ctx context.Context, path string, _ urlopen.Env) (ledger.Ledger, func() error, error) {
			if err := checkPath(path); err != nil {
				return nil, nil, err
			}
			if mustExist {
				if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
					shown := path
					if abs, err := filepath.Abs(path); err == nil {
						shown = abs
					}
					return nil, nil, &NoLedgerError{Path: shown}
				}
			}
			s, err := sqliteledger.Open(ctx, path)
			if err != nil {
				return nil, nil, err
			}
			return s, s.Close, nil
		},
	}
}
