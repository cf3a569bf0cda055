package sqliteledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
)

// A claim's Revision.Version is its rev column, which every write to the
// claim bumps and every write is fenced on.
const claimColumns = `id, key, operation, status, holder, lease_until, attempts, created_at, updated_at,
	done_at, expire_at, message, rev`

// sqlGetClaim is the point read (pointRead says why it is written so).
var sqlGetClaim = pointRead(claimColumns, "claims")

const (
	// Positional parameters in claimArgs's order; the update takes id and
	// the rev read last (fenced).
	sqlInsertClaim = `INSERT INTO claims (id, key, operation, status, holder, lease_until, attempts,
	created_at, updated_at, done_at, expire_at, due_at, message, rev)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING`

	// sqlUpdateClaim writes the whole claim but its message, which an
	// update keeps (ledger.PutClaim), fenced on the rev read.
	sqlUpdateClaim = `UPDATE claims SET key = ?, operation = ?, status = ?, holder = ?,
	lease_until = ?, attempts = ?, created_at = ?, updated_at = ?,
	done_at = ?, expire_at = ?, due_at = ?, rev = ?
WHERE id = ? AND rev = ?`

	// sqlMirrorEffect bumps the operation's version too: a commit from a
	// read taken before the mirror changed must fail, not overwrite it.
	sqlMirrorEffect = `UPDATE operations SET effect_status = ?, effect_lease_until = ?, version = version + 1
WHERE id = ?`

	sqlDueClaims = `SELECT ` + claimColumns + ` FROM claims
WHERE due_at <= ? AND (due_at, id) > (?, ?) ORDER BY due_at, id LIMIT ?`
	sqlCountDueClaims = `SELECT count(*) FROM claims WHERE due_at <= ? AND (due_at, id) > (?, ?)`
)

// claimArgs returns the statement that puts c at rev and its arguments:
// sqlInsertClaim's, in its column order, to create it, with the message
// stored as ledger.EncodeJSON of the struct, as the Firestore adapter
// stores it, so every holder republishes the same data; else
// sqlUpdateClaim's, fenced on the rev read, which keeps the stored message
// (ledger.PutClaim) and so never encodes it again.
func claimArgs(c ledger.Claim, rev int64) (string, []any, error) {
	// Due while the side effect is owed: at lease end (or release time);
	// never once DONE.
	var due any
	if c.Status != ledger.ClaimDone {
		due = nullable(c.LeaseUntil)
	}
	if c.Rev.Exists() {
		return sqlUpdateClaim, []any{
			c.Key, c.Operation, string(c.Status), c.Holder, micros(c.LeaseUntil), c.Attempts,
			micros(c.CreatedAt), micros(c.UpdatedAt), nullable(c.DoneAt), micros(c.ExpireAt), due, rev,
			c.ID, c.Rev.Version,
		}, nil
	}
	msg, err := ledger.EncodeJSONString(c.Message)
	if err != nil {
		return "", nil, fmt.Errorf("encode claim message %s: %w", c.Operation, err)
	}
	return sqlInsertClaim, []any{
		c.ID, c.Key, c.Operation, string(c.Status), c.Holder, micros(c.LeaseUntil), c.Attempts,
		micros(c.CreatedAt), micros(c.UpdatedAt), nullable(c.DoneAt), micros(c.ExpireAt), due, msg, rev,
	}, nil
}

func scanClaim(sc scanner) (ledger.Claim, error) {
	var (
		c                                          ledger.Claim
		status, msg                                string
		leaseUntil, createdAt, updatedAt, expireAt int64
		doneAt                                     sql.NullInt64
	)
	if err := sc.Scan(&c.ID, &c.Key, &c.Operation, &status, &c.Holder, &leaseUntil, &c.Attempts,
		&createdAt, &updatedAt, &doneAt, &expireAt, &msg, &c.Rev.Version); err != nil {
		return ledger.Claim{}, err
	}
	if err := ledger.DecodeJSON([]byte(msg), &c.Message); err != nil {
		return ledger.Claim{}, fmt.Errorf("decode claim message %s: %w", c.ID, err)
	}
	c.Status = ledger.ClaimStatus(status)
	c.LeaseUntil, c.CreatedAt, c.UpdatedAt = fromMicros(leaseUntil), fromMicros(createdAt), fromMicros(updatedAt)
	c.DoneAt, c.ExpireAt = fromNullMicros(doneAt), fromMicros(expireAt)
	return c, nil
}

// GetClaim implements ledger.Reads.
func (s *Store) GetClaim(ctx context.Context, id string) (ledger.Claim, error) {
	return getOne(ctx, s.readers, "claim", sqlGetClaim, id, scanClaim)
}

// DueClaims implements ledger.Queries (partial index on (due_at, id)).
func (s *Store) DueClaims(ctx context.Context, now time.Time, after ledger.ClaimCursor, limit int) ([]ledger.Claim, error) {
	if limit <= 0 {
		return nil, nil
	}
	return queryAll(ctx, s.reader, "due claims", sqlDueClaims, scanClaim, micros(now), micros(after.DueAt), after.ID, limit)
}

// CountDueClaims implements ledger.Queries: a range of the same index.
func (s *Store) CountDueClaims(ctx context.Context, now time.Time, after ledger.ClaimCursor) (int64, error) {
	return s.count(ctx, "count due claims", sqlCountDueClaims, micros(now), micros(after.DueAt), after.ID)
}
