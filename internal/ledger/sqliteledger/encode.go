package sqliteledger

import (
	"database/sql"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
)

// micros encodes a time as unix microseconds (UTC by construction); the
// zero time encodes too (as a large negative number) and decodes back to the
// zero time.
func micros(t time.Time) int64 { return t.UnixMicro() }

// nullMicros encodes a time whose zero value means "absent" as NULL.
func nullMicros(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: true}
}

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func fromNullMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

// toJSON encodes v as every JSON column is stored (ledger.EncodeJSON, the
// form the bounds on free-form values measure); a nil map, slice or pointer
// is stored as NULL.
func toJSON(v any) (sql.NullString, error) {
	b, err := ledger.EncodeJSON(v)
	if err != nil {
		return sql.NullString{}, err
	}
	if string(b) == "null" {
		return sql.NullString{}, nil
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// fromJSON decodes a column into v, leaving v alone when it is NULL.
func fromJSON(col sql.NullString, v any) error {
	if !col.Valid {
		return nil
	}
	return ledger.DecodeJSON([]byte(col.String), v)
}
