package consume

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// SQLiteStore keeps records in the table consume_claims of a SQLite
// database; several processes may share the file. Each write is one
// statement fenced on the row's rev (WHERE rev = ?), so it needs no
// transaction.
type SQLiteStore struct {
	db    *sql.DB
	owned bool
}

const sqliteSchema = `CREATE TABLE IF NOT EXISTS consume_claims (
	key         TEXT    PRIMARY KEY,
	status      TEXT    NOT NULL,
	holder      TEXT    NOT NULL,
	lease_until INTEGER NOT NULL, -- unix microseconds UTC
	attempts    INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	expire_at   INTEGER NOT NULL, -- DELETE FROM consume_claims WHERE expire_at < ? to prune
	rev         INTEGER NOT NULL
) STRICT`

// OpenSQLite opens (creating if needed) the database file at path, in WAL
// mode, and creates the table if needed.
func OpenSQLite(ctx context.Context, path string) (*SQLiteStore, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("consume: open sqlite %q: need the path of a database file", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("consume: open sqlite %q: %w", path, err)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	db, err := sql.Open("sqlite", "file:"+r.Replace(filepath.ToSlash(abs))+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("consume: open sqlite %s: %w", abs, err)
	}
	// One connection: SQLite admits one writer at a time anyway, and
	// database/sql queues in-process callers fairly (and honours ctx).
	db.SetMaxOpenConns(1)
	s, err := NewSQLiteStore(ctx, db)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	s.owned = true
	return s, nil
}

// NewSQLiteStore keeps records in db (for instance the database the
// handler writes its own results to) and creates the table if needed. Close
// does not close db.
func NewSQLiteStore(ctx context.Context, db *sql.DB) (*SQLiteStore, error) {
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		return nil, fmt.Errorf("consume: create table consume_claims: %w", err)
	}
	return &SQLiteStore{db: db}, nil
}

// Close closes the database if OpenSQLite opened it.
func (s *SQLiteStore) Close() error {
	if !s.owned {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("consume: close sqlite: %w", err)
	}
	return nil
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

// Get implements Store.
func (s *SQLiteStore) Get(ctx context.Context, key string) (Record, Revision, error) {
	var (
		r                               Record
		status                          string
		lease, updated, expire, version int64
	)
	err := s.db.QueryRowContext(ctx, `SELECT status, holder, lease_until, attempts, updated_at, expire_at, rev
FROM consume_claims WHERE key = ?`, key).Scan(&status, &r.Holder, &lease, &r.Attempts, &updated, &expire, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, "", fmt.Errorf("consume: sqlite get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return Record{}, "", fmt.Errorf("consume: sqlite get %s: %w", key, err)
	}
	r.Status = Status(status)
	r.LeaseUntil, r.UpdatedAt, r.ExpireAt = fromMicros(lease), fromMicros(updated), fromMicros(expire)
	return r, Revision(strconv.FormatInt(version, 10)), nil
}

// Create implements Store.
func (s *SQLiteStore) Create(ctx context.Context, key string, r Record) (Revision, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO consume_claims
(key, status, holder, lease_until, attempts, updated_at, expire_at, rev) VALUES (?, ?, ?, ?, ?, ?, ?, 1)
ON CONFLICT (key) DO NOTHING`,
		key, string(r.Status), r.Holder, micros(r.LeaseUntil), r.Attempts, micros(r.UpdatedAt), micros(r.ExpireAt))
	if err := oneRow(res, err); err != nil {
		return "", fmt.Errorf("consume: sqlite create %s: %w", key, err)
	}
	return "1", nil
}

// Update implements Store.
func (s *SQLiteStore) Update(ctx context.Context, key string, rev Revision, r Record) (Revision, error) {
	v, err := strconv.ParseInt(string(rev), 10, 64)
	if err != nil {
		return "", fmt.Errorf("consume: sqlite update %s: revision %q: %w", key, rev, ErrConflict)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE consume_claims SET status = ?, holder = ?, lease_until = ?,
attempts = ?, updated_at = ?, expire_at = ?, rev = rev + 1 WHERE key = ? AND rev = ?`,
		string(r.Status), r.Holder, micros(r.LeaseUntil), r.Attempts, micros(r.UpdatedAt), micros(r.ExpireAt), key, v)
	if err := oneRow(res, err); err != nil {
		return "", fmt.Errorf("consume: sqlite update %s: %w", key, err)
	}
	return Revision(strconv.FormatInt(v+1, 10)), nil
}

// oneRow turns a statement that changed no row into ErrConflict.
func oneRow(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return ErrConflict
	}
	return nil
}
