package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
	"google.golang.org/genai/interactions/models/operations"
	"google.golang.org/genai/interactions/models/webhooks"
)

// listPageSize is asked per page; the API allows up to 1000.
const listPageSize = 100

// maxListPages stops a server that keeps returning a next page token.
const maxListPages = 10000

func listDoc() command.Doc {
	return command.Doc{
		Path: "webhooks list",
		Env:  envDoc,
		Args: "[--json]",
		Summary: `List every webhook of this API key's project, all pages: ID, NAME, URI, STATE,
EVENTS and the signing secrets in the truncated form the API shows
(whsec_...abcd, with the expiry of a secret that is being rotated out).`,
		Examples: []string{
			"lrosink webhooks list",
			"lrosink webhooks list --json | jq -r '.[].id'",
		},
	}
}

// webhookView is what list shows. Its own type, not the SDK's, so that
// new_signing_secret can never be printed by accident.
type webhookView struct {
	ID               string       `json:"id"`
	Name             string       `json:"name,omitempty"`
	URI              string       `json:"uri"`
	State            string       `json:"state,omitempty"`
	SubscribedEvents []string     `json:"subscribed_events"`
	SigningSecrets   []secretView `json:"signing_secrets"`
	CreateTime       *time.Time   `json:"create_time,omitempty"`
	UpdateTime       *time.Time   `json:"update_time,omitempty"`
}

type secretView struct {
	TruncatedSecret string     `json:"truncated_secret"`
	ExpireTime      *time.Time `json:"expire_time,omitempty"`
}

func viewOf(w webhooks.Webhook) webhookView {
	v := webhookView{
		ID: deref(w.ID), Name: deref(w.Name), URI: w.URI, State: string(deref(w.State)),
		SubscribedEvents: []string{}, SigningSecrets: []secretView{},
		CreateTime: w.CreateTime, UpdateTime: w.UpdateTime,
	}
	for _, ev := range w.SubscribedEvents {
		v.SubscribedEvents = append(v.SubscribedEvents, string(ev))
	}
	for _, s := range w.SigningSecrets {
		v.SigningSecrets = append(v.SigningSecrets, secretView{
			TruncatedSecret: displayTruncated(deref(s.TruncatedSecret)), ExpireTime: s.ExpireTime,
		})
	}
	return v
}

func runList(ctx context.Context, r *runner, args []string) error {
	fs := command.NewFlagSet("list")
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	if _, err := listDoc().Parse(r.stdout, fs, args); err != nil {
		return err
	}
	wh, err := r.webhooksClient(ctx)
	if err != nil {
		return err
	}
	views, err := listAll(ctx, wh.List)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(r.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(views); err != nil {
			return fmt.Errorf("write JSON: %w", err)
		}
		return nil
	}
	return writeTable(r.stdout, views)
}

type listFunc func(context.Context, operations.ListWebhooksRequest, ...operations.Option) (*operations.ListWebhooksResponse, error)

// listAll pages through every webhook.
func listAll(ctx context.Context, list listFunc) ([]webhookView, error) {
	views := []webhookView{}
	seen := map[string]bool{}
	token := ""
	for page := 1; ; page++ {
		size := listPageSize
		req := operations.ListWebhooksRequest{PageSize: &size}
		if token != "" {
			req.PageToken = &token
		}
		resp, err := list(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("list webhooks (page %d): %w", page, describe(err))
		}
		body := resp.GetWebhookListResponse()
		for _, w := range body.GetWebhooks() {
			views = append(views, viewOf(w))
		}
		next := deref(body.GetNextPageToken())
		switch {
		case next == "":
			return views, nil
		case seen[next] || page >= maxListPages:
			return nil, fmt.Errorf("list webhooks: the API keeps returning more pages (token %q seen again or over %d pages)", next, maxListPages)
		}
		seen[next] = true
		token = next
	}
}

func writeTable(w io.Writer, views []webhookView) error {
	if len(views) == 0 { // a header alone reads like a failure
		if _, err := fmt.Fprintln(w, "no webhooks in this project (lrosink webhooks create adds one)"); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tURI\tSTATE\tEVENTS\tSECRETS")
	for _, v := range views {
		secrets := make([]string, 0, len(v.SigningSecrets))
		for _, s := range v.SigningSecrets {
			entry := s.TruncatedSecret
			if s.ExpireTime != nil && !s.ExpireTime.IsZero() {
				entry += " (until " + s.ExpireTime.UTC().Format("2006-01-02T15:04Z") + ")"
			}
			secrets = append(secrets, entry)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n",
			orDash(v.ID), orDash(v.Name), orDash(v.URI), orDash(v.State),
			orDash(strings.Join(v.SubscribedEvents, ",")), orDash(strings.Join(secrets, ", ")))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// orDash keeps empty cells visible so columns stay aligned for the eye.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
