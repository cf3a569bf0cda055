package consume

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FirestoreStore keeps one document per dedupe key in a collection. Writes
// are fenced by preconditions, as lrosink's own ledger is: create only if
// absent, update only if the document's update time is still the one read.
// So a claim costs one read and one write, and concurrent consumers never
// wait on each other's transaction locks.
//
// Documents carry expire_at: a TTL policy on that field of the collection
// deletes records after the Consumer's Retention.
type FirestoreStore struct {
	client     *firestore.Client
	collection string
}

// NewFirestoreStore keeps records in collection of client's database.
func NewFirestoreStore(client *firestore.Client, collection string) *FirestoreStore {
	return &FirestoreStore{client: client, collection: collection}
}

// DocID is the document id of a dedupe key: the SHA-256 of the key in hex.
// Keys contain "/" and may be long, which a document id may not; the key
// itself is stored in the document's "key" field.
func DocID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

type recordDoc struct {
	Key        string    `firestore:"key"`
	Status     string    `firestore:"status"`
	Holder     string    `firestore:"holder"`
	LeaseUntil time.Time `firestore:"lease_until"`
	Attempts   int       `firestore:"attempts"`
	UpdatedAt  time.Time `firestore:"updated_at"`
	ExpireAt   time.Time `firestore:"expire_at"`
}

func (s *FirestoreStore) doc(key string) *firestore.DocumentRef {
	return s.client.Collection(s.collection).Doc(DocID(key))
}

func stamp(t time.Time) Revision { return Revision(t.UTC().Format(time.RFC3339Nano)) }

// Get implements Store.
func (s *FirestoreStore) Get(ctx context.Context, key string) (Record, Revision, error) {
	snap, err := s.doc(key).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return Record{}, "", fmt.Errorf("consume: firestore get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return Record{}, "", fmt.Errorf("consume: firestore get %s: %w", key, err)
	}
	var d recordDoc
	if err := snap.DataTo(&d); err != nil {
		return Record{}, "", fmt.Errorf("consume: firestore decode %s: %w", key, err)
	}
	return Record{Status: Status(d.Status), Holder: d.Holder, LeaseUntil: d.LeaseUntil.UTC(), Attempts: d.Attempts,
		UpdatedAt: d.UpdatedAt.UTC(), ExpireAt: d.ExpireAt.UTC()}, stamp(snap.UpdateTime), nil
}

// Create implements Store.
func (s *FirestoreStore) Create(ctx context.Context, key string, r Record) (Revision, error) {
	wr, err := s.doc(key).Create(ctx, recordDoc{Key: key, Status: string(r.Status), Holder: r.Holder,
		LeaseUntil: r.LeaseUntil, Attempts: r.Attempts, UpdatedAt: r.UpdatedAt, ExpireAt: r.ExpireAt})
	if status.Code(err) == codes.AlreadyExists {
		return "", fmt.Errorf("consume: firestore create %s: %w", key, ErrConflict)
	}
	if err != nil {
		return "", fmt.Errorf("consume: firestore create %s: %w", key, err)
	}
	return stamp(wr.UpdateTime), nil
}

// Update implements Store.
func (s *FirestoreStore) Update(ctx context.Context, key string, rev Revision, r Record) (Revision, error) {
	t, err := time.Parse(time.RFC3339Nano, string(rev))
	if err != nil {
		return "", fmt.Errorf("consume: firestore update %s: revision %q: %w", key, rev, ErrConflict)
	}
	wr, err := s.doc(key).Update(ctx, []firestore.Update{
		{Path: "status", Value: string(r.Status)}, {Path: "holder", Value: r.Holder},
		{Path: "lease_until", Value: r.LeaseUntil}, {Path: "attempts", Value: r.Attempts},
		{Path: "updated_at", Value: r.UpdatedAt}, {Path: "expire_at", Value: r.ExpireAt},
	}, firestore.LastUpdateTime(t))
	switch status.Code(err) {
	case codes.OK:
		return stamp(wr.UpdateTime), nil
	case codes.FailedPrecondition, codes.NotFound:
		return "", fmt.Errorf("consume: firestore update %s: %w", key, ErrConflict)
	default:
		return "", fmt.Errorf("consume: firestore update %s: %w", key, err)
	}
}
