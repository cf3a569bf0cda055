package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/lrosink/lrosink/internal/event"
	"github.com/lrosink/lrosink/internal/intentmatch"
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
		ops, next, err := c.f.listBatchPage(ctx, findPageSize, token)
		if err != nil {
			return BatchJob{}, false, scrub(fmt.Errorf("gemini: list batches: %w", err), c.f.apiKey)
		}
		for _, op := range ops {
			job := BatchJob{Name: op.name, DisplayName: op.displayName, Model: op.model, CreateTime: op.metadata.CreateTime,
				UserMetadata: op.userMetadata}
			if !since.IsZero() && !job.CreateTime.IsZero() && job.CreateTime.Before(since) {
				return BatchJob{}, false, nil
			}
			if match(job) {
				return job, true, nil
			}
		}
		if next == "" || next == token {
			return BatchJob{}, false, nil
		}
		token = next
	}
	return BatchJob{}, false, fmt.Errorf("gemini: list batches: no match within %d pages of %d and the listing goes on: cannot say the batch was not created", findMaxPages, findPageSize)
}

// FindListedBatch is FindBatch for the reconciler: it lists newest first,
// back to jobs created before since (within FindBatch's bounds), and
// returns the first listed job match accepts, as ListBatches gives it (its
// state, batchStats and echoed intent key), to be fed to the door. An
// unbound batch intent that adoption's scan, bounded to the newest jobs,
// did not reach is looked for by it before the intent is alerted.
func (f *Fetcher) FindListedBatch(ctx context.Context, since time.Time, match func(event.ListedBatch) bool) (event.ListedBatch, bool, error) {
	token := ""
	for range findMaxPages {
		jobs, next, err := f.listBatches(ctx, findPageSize, token)
		if err != nil {
			return event.ListedBatch{}, false, scrub(err, f.apiKey)
		}
		for _, j := range jobs {
			if !since.IsZero() && !j.CreateTime.IsZero() && j.CreateTime.Before(since) {
				return event.ListedBatch{}, false, nil
			}
			if match(j) {
				return j, true, nil
			}
		}
		if next == "" || next == token {
			return event.ListedBatch{}, false, nil
		}
		token = next
	}
	return event.ListedBatch{}, false, fmt.Errorf("gemini: list batches: no match within %d pages of %d and the listing goes on", findMaxPages, findPageSize)
}

// Match is the job as intentmatch reads it.
func (j BatchJob) Match() intentmatch.Job {
	return intentmatch.Job{DisplayName: j.DisplayName, Model: j.Model, CreateTime: j.CreateTime, Intent: event.IntentOf(j.UserMetadata)}
}

// listBatchPage is one page of the batch listing (GET batches), each
// Operation decoded as a GET of it is (decodeBatchOperation), retried like
// a fetch.
func (f *Fetcher) listBatchPage(ctx context.Context, pageSize int, token string) ([]batchOperation, string, error) {
	q := url.Values{}
	if pageSize > 0 {
		q.Set("pageSize", strconv.Itoa(pageSize))
	}
	if token != "" {
		q.Set("pageToken", token)
	}
	path := "batches"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var raw []byte
	err := f.call(ctx, "batches", func(ctx context.Context) (err error) {
		raw, err = f.rawDo(ctx, "GET", path, nil)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	var page struct {
		Operations    []json.RawMessage `json:"operations"`
		NextPageToken string            `json:"nextPageToken"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, "", fmt.Errorf("decode the page: %w", err)
	}
	ops := make([]batchOperation, 0, len(page.Operations))
	for i, r := range page.Operations {
		op, err := decodeBatchOperation(r)
		if err != nil {
			return nil, "", fmt.Errorf("item %d: %w", i, err)
		}
		ops = append(ops, op)
	}
	return ops, page.NextPageToken, nil
}
