package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// devSecret is the webhook secret serve signs with when none is configured.
// It is kept beside a file ledger (sqlite:PATH → PATH.secret, mode 0600) so
// that the LROSINK_WEBHOOK_SECRETS a developer exported keeps working after
// a restart. A ledger that is not a file (firestore) gets one for the run
// only: a shared, deployed ledger should have a configured secret, and a
// secret file in the working directory would outlive its meaning.
type devSecret struct {
	secret string
	path   string // "" when the secret lasts this run only
	fresh  bool   // generated now; save writes it to path
}

// loadDevSecret reads the kept dev secret of store, or generates one.
func loadDevSecret(store string) (devSecret, error) {
	ledgerPath, ok := strings.CutPrefix(store, "sqlite:")
	if !ok {
		return devSecret{secret: webhooktest.NewSecret(), fresh: true}, nil
	}
	path := ledgerPath + ".secret"
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return devSecret{secret: webhooktest.NewSecret(), path: path, fresh: true}, nil
	case err != nil:
		return devSecret{}, &command.ConfigError{Err: fmt.Errorf("dev webhook secret %s: %w", path, err)}
	}
	s := strings.TrimSpace(string(b))
	if err := webhook.CheckSecret(s); err != nil {
		// The problem, never the value.
		return devSecret{}, &command.ConfigError{Err: fmt.Errorf("dev webhook secret %s: %v (delete the file and serve makes a new one)", path, err)}
	}
	return devSecret{secret: s, path: path}, nil
}

// save writes a fresh secret to its file, readable by its owner only, and
// never over a file that appeared meanwhile. Called once the ledger opened,
// so a bad store path leaves no stray secret file.
func (d devSecret) save() error {
	if !d.fresh || d.path == "" {
		return nil
	}
	f, err := os.OpenFile(d.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("dev webhook secret: %w", err)
	}
	_, err = f.WriteString(d.secret + "\n")
	return errors.Join(err, f.Close())
}

// notice is the start-up line that shows the secret to the person running
// serve: a plain line on stderr, never a log record (log pipelines keep
// records).
func (d devSecret) notice() string {
	switch {
	case d.path == "":
		return "lrosink: DEV webhook signing secret, generated for this run only (the ledger is not a file to keep it beside; set LROSINK_WEBHOOK_SECRETS for a lasting one): " + d.secret
	case d.fresh:
		return fmt.Sprintf("lrosink: DEV webhook signing secret, created in %s and kept for later runs (export LROSINK_WEBHOOK_SECRETS=$(cat %s); set it to a real one in production): %s", d.path, d.path, d.secret)
	default:
		return fmt.Sprintf("lrosink: DEV webhook signing secret, kept in %s since an earlier run (export LROSINK_WEBHOOK_SECRETS=$(cat %s)): %s", d.path, d.path, d.secret)
	}
}

// hint is the detail of a 401 no-matching-signature: the sender signed with
// something else, most likely a secret from before.
func (d devSecret) hint() string {
	if d.path == "" {
		return "this lrosink serve accepts only the dev secret it printed at start-up, generated for this run (LROSINK_WEBHOOK_SECRETS is not set)"
	}
	return fmt.Sprintf("this lrosink serve signs with its dev secret in %s (LROSINK_WEBHOOK_SECRETS is not set): export LROSINK_WEBHOOK_SECRETS=$(cat %s)", d.path, d.path)
}
