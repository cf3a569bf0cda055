package webhooks

import (
	"context"
	"fmt"

	"github.com/lrosink/lrosink/internal/cli/command"
	"google.golang.org/genai/interactions/models/operations"
	"google.golang.org/genai/interactions/models/webhooks"
)

func rotateDoc() command.Doc {
	return command.Doc{
		Path: "webhooks rotate",
		Arg:  "webhook ID",
		Env:  envDoc,
		Args: "ID [--revoke-now] [--secret projects/P/secrets/S]",
		Summary: `Issue a new signing secret for webhook ID. By default Gemini keeps accepting
the previous secrets for 24 hours (revoke_previous_secrets_after_h24); with
--revoke-now they stop at once (revoke_previous_secrets_immediately).

The new secret, shown only this once, goes to Secret Manager as a new version
of --secret — holding the new secret followed by the secrets of the current
version, so lrosink accepts both during the overlap (only the new one with
--revoke-now) — or is printed once on stdout as LROSINK_WEBHOOK_SECRETS=whsec_...

Without --secret, give lrosink both secrets during the 24 h overlap,
comma-separated, new first (LROSINK_WEBHOOK_SECRETS=whsec_NEW,whsec_OLD): it
accepts a delivery signed with any of them. Lost the secret? Rotate again.`,
		Examples: []string{
			"lrosink webhooks rotate wh_123 --secret projects/my-proj/secrets/lrosink-webhook-secrets",
			"lrosink webhooks rotate wh_123",
			"lrosink webhooks rotate wh_123 --revoke-now   # after a leak",
		},
	}
}

func runRotate(ctx context.Context, r *runner, args []string) error {
	fs := command.NewFlagSet("rotate")
	revokeNow := fs.Bool("revoke-now", false, "revoke the previous secrets immediately instead of after 24 h (deliveries signed with them fail at once)")
	secret := fs.String("secret", "", "store the new secret as a new version of this Secret Manager `SECRET` (projects/P/secrets/S) instead of printing it")
	id, err := r.parseID(rotateDoc(), fs, args)
	if err != nil {
		return err
	}
	wh, err := r.webhooksClient(ctx)
	if err != nil {
		return err
	}
	target, release, err := r.secretTarget(ctx, *secret)
	if err != nil {
		return err
	}
	defer release()

	behavior := webhooks.RevocationBehaviorRevokePreviousSecretsAfterH24
	if *revokeNow {
		behavior = webhooks.RevocationBehaviorRevokePreviousSecretsImmediately
	}
	resp, err := wh.RotateSigningSecret(ctx, operations.RotateSigningSecretRequest{
		ID:   id,
		Body: webhooks.RotateSigningSecretRequest{RevocationBehavior: &behavior},
	}, noRetries())
	if err != nil {
		if err = describe(err); maybeApplied(err) {
			return fmt.Errorf("webhook %s: %w\nThe secret may have been rotated anyway, and the new one was never shown: "+
				"rotate again (the 24 h overlap keeps the current secret valid meanwhile)", id, err)
		}
		return webhookError(id, err)
	}
	newSecret := deref(resp.GetWebhookRotateSigningSecretResponse().GetSecret())
	if newSecret == "" {
		return fmt.Errorf("webhook %s: the answer has no secret; rotate again", id)
	}
	if *revokeNow {
		fmt.Fprintf(r.stdout, "Rotated the signing secret of webhook %s; the previous secrets are revoked now\n", id)
	} else {
		fmt.Fprintf(r.stdout, "Rotated the signing secret of webhook %s; the previous secrets stay valid for 24 h\n", id)
	}
	kept, err := r.deliverSecret(ctx, target, id, newSecret, !*revokeNow)
	if err != nil {
		return err
	}
	r.rotationReminder(target, *revokeNow, kept)
	return nil
}

// rotationReminder tells the operator what lrosink needs next. Secrets are
// never in it, only where they are.
func (r *runner) rotationReminder(t secretTarget, revokedNow bool, kept int) {
	if revokedNow {
		r.warnf("Reminder: Gemini now signs only with the new secret. Deliveries fail signature checks until " +
			envSecrets + " holds it; they are retried for 24 h and the reconcile pass covers the gap.")
		return
	}
	msg := "Reminder: during the 24 h overlap set " + envSecrets + " to both secrets, comma-separated, new first " +
		"(" + envSecrets + "=whsec_NEW,whsec_OLD): lrosink accepts a delivery signed with any of them. " +
		"After 24 h the old one can be dropped."
	switch {
	case t.writer != nil && kept > 0:
		msg = fmt.Sprintf("The new Secret Manager version holds the new secret followed by the %d current one(s), "+
			"so lrosink accepts both during the 24 h overlap. After 24 h, add a version holding only the first.", kept)
	case t.writer != nil:
		msg += "\nThe new Secret Manager version holds only the new secret. To keep both during the overlap, " +
			"add a version holding NEW,OLD (the old value is in the previous version)."
	}
	r.warnf("%s", msg)
}

func pingDoc() command.Doc {
	return command.Doc{
		Path: "webhooks ping",
		Arg:  "webhook ID",
		Env:  envDoc,
		Args: "ID",
		Summary: `Ask Gemini to send a test event to webhook ID, to check delivery and signing
end to end. lrosink answers 2xx to a correctly signed test event; check its
logs (or the 401 metric) to see the result.`,
		Examples: []string{
			"lrosink webhooks ping wh_123",
		},
	}
}

func runPing(ctx context.Context, r *runner, args []string) error {
	id, err := r.parseID(pingDoc(), command.NewFlagSet("ping"), args)
	if err != nil {
		return err
	}
	wh, err := r.webhooksClient(ctx)
	if err != nil {
		return err
	}
	// An explicit empty body: {} is what the API is known to accept (GEMINI.md §3).
	if _, err := wh.Ping(ctx, operations.PingWebhookRequest{ID: id, Body: &webhooks.PingWebhookRequest{}}); err != nil {
		return webhookError(id, describe(err))
	}
	fmt.Fprintf(r.stdout, "Ping sent to webhook %s: Gemini delivers a test event to its URI\n", id)
	return nil
}
