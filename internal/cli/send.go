package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/webhook"
	"github.com/lrosink/lrosink/internal/webhook/webhooktest"
)

// defaultSendURL is the Webhook function of a local `lrosink serve`.
const defaultSendURL = "http://" + defaultAddr + "/Webhook"

// maxAnswer bounds how much of an answer send prints.
const maxAnswer = 64 << 10

func sendDoc() command.Doc {
	return command.Doc{
		Path:        "send",
		Args:        "EVENT_TYPE --id ID [--url URL] [--secret S] [--ed25519-key FILE] [--data k=v ...] [--any-type] [--json] | --list",
		Arg:         "EVENT_TYPE",
		ArgOptional: true,
		Summary: `Sign and send one Standard Webhooks delivery, as Gemini would, and print the HTTP status
and the answer. The body is {"type":EVENT_TYPE,"version":"v1","timestamp":now,
"data":{"id":ID, k:v ...}} (the --data values are strings); each run uses a new webhook-id.
Exit status 0 on a 2xx answer, 1 otherwise.

EVENT_TYPE is one of the types Gemini sends (--list prints them: batch.succeeded,
video.generated, interaction.completed, ...); another is refused (exit 2, with the
closest type) unless --any-type says it is meant (serve answers an unknown type
200 ignored/unknown-event-type). ID is the operation's id or name as Gemini sends it
(batch_123, batches/batch_123). --json prints {"http_status":N,"answer":{...}} as
one line instead.

--ed25519-key signs a v1a (Ed25519) entry instead, as live dynamic webhooks are
signed; with --secret too, the header carries both entries. The receiving serve
needs the public key: LROSINK_WEBHOOK_PUBLIC_KEYS=whpk_… or a JWKS file in
LROSINK_JWKS_URL=file:///path/jwks.json. A key pair with openssl:
  openssl genpkey -algorithm ed25519 -out dev.pem
  echo "whsk_$(openssl pkey -in dev.pem -outform DER | tail -c 32 | base64)" > dev.whsk
  echo "whpk_$(openssl pkey -in dev.pem -pubout -outform DER | tail -c 32 | base64)"
A v1a delivery is a hint: serve confirms a terminal state with Gemini, and answers
200 unconfirmed/no-gemini-api-key without GEMINI_API_KEY (verified, not applied).`,
		Env: `  LROSINK_WEBHOOK_SECRETS  the first secret signs, when --secret is not given (serve prints
                           its generated dev secret on start-up when none is configured)`,
		Examples: []string{
			"lrosink send --list",
			"lrosink send batch.succeeded --id batch_123",
			"lrosink send batch.succeeded --id batch_123 --json | jq -r .answer.outcome",
			"lrosink send batch.succeeded --id batch_123 --data output_file_uri=gs://bucket/results.jsonl",
			"lrosink send video.generated --id models/veo-3.0-generate-001/operations/xyz --url http://127.0.0.1:9000/Webhook",
			"lrosink send interaction.completed --id v1_abc --ed25519-key dev.whsk",
		},
	}
}

func runSend(ctx context.Context, e *env, args []string) error {
	fs := command.NewFlagSet("send")
	id := fs.String("id", "", "the operation `ID` (data.id)")
	target := fs.String("url", defaultSendURL, "send to `URL`")
	secretFlag := fs.String("secret", "", "sign with `whsec_…` (default: the first of LROSINK_WEBHOOK_SECRETS, which keeps it out of the process list)")
	edKeyFile := fs.String("ed25519-key", "", "sign a v1a entry with the whsk_… Ed25519 secret key in `FILE` (then no whsec_ secret is needed)")
	data := metaValue{}
	fs.Var(data, "data", "an extra data field `k=v`; repeatable")
	anyType := fs.Bool("any-type", false, "send EVENT_TYPE although Gemini sends no such type (to see how serve answers one)")
	list := fs.Bool("list", false, "print the event types Gemini sends, one a line, and exit")
	asJSON := fs.Bool("json", false, `print {"http_status":N,"answer":...} as one JSON line instead of the answer`)
	pos, err := sendDoc().Parse(e.stdout, fs, args)
	if err != nil {
		return err
	}
	if *list {
		if len(pos) > 0 {
			return command.Usagef("--list takes no EVENT_TYPE")
		}
		for _, t := range webhook.EventTypes() {
			fmt.Fprintln(e.stdout, t)
		}
		return nil
	}
	if len(pos) == 0 {
		return command.Usagef("want exactly one EVENT_TYPE, got 0 arguments (lrosink send --list prints them)")
	}
	if err := checkEventType(pos[0], *anyType, "EVENT_TYPE"); err != nil {
		return err
	}
	if strings.TrimSpace(*id) == "" {
		return command.Usagef("--id is required")
	}
	if _, ok := data["id"]; ok {
		return command.Usagef("--data id=…: the id is --id")
	}
	u, err := url.Parse(*target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return command.Usagef("--url %q: want an absolute http(s) URL", *target)
	}
	var edKey *webhooktest.Ed25519Key
	if *edKeyFile != "" {
		if edKey, err = readEd25519Key(*edKeyFile); err != nil {
			return err
		}
	}
	secret := ""
	if edKey == nil || *secretFlag != "" {
		if secret, err = signingSecret(*secretFlag, e); err != nil {
			return err
		}
	}
	now := e.now() // one instant for the body and the signature
	body, err := deliveryBody(pos[0], *id, data, now)
	if err != nil {
		return err
	}
	return e.deliver(ctx, u, body, signers{secret: secret, ed: edKey}, now, *asJSON)
}

