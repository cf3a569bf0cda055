package fsledger

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/ledger"
)

var (
	_ deliverylog.Store          = (*Store)(nil)
	_ deliverylog.TrafficCounter = (*Store)(nil)
)

// deliveriesDoc is an operation's delivery log: its newest entries as one
// JSON string (exempt from indexing in terraform), expire_at, the TTL
// policy's field: the newest entry's time plus the TTL, and webhook_at,
// the newest webhook entry's time (absent while it has none): the Health
// page's traffic query reads the logs delivered to in its window by it
// (WebhookTraffic).
type deliveriesDoc struct {
	Entries   string     `firestore:"entries"`
	ExpireAt  time.Time  `firestore:"expire_at"`
	WebhookAt *time.Time `firestore:"webhook_at,omitempty"`
}

// newestWebhook is the time of the newest webhook entry of log, or nil.
func newestWebhook(log []deliverylog.Entry) *time.Time {
	var at *time.Time
	for _, e := range log {
		if e.Source == deliverylog.SourceWebhook && (at == nil || e.At.After(*at)) {
			t := e.At
			at = &t
		}
	}
	return at
}

// AppendDeliveries implements deliverylog.Store: a transaction that reads
// the operation's log document, keeps the newest entries and writes it.
// The Recorder appends an operation's entries in batches, so a burst of
// deliveries costs one such transaction per batch, not per delivery. Counted
// as delivery reads and writes, apart from the ledger's.
func (s *Store) AppendDeliveries(ctx context.Context, opID string, entries []deliverylog.Entry, r deliverylog.Retention) error {
	if len(entries) == 0 {
		return nil
	}
	r = r.WithDefaults()
	ref := s.client.Collection(Deliveries).Doc(opID)
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		s.counts.DeliveryReads.Add(1)
		var old []deliverylog.Entry
		snap, err := tx.Get(ref)
		switch {
		case status.Code(err) == codes.NotFound:
		case err != nil:
			return err
		default:
			var d deliveriesDoc
			if err := snap.DataTo(&d); err != nil {
				return err
			}
			if old, err = ledger.DecodeDeliveries([]byte(d.Entries)); err != nil {
				return fmt.Errorf("stored log: %w", err)
			}
		}
		kept := deliverylog.Merge(old, entries, r)
		b, err := ledger.EncodeDeliveries(kept)
		if err != nil {
			return err
		}
		s.counts.DeliveryWrites.Add(1)
		return tx.Set(ref, deliveriesDoc{Entries: string(b), ExpireAt: kept[0].At.Add(r.TTL), WebhookAt: newestWebhook(kept)})
	}, firestore.MaxAttempts(5))
	if err != nil {
		return fmt.Errorf("firestore: append deliveries %s: %w", opID, err)
	}
	return nil
}

// ListDeliveries implements deliverylog.Store: one document read.
func (s *Store) ListDeliveries(ctx context.Context, opID string) ([]deliverylog.Entry, error) {
	s.counts.DeliveryReads.Add(1)
	snap, err := s.client.Collection(Deliveries).Doc(opID).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("firestore: list deliveries %s: %w", opID, err)
	}
	var d deliveriesDoc
	if err := snap.DataTo(&d); err != nil {
		return nil, fmt.Errorf("firestore: list deliveries %s: %w", opID, err)
	}
	out, err := ledger.DecodeDeliveries([]byte(d.Entries))
	if err != nil {
		return nil, fmt.Errorf("firestore: list deliveries %s: %w", opID, err)
	}
	return out, nil
}
