package webhooks

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"time"

	secretmanager "cloud.google.com/go/secretmanager/apiv1"
	"cloud.google.com/go/secretmanager/apiv1/secretmanagerpb"
	"github.com/googleapis/gax-go/v2"
	"github.com/lrosink/lrosink/internal/cli/command"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// SecretWriter stores a payload as a new version of a Secret Manager secret.
type SecretWriter interface {
	// AddVersion adds payload as a new version of secret
	// ("projects/P/secrets/S") and returns the version's resource name
	// ("projects/P/secrets/S/versions/N").
	AddVersion(ctx context.Context, secret string, payload []byte) (version string, err error)
}

// SecretReader is what a SecretWriter may also do: read the latest
// version, so a rotation can keep the current secrets next to the new one
// for the 24 h overlap. ok is false when the secret has no version yet.
type SecretReader interface {
	Latest(ctx context.Context, secret string) (payload []byte, ok bool, err error)
}

// versionAdder is the Secret Manager calls SecretManagerWriter makes; an
// interface so the requests it builds can be checked without Google Cloud.
type versionAdder interface {
	AddSecretVersion(ctx context.Context, req *secretmanagerpb.AddSecretVersionRequest, opts ...gax.CallOption) (*secretmanagerpb.SecretVersion, error)
	AccessSecretVersion(ctx context.Context, req *secretmanagerpb.AccessSecretVersionRequest, opts ...gax.CallOption) (*secretmanagerpb.AccessSecretVersionResponse, error)
}

// SecretManagerWriter is the production SecretWriter.
type SecretManagerWriter struct {
	client versionAdder
	close  func() error
}

// NewSecretManagerWriter connects to Secret Manager with Application Default
// Credentials. Close it when done.
func NewSecretManagerWriter(ctx context.Context) (*SecretManagerWriter, error) {
	c, err := secretmanager.NewClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("secret manager: connect: %w", err)
	}
	return &SecretManagerWriter{client: c, close: c.Close}, nil
}

// AddVersion implements SecretWriter. The payload carries its CRC32C so
// Secret Manager rejects a version corrupted on the way instead of storing
// a secret that would fail every signature check.
func (w *SecretManagerWriter) AddVersion(ctx context.Context, secret string, payload []byte) (string, error) {
	crc := int64(crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli)))
	v, err := w.client.AddSecretVersion(ctx, &secretmanagerpb.AddSecretVersionRequest{
		Parent:  secret,
		Payload: &secretmanagerpb.SecretPayload{Data: payload, DataCrc32C: &crc},
	})
	if err != nil {
		return "", fmt.Errorf("secret manager: add a version to %s: %w", secret, err)
	}
	return v.GetName(), nil
}

// Latest implements SecretReader.
func (w *SecretManagerWriter) Latest(ctx context.Context, secret string) ([]byte, bool, error) {
	resp, err := w.client.AccessSecretVersion(ctx, &secretmanagerpb.AccessSecretVersionRequest{Name: secret + "/versions/latest"})
	if status.Code(err) == codes.NotFound || status.Code(err) == codes.FailedPrecondition {
		return nil, false, nil // no (enabled) version yet
	}
	if err != nil {
		return nil, false, fmt.Errorf("secret manager: read the latest version of %s: %w", secret, err)
	}
	return resp.GetPayload().GetData(), true, nil
}

// withCurrent returns the LROSINK_WEBHOOK_SECRETS value that holds the new
// secret first and then the ones current holds (deduplicated), so both are
// accepted while Gemini may still sign with the old one.
func withCurrent(newSecret string, current []byte) string {
	out := []string{newSecret}
	for _, s := range strings.Split(string(current), ",") {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, ",")
}

// Close releases the client.
func (w *SecretManagerWriter) Close() error {
	if w.close == nil {
		return nil
	}
	return w.close()
}

// validSecretName reports whether name is a secret's resource name,
// projects/P/secrets/S, without a version: the version is what AddVersion
// creates.
func validSecretName(name string) bool {
	parts := strings.Split(name, "/")
	return len(parts) == 4 && parts[0] == "projects" && parts[2] == "secrets" &&
		parts[1] != "" && parts[3] != "" && !strings.ContainsAny(name, " :?#")
}

// secretTarget is where a new signing secret goes: a Secret Manager secret,
// or stdout when name is "".
type secretTarget struct {
	name   string
	writer SecretWriter
}

// secretTarget validates --secret and builds the writer before anything
// is asked of Gemini: a secret must not be issued that then cannot be
// stored because, say, there are no Google Cloud credentials. The returned
// func releases the writer.
func (r *runner) secretTarget(ctx context.Context, name string) (secretTarget, func(), error) {
	noop := func() {}
	if name == "" {
		return secretTarget{}, noop, nil
	}
	if !validSecretName(name) {
		return secretTarget{}, noop, command.Usagef("--secret %q: want projects/PROJECT/secrets/SECRET (no /versions/: a new version is added)", name)
	}
	if r.deps.SecretWriter != nil {
		return secretTarget{name: name, writer: r.deps.SecretWriter}, noop, nil
	}
	w, err := NewSecretManagerWriter(ctx)
	if err != nil {
		return secretTarget{}, noop, fmt.Errorf("%w (nothing was changed in Gemini; drop --secret to print the secret instead)", err)
	}
	return secretTarget{name: name, writer: w}, func() { _ = w.Close() }, nil
}

