package sqliteledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/opname"
)

// An intent's Revision.Version is its version column, which every write
// bumps and every update is fenced on.
const intentColumns = `id, kind, model, display_name, metadata, created_at, name, api_name, bound_at, bound_by,
	alerted_at, alert_from, version`

var sqlGetIntent = pointRead(intentColumns, "intents")

const (
	// Positional parameters in intentArgs's order; the update takes id and
	// the version read last (fenced).
	sqlInsertIntent = `INSERT INTO intents (id, kind, model, display_name, metadata, created_at, name, api_name,
	bound_at, bound_by, alerted_at, alert_from, unbound_since, version)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING`
	sqlUpdateIntent = `UPDATE intents SET kind = ?, model = ?, display_name = ?, metadata = ?, created_at = ?,
	name = ?, api_name = ?, bound_at = ?, bound_by = ?, alerted_at = ?, alert_from = ?, unbound_since = ?, version = ?
WHERE id = ? AND version = ?`

	// Ranges of the partial indexes (unbound_since, id) and (alert_from, id).
	sqlUnboundIntents = `SELECT ` + intentColumns + ` FROM intents
WHERE unbound_since <= ? AND (unbound_since, id) > (?, ?) ORDER BY unbound_since, id LIMIT ?`
	sqlCountUnboundIntents = `SELECT count(*) FROM intents WHERE unbound_since <= ?`
	sqlIntentAlertsDue     = `SELECT ` + intentColumns + ` FROM intents
WHERE alert_from <= ? ORDER BY alert_from, id LIMIT ?`

	// Bound intents past ledger.IntentExpiry: bound at or before the
	// retention's cutoff less ledger.IntentKeep (PruneSettled).
	sqlPruneIntents = `DELETE FROM intents WHERE id IN (
SELECT id FROM intents WHERE bound_at <= ? ORDER BY bound_at, id LIMIT ?)`
)

// intentArgs returns sqlInsertIntent's arguments (the intent at version).
func intentArgs(in ledger.Intent, version int64) ([]any, error) {
	meta, err := toJSON(in.Metadata)
	if err != nil {
		return nil, fmt.Errorf("encode intent metadata: %w", err)
	}
	var m, unbound any
	if meta.Valid {
		m = meta.String
	}
	if !in.Bound() {
		unbound = micros(in.CreatedAt)
	}
	return []any{
		in.Key, string(in.Kind), in.Model, in.DisplayName, m, micros(in.CreatedAt), in.Name, in.APIName,
		nullable(in.BoundAt), in.BoundBy, nullable(in.AlertedAt), nullable(ledger.IntentAlertKey(in)), unbound, version,
	}, nil
}

func scanIntent(sc scanner) (ledger.Intent, error) {
	var (
		in                            ledger.Intent
		kind                          string
		createdAt                     int64
		boundAt, alertedAt, alertFrom sql.NullInt64
		meta                          sql.NullString
	)
	if err := sc.Scan(&in.Key, &kind, &in.Model, &in.DisplayName, &meta, &createdAt, &in.Name, &in.APIName,
		&boundAt, &in.BoundBy, &alertedAt, &alertFrom, &in.Rev.Version); err != nil {
		return ledger.Intent{}, err
	}
	if err := fromJSON(meta, &in.Metadata); err != nil {
		return ledger.Intent{}, fmt.Errorf("decode intent %s: metadata: %w", in.Key, err)
	}
	in.Kind, in.CreatedAt = opname.Kind(kind), fromMicros(createdAt)
	in.BoundAt, in.AlertedAt, in.AlertFrom = fromNullMicros(boundAt), fromNullMicros(alertedAt), fromNullMicros(alertFrom)
	return in, nil
}

// GetIntent implements ledger.Reads.
func (s *Store) GetIntent(ctx context.Context, key string) (ledger.Intent, error) {
	return getOne(ctx, s.readers, "intent", sqlGetIntent, key, scanIntent)
}

// UnboundIntents implements ledger.Queries (partial index on
// (unbound_since, id)).
func (s *Store) UnboundIntents(ctx context.Context, before time.Time, after ledger.IntentCursor, limit int) ([]ledger.Intent, error) {
	if limit <= 0 {
		return nil, nil
	}
	return queryAll(ctx, s.reader, "unbound intents", sqlUnboundIntents, scanIntent,
		micros(before), micros(after.CreatedAt), after.Key, limit)
}

// CountUnboundIntents implements ledger.Queries: a range of the same index.
func (s *Store) CountUnboundIntents(ctx context.Context, before time.Time) (int64, error) {
	return s.count(ctx, "count unbound intents", sqlCountUnboundIntents, micros(before))
}

// IntentAlertsDue implements ledger.Queries (partial index on
// (alert_from, id)).
func (s *Store) IntentAlertsDue(ctx context.Context, cutoff time.Time, limit int) ([]ledger.Intent, error) {
	if limit <= 0 {
		return nil, nil
	}
	return queryAll(ctx, s.reader, "intent alerts due", sqlIntentAlertsDue, scanIntent, micros(cutoff), limit)
}
