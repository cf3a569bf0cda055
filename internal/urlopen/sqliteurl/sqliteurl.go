// Package sqliteurl is the `sqlite:PATH` ledger scheme. It is a package of
// its own so that only binaries that register it (cmd/lrosink) link SQLite;
// the container (cmd/server) does not, and refuses sqlite: at start-up.
package sqliteurl

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/sqlite"
	"github.com/lrosink/lrosink/internal/urlopen"
)

// Scheme opens sqlite:PATH. With mustExist it refuses to create a new
// database: a read command pointed at a mistyped path (or run in the wrong
// directory) should fail, not report an empty ledger.
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
			if mustExist {
				if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
					return nil, nil, fmt.Errorf("no database at %s (run lrosink serve or lrosink register first, or set --store)", path)
				}
			}
			s, err := sqlite.Open(ctx, path)
			if err != nil {
				return nil, nil, err
			}
			return s, s.Close, nil
		},
	}
}
