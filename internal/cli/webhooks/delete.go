package webhooks

import (
	"context"
	"fmt"
	"net/http"

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
	fs := command.NewFlagSet("delete")
	pos, err := deleteDoc().Parse(r.stdout, fs, args)
	if err != nil {
		return err
	}
	id, err := webhookID(pos[0])
	if err != nil {
		return err
	}
	wh, err := r.webhooksClient(ctx)
	if err != nil {
		return err
	}
	if _, err := wh.Delete(ctx, operations.DeleteWebhookRequest{ID: id}); err != nil {
		err = describe(err)
		if statusOf(err) == http.StatusNotFound {
			// Also the answer to a retry whose first attempt deleted it.
			return fmt.Errorf("webhook %s: no such webhook (see 'lrosink webhooks list'): %w", id, err)
		}
		return fmt.Errorf("webhook %s: %w", id, err)
	}
	fmt.Fprintf(r.stdout, "Deleted webhook %s: Gemini no longer sends events to it\n", id)
	return nil
}
