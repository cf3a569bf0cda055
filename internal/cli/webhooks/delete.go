package webhooks

import (
	"context"
	"fmt"

	"github.com/lrosink/lrosink/internal/cli/command"
	"google.golang.org/genai/interactions/models/operations"
)

func deleteDoc() command.Doc {
	return command.Doc{
		Path: "webhooks delete",
		Arg:  "webhook ID",
		Env:  envDoc,
		Args: "ID",
		Summary: `Delete webhook ID at Gemini: it stops sending events to its URI. lrosink still
settles every registered operation through its reconcile passes, later (after
LROSINK_GRACE, then with backoff). Its signing secrets die with it; remove them
from LROSINK_WEBHOOK_SECRETS once no delivery signed with them can still arrive.`,
		Examples: []string{
			"lrosink webhooks delete wh_123",
		},
	}
}

func runDelete(ctx context.Context, r *runner, args []string) error {
	id, err := r.parseID(deleteDoc(), command.NewFlagSet("delete"), args)
	if err != nil {
		return err
	}
	wh, err := r.webhooksClient(ctx)
	if err != nil {
		return err
	}
	if _, err := wh.Delete(ctx, operations.DeleteWebhookRequest{ID: id}); err != nil {
		return webhookError(id, describe(err))
	}
	fmt.Fprintf(r.stdout, "Deleted webhook %s: Gemini no longer sends events to it\n", id)
	return nil
}