// secretWriteTimeout bounds the Secret Manager write.
const secretWriteTimeout = 30 * time.Second

// errSecretNotStored marks the failure after which the secret went to
// stdout instead of Secret Manager.
var errSecretNotStored = errors.New("the signing secret was NOT stored in Secret Manager")

// deliverSecret hands a secret Gemini has just issued (and will never show
// again) to its target. It never loses the secret silently: if Secret
// Manager fails, the secret goes to stdout and the error says so.
//
// With keepCurrent (a rotation with an overlap), a writer that can read the
// latest version stores the new secret followed by the current ones.
func (r *runner) deliverSecret(ctx context.Context, t secretTarget, webhookID, secret string, keepCurrent bool) (kept int, err error) {
	r.addSensitive(secret)
	if t.writer == nil {
		r.warnf("WARNING: the signing secret below is shown only this once; Gemini never shows it again.\n" +
			"Store it now (e.g. pipe it to 'gcloud secrets versions add SECRET --data-file=-'); if it is lost, rotate it.")
		return 0, r.printSecret(webhookID, secret)
	}
	// Gemini already signs with this secret: an interrupt (^C) must not
	// cancel the one write that keeps it, so the write gets its own deadline.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), secretWriteTimeout)
	defer cancel()
	payload := secret
	if reader, ok := t.writer.(SecretReader); ok && keepCurrent {
		current, found, rerr := reader.Latest(wctx, t.name)
		switch {
		case rerr != nil:
			r.warnf("could not read the current secrets of %s (%v): the new version holds only the new secret", t.name, rerr)
		case found:
			for _, s := range strings.Split(string(current), ",") {
				r.addSensitive(strings.TrimSpace(s))
			}
			payload = withCurrent(secret, current)
			kept = strings.Count(payload, ",")
		}
	}
	version, err := t.writer.AddVersion(wctx, t.name, []byte(payload))
	if err != nil {
		r.warnf("ERROR: writing the signing secret to Secret Manager (%s) failed: %v", t.name, err)
		r.warnf("The secret is printed on stdout instead, this one time only: store it by hand now, e.g. run\n"+
			"  gcloud secrets versions add %s --data-file=- --project %s\n"+
			"paste the value after %s=, then press Ctrl-D.", secretID(t.name), projectID(t.name), envSecrets)
		if perr := r.printSecret(webhookID, secret); perr != nil {
			return 0, perr
		}
		return 0, fmt.Errorf("%w: store the secret printed on stdout by hand", errSecretNotStored)
	}
	if version == "" {
		version = t.name + " (version name not returned)"
	}
	fmt.Fprintf(r.stdout, "Signing secret %s stored as %s\n", truncate(secret), version)
	r.warnf("Note: Cloud Run reads version \"latest\" of %s when a revision starts: deploy a new revision of the webhook service to use it.", t.name)
	return kept, nil
}

// printSecret is the one deliberate output of a full secret, in
// LROSINK_WEBHOOK_SECRETS syntax.
func (r *runner) printSecret(webhookID, secret string) error {
	if _, err := fmt.Fprintf(r.stdout, "%s=%s\n", envSecrets, secret); err != nil {
		return fmt.Errorf("write the signing secret to stdout: %w; it is lost: run 'lrosink webhooks rotate %s' for a new one", err, webhookID)
	}
	return nil
}

// secretID and projectID are the S and P of projects/P/secrets/S, what
// gcloud takes. name has passed validSecretName.
func secretID(name string) string  { return strings.Split(name, "/")[3] }
func projectID(name string) string { return strings.Split(name, "/")[1] }

// truncatedTail is how many characters of a secret the API shows.
const truncatedTail = 4

// truncate shows a secret the way the API's truncated_secret does,
// "whsec_...abcd", enough to tell secrets apart and never enough to use.
func truncate(secret string) string {
	tail := strings.TrimPrefix(secret, "whsec_")
	if len(tail) <= truncatedTail*2 {
		// Too short to show any of it safely.
		return "whsec_..."
	}
	return "whsec_..." + tail[len(tail)-truncatedTail:]
}

// displayTruncated passes an API truncated_secret through, unless it does
// not look truncated: an API change or bug must not put a whole secret
// into a table.
func displayTruncated(s string) string {
	if strings.HasPrefix(s, "whsec_...") && len(s) <= len("whsec_...")+truncatedTail*2 {
		return s
	}
	return truncate(s)
}
