package consume

import (
	"context"
	"errors"
	"time"
)

// Errors a Store returns (wrapped); the consumer tests them with errors.Is.
var (
	// ErrNotFound: no record for the key.
	ErrNotFound = errors.New("consume: no record")
	// ErrConflict: Create found the record already there, or Update found
	// it changed since the revision given. This is the fence.
	ErrConflict = errors.New("consume: record changed")
)

// Status is where a key's processing stands.
type Status string

// Statuses of a Record.
const (
	// Claimed: a consumer holds the key until LeaseUntil.
	Claimed Status = "CLAIMED"
	// Released: the last run failed; the next delivery may take the key.
	Released Status = "RELEASED"
	// Done: a run completed and committed; later deliveries are duplicates.
	Done Status = "DONE"
)

// Record is the stored state of one dedupe key.
type Record struct {
	Status Status
	// Holder is the fencing token of the run that holds (or completed) the
	// key. Every claim or seizure writes a new one.
	Holder     string
	LeaseUntil time.Time
	// Attempts counts the runs started for the key.
	Attempts  int
	UpdatedAt time.Time
	// ExpireAt is when the record may be deleted (a Firestore TTL policy on
	// the field, or a periodic DELETE in SQLite). A duplicate that arrives
	// after that is processed again.
	ExpireAt time.Time
}

// Revision identifies the stored version of a record; it is opaque to the
// consumer and changes with every write.
type Revision string

// Store keeps one Record per dedupe key with compare-and-set writes. It is
// all the fencing a store has to do; the lease and token rules live once, in
// the Consumer. FirestoreStore and SQLiteStore implement it; so can any
// store with a conditional write.
type Store interface {
	// Get reads key's record and its revision; ErrNotFound if absent.
	Get(ctx context.Context, key string) (Record, Revision, error)
	// Create stores r for key if key has no record; ErrConflict if it has.
	Create(ctx context.Context, key string, r Record) (Revision, error)
	// Update replaces key's record with r if its revision is still rev;
	// ErrConflict if not (or if it is gone).
	Update(ctx context.Context, key string, rev Revision, r Record) (Revision, error)
}
