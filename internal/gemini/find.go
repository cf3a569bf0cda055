package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// BatchJob is a listed batch as a retried submission matches it: its name,
// display name, model, create time and the user metadata its webhook
// config carries when the listing echoes one (GEMINI.md §13: unconfirmed
// live, hence the display name).
type BatchJob struct {
	Name         string
	DisplayName  string
	Model        string
	CreateTime   time.Time
	UserMetadata map[string]any // numbers are json.Number; nil when not echoed
}

// Bounds of FindBatch: 20 pages of 100, newest first.
const (
	findPageSize = 100
	findMaxPages = 20
)

// FindBatch lists the project's batches newest first (raw GETs: the SDK's
// Batches.List drops the webhook config) and returns the first match
// accepts, reading no further than jobs created before since (a zero since
// reads every page up to the bound). found is false when nothing matched.
// Each page is retried like a fetch: a list creates nothing.
func (c *Creator) FindBatch(ctx context.Context, since time.Time, match func(BatchJob) bool) (BatchJob, bool, error) {
	token := ""
	for range findMaxPages {
		q := url.Values{"pageSize": {strconv.Itoa(findPageSize)}}
		if token != "" {
			q.Set("pageToken", token)
		}
		var raw []byte
		err := c.f.call(ctx, "batches", func(ctx context.Context) (err error) {
			raw, err = c.f.rawDo(ctx, "GET", "batches?"+q.Encode(), nil)
			return err
		})
		if err != nil {
			return BatchJob{}, false, scrub(fmt.Errorf("gemini: list batches: %w", err), c.f.apiKey)
		}
		var page struct {
			Operations []struct {
				Name     string `json:"name"`
				Metadata struct {
					DisplayName string    `json:"displayName"`
					Model       string    `json:"model"`
					CreateTime  time.Time `json:"createTime"`
					Webhook     *struct {
						UserMetadata      json.RawMessage `json:"user_metadata"`
						UserMetadataCamel json.RawMessage `json:"userMetadata"`
					} `json:"webhookConfig"`
				} `json:"metadata"`
			} `json:"operations"`
			NextPageToken string `json:"nextPageToken"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return BatchJob{}, false, fmt.Errorf("gemini: list batches: decode the page: %w", err)
		}
		for _, op := range page.Operations {
			job := BatchJob{Name: op.Name, DisplayName: op.Metadata.DisplayName, Model: op.Metadata.Model, CreateTime: op.Metadata.CreateTime}
			if w := op.Metadata.Webhook; w != nil {
				for _, m := range []json.RawMessage{w.UserMetadata, w.UserMetadataCamel} {
					if job.UserMetadata == nil && len(m) > 0 {
						d := json.NewDecoder(bytes.NewReader(m))
						d.UseNumber()
						_ = d.Decode(&job.UserMetadata) // metadata that does not decode matches on the display name
					}
				}
			}
			if !since.IsZero() && !job.CreateTime.IsZero() && job.CreateTime.Before(since) {
				return BatchJob{}, false, nil
			}
			if match(job) {
				return job, true, nil
			}
		}
		if page.NextPageToken == "" || page.NextPageToken == token {
			return BatchJob{}, false, nil
		}
		token = page.NextPageToken
	}
	return BatchJob{}, false, fmt.Errorf("gemini: list batches: no match within %d pages of %d and the listing goes on: cannot say the batch was not created", findMaxPages, findPageSize)
}
