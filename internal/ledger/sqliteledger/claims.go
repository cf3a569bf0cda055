package sqliteledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
)

// A claim's Revision.Version is its rev column, which every write to the
// claim bumps and every write is fenced on.
const claimColumns = `id, key, operation, status, holder, lease_until, attempts, created_at, updated_at,
	done_at, expire_at, message, rev`

const (
	sqlGetClaim = `SELECT ` + claimColumns + ` FROM claims WHERE id = ?`

	sqlInsertClaim = `INSERT INTO claims (id, key, operation, status, holder, lease_until, attempts,
	created_at, updated_at, done_at, expire_at, due_at, message, rev)
VALUES (:id, :key, :operation, :status, :holder, :lease_until, :attempts,
	:created_at, :updated_at, :done_at, :expire_at, :due_at, :message, :rev)
ON CONFLICT (id) DO NOTHING`

	sqlSeizeClaim = `UPDATE claims SET status = ?, holder = ?, lease_until = ?, due_at = ?, attempts = ?,
	updated_at = ?, expire_at = ?, rev = rev + 1
WHERE id = ? AND rev = ?`

	sqlReleaseClaim = `UPDATE claims SET status = ?, holder = '', lease_until = ?, due_at = ?, updated_at = ?,
	expire_at = ?, rev = rev + 1
WHERE id = ? AND rev = ?`

	sqlCompleteClaim = `UPDATE claims SET status = ?, done_at = ?, updated_at = ?, due_at = NULL, rev = rev + 1
WHERE id = ? AND rev = ?`

	// sqlMirrorEffect bumps the operation's version too: a commit from a
	// read taken before the mirror changed must fail, not overwrite it.
	sqlMirrorEffect = `UPDATE operations SET effect_status = ?, effect_lease_until = ?, version = version + 1
WHERE id = ?`

	sqlDueClaims = `SELECT ` + claimColumns + ` FROM claims
WHERE due_at <= ? ORDER BY due_at, id LIMIT ?`
)

// claimArgs returns the named arguments of sqlInsertClaim. The message is
// stored as ledger.EncodeJSON of the struct, as the Firestore adapter stores it,
// so every holder republishes the same data.
func claimArgs(c ledger.Claim) ([]any, error) {
	msg, err := ledger.EncodeJSON(c.Message)
	if err != nil {
		return nil, fmt.Errorf("encode claim message %s: %w", c.Operation, err)
	}
	// Due while the side effect is owed: at lease end (or release time);
	// never once DONE.
	var due sql.NullInt64
	if c.Status != ledger.ClaimDone {
		due = nullMicros(c.LeaseUntil)
	}
	return []any{
		sql.Named("id", c.ID), sql.Named("key", c.Key), sql.Named("operation", c.Operation),
		sql.Named("status", string(c.Status)), sql.Named("holder", c.Holder),
		sql.Named("lease_until", micros(c.LeaseUntil)), sql.Named("attempts", c.Attempts),
		sql.Named("created_at", micros(c.CreatedAt)), sql.Named("updated_at", micros(c.UpdatedAt)),
		sql.Named("done_at", nullMicros(c.DoneAt)), sql.Named("expire_at", micros(c.ExpireAt)),
		sql.Named("due_at", due), sql.Named("message", string(msg)), sql.Named("rev", ledger.FirstVersion),
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

// GetClaim implements ledger.Store.
func (s *Store) GetClaim(ctx context.Context, id string) (ledger.Claim, error) {
	c, err := scanClaim(s.reader.QueryRowContext(ctx, sqlGetClaim, id))
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.Claim{}, fmt.Errorf("sqlite: get claim %s: %w", id, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Claim{}, fail(ctx, "get claim "+id, err)
	}
	return c, nil
}

// SeizeClaim implements ledger.Store: fenced on the rev read with c, and
// mirrored on the operation in the same transaction.
func (s *Store) SeizeClaim(ctx context.Context, c ledger.Claim, holder string, leaseUntil, expireAt, now time.Time) (*ledger.Lease, error) {
	err := s.updateClaim(ctx, "seize claim "+c.ID, c.ID, ledger.EffectMirror{Status: ledger.ClaimHeld, LeaseUntil: leaseUntil},
		sqlSeizeClaim, string(ledger.ClaimHeld), holder, micros(leaseUntil), micros(leaseUntil), c.Attempts+1, micros(now),
		micros(expireAt), c.ID, c.Rev.Version)
	if err != nil {
		return nil, err
	}
	return &ledger.Lease{ID: c.ID, OpID: c.ID, Holder: holder, Rev: ledger.Revision{Version: c.Rev.Version + 1}}, nil
}

// ReleaseClaim implements ledger.Store: the claim is due at once (and its
// expiry extended).
func (s *Store) ReleaseClaim(ctx context.Context, l ledger.Lease, expireAt, now time.Time) error {
	return s.updateClaim(ctx, "release claim "+l.ID, l.ID, ledger.EffectMirror{Status: ledger.ClaimReleased, LeaseUntil: now},
		sqlReleaseClaim, string(ledger.ClaimReleased), micros(now), micros(now), micros(now), micros(expireAt), l.ID, l.Rev.Version)
}

// updateClaim runs a rev-fenced claim update and mirrors it on the operation
// of the same id, atomically. A claim that changed or does not exist, or
// whose operation does not exist, is ErrFenced (as Firestore's update
// preconditions fail on either).
func (s *Store) updateClaim(ctx context.Context, what, id string, mirror ledger.EffectMirror, query string, args ...any) error {
	return s.write(ctx, what, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		if err := affected(res, ledger.ErrFenced); err != nil {
			return err
		}
		if res, err = tx.ExecContext(ctx, sqlMirrorEffect, string(mirror.Status), nullMicros(mirror.LeaseUntil), id); err != nil {
			return err
		}
		return affected(res, ledger.ErrFenced)
	})
}

// CompleteClaim implements ledger.Store: one fenced write, so a holder whose
// lease was seized or released can never mark the claim DONE, and the
// operation's mirror says DONE in the same transaction (a list page then
// needs no claim read per row, and a duplicate none after the lease).
func (s *Store) CompleteClaim(ctx context.Context, l ledger.Lease, now time.Time) error {
	return s.write(ctx, "complete claim "+l.ID, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, sqlCompleteClaim, string(ledger.ClaimDone), micros(now), micros(now), l.ID, l.Rev.Version)
		if err != nil {
			return err
		}
		if err := affected(res, ledger.ErrFenced); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, sqlMirrorEffect, string(ledger.ClaimDone), nullMicros(time.Time{}), l.OpID)
		return err
	})
}

// DueClaims implements ledger.Queries (partial index on due_at).
func (s *Store) DueClaims(ctx context.Context, now time.Time, limit int) ([]ledger.Claim, error) {
	if limit <= 0 {
		return nil, nil
	}
	return queryAll(ctx, s.reader, "due claims", sqlDueClaims, scanClaim, micros(now), limit)
}