// checkEventType refuses an event type Gemini does not send (the one list,
// webhook.EventTypes), unless anyType: exit 2, with the closest known type
// and the list. what names the argument or flag ("EVENT_TYPE", "--event").
func checkEventType(t string, anyType bool, what string) error {
	known := webhook.EventTypes()
	if anyType || slices.Contains(known, t) {
		return nil
	}
	hint := ""
	if s := command.Suggest(t, known); s != "" {
		hint = fmt.Sprintf("; did you mean %s?", s)
	}
	return command.Usagef("%s %q is not an event type Gemini sends%s\nGemini sends: %s\n(--any-type sends it anyway: serve answers 200 ignored/unknown-event-type)",
		what, t, hint, strings.Join(known, ", "))
}

// readEd25519Key reads a whsk_ secret key from path. Errors say what is
// wrong, never the file's content.
func readEd25519Key(path string) (*webhooktest.Ed25519Key, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, command.Usagef("--ed25519-key: %v", err)
	}
	k, err := webhooktest.ParseSecretKey(string(raw))
	if err != nil {
		return nil, command.Usagef("--ed25519-key %s: the key %v", path, err)
	}
	return k, nil
}

// signers are what send signs a delivery with: a whsec_ secret (v1), an
// Ed25519 key (v1a), or both.
type signers struct {
	secret string
	ed     *webhooktest.Ed25519Key
}

func (s signers) headers(id string, now time.Time, body []byte) http.Header {
	var secrets []string
	if s.secret != "" {
		secrets = append(secrets, s.secret)
	}
	h := webhooktest.Headers(id, now, body, secrets...)
	if s.ed != nil {
		h.Set("webhook-signature", strings.TrimSpace(h.Get("webhook-signature")+" "+s.ed.Signature(id, now, body)))
	}
	return h
}

// signingSecret is --secret, else the first of LROSINK_WEBHOOK_SECRETS,
// checked as the receiver checks it.
func signingSecret(flagValue string, e *env) (string, error) {
	secret, from := flagValue, "--secret"
	if secret == "" {
		from = "the first of LROSINK_WEBHOOK_SECRETS"
		first, _, _ := strings.Cut(e.getenv("LROSINK_WEBHOOK_SECRETS"), ",")
		secret = strings.TrimSpace(first)
	}
	if secret == "" {
		return "", command.Usagef("no signing secret: set LROSINK_WEBHOOK_SECRETS or --secret (serve prints its dev secret on start-up)")
	}
	// The receiver's own check; where the secret came from is said, never
	// the value.
	if err := webhook.CheckSecret(secret); err != nil {
		return "", command.Usagef("%s is not a valid whsec_ signing secret", from)
	}
	return secret, nil
}

// deliveryBody is the event as Gemini sends it: data holds id and the
// --data fields.
func deliveryBody(eventType, id string, data metaValue, now time.Time) ([]byte, error) {
	fields := map[string]any{}
	for k, v := range data {
		fields[k] = v
	}
	fields["id"] = strings.TrimSpace(id)
	body, err := json.Marshal(map[string]any{"type": eventType, "version": "v1",
		"timestamp": now.UTC().Format(time.RFC3339), "data": fields})
	if err != nil {
		return nil, fmt.Errorf("encode the delivery: %w", err)
	}
	return body, nil
}

// deliver signs body at now, POSTs it to u and prints the answer; a non-2xx
// answer is exit status 1 (the answer says why).
func (e *env) deliver(ctx context.Context, u *url.URL, body []byte, sign signers, now time.Time, asJSON bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build the request: %w", err)
	}
	req.Header = sign.headers("msg_"+randomHex(12), now, body)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("nothing listens at %s (is lrosink serve running? --url picks another address)", u.Redacted())
		}
		return fmt.Errorf("send to %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	if asJSON {
		if err := writeLine(e.stdout, sendAnswer(resp.StatusCode, answer)); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "HTTP %s\n%s", resp.Status, answer)
		if len(answer) > 0 && answer[len(answer)-1] != '\n' {
			fmt.Fprintln(e.stdout)
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return command.ExitStatus(command.ExitError)
	}
	return nil
}

// sendAnswer is send --json's line: the status and the answer, as JSON when
// it is JSON (serve's always is), else as a string.
func sendAnswer(status int, answer []byte) map[string]any {
	out := map[string]any{"http_status": status}
	if trimmed := bytes.TrimSpace(answer); json.Valid(trimmed) && len(trimmed) > 0 {
		out["answer"] = json.RawMessage(trimmed)
	} else {
		out["answer"] = string(answer)
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand never returns an error
	return hex.EncodeToString(b)
}
