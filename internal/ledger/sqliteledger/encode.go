package sqliteledger

import (
	"database/sql"
	"encoding/json"
	"reflect"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
)

// micros encodes a time as unix microseconds (UTC by construction); the
// zero time encodes too (as a large negative number) and decodes back to the
// zero time.
func micros(t time.Time) int64 { return t.UnixMicro() }

// nullable encodes a time whose zero value means "absent" as a statement
// argument: nil (NULL) or the unix microseconds, an int64 (no driver.Valuer
// for database/sql to call).
func nullable(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func fromNullMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

// toJSON encodes v as every JSON column is stored (ledger.EncodeJSONString, the
// form the bounds on free-form values measure); a nil map, slice or pointer
// is stored as NULL.
func toJSON(v any) (sql.NullString, error) {
	if encodesAsNull(v) {
		// Most of an operation's JSON columns are empty: the encoder would
		// only say null, at the cost of an encoder run per column per write.
		return sql.NullString{}, nil
	}
	s, err := ledger.EncodeJSONString(v)
	if err != nil {
		return sql.NullString{}, err
	}
	if s == "null" {
		return sql.NullString{}, nil
	}
	return sql.NullString{String: s, Valid: true}, nil
}

// fromJSON decodes a column into v, leaving v alone when it is NULL.
func fromJSON(col sql.NullString, v any) error {
	if !col.Valid {
		return nil
	}
	return ledger.DecodeJSON([]byte(col.String), v)
}

// encodesAsNull reports whether encoding/json writes v as null without
// calling a method of v's: v is nil, or a nil map, slice or pointer whose
// type has no MarshalJSON.
func encodesAsNull(v any) bool {
	if v == nil {
		return true
	}
	if _, ok := v.(json.Marshaler); ok {
		return false
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Map, reflect.Slice, reflect.Pointer:
		return rv.IsNil()
	}
	return false
}
