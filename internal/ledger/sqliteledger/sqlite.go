// Package sqliteledger is the SQLite adapter of the ledger port, for single-host
// deployments and local runs. It keeps the guarantees of the Firestore
// adapter: every operation write is fenced on the revision read, a claim is
// created in the same transaction as the operation's first terminal state,
// and every claim write is fenced on the claim's own revision.
//
// Tables: `operations` and `claims`, keyed by opname.DocID of the key, the
// delivery log's `delivery_entries` (a row per entry, deliveries.go),
// `intents` keyed by the intent key (intents.go), and `schema_version`
// for migrations. Times are INTEGER unix microseconds UTC,
// the precision the port promises (lifecycle.ServerTime), so ordering and
// equality are exact; a time the port treats as "zero = absent" is NULL.
// A delivery-log entry's time is unix nanoseconds (at_ns), as the entry
// carries it.
//
// Fencing: an operation's Revision.Version is its `version` column and a
// claim's is its `rev` column; both grow by one on every write to the row.
// Revision.Stamp is left zero: this adapter fences on Version only.
//
// Durability: the database runs in WAL mode with synchronous=NORMAL. A
// committed transaction survives a crash of the process, but a power loss or
// OS crash may lose the last few transactions (never corrupt the file).
package sqliteledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/shard"
)

// Store is the SQLite ledger. It is safe for concurrent use, and several
// Stores (in one or more processes) may share one database file.
//
// It keeps two connection pools on the file. The writer pool has exactly one
// connection: SQLite admits one writer at a time anyway, and queueing
// in-process writers in database/sql (which honours ctx) is fairer and
// faster than letting them spin in SQLite's busy handler; every write runs
// in BEGIN IMMEDIATE, so a transaction takes the write lock before it reads
// and can never fail with SQLITE_BUSY half-way (writers in other processes
// wait under busy_timeout). The reader pool has several query_only
// connections: in WAL mode readers see the last committed snapshot without
// blocking or being blocked by the writer, so the ingest door's hot read
// never queues behind commits.
//
// Every write goes through the Store's one writer goroutine (group), which
// gathers concurrent writes into one transaction: see groupcommit.go.
type Store struct {
	writer  *sql.DB
	reader  *sql.DB
	group   *group
	readers *readers // the point reads' goroutines (readers.go)
	points  *sql.DB  // their connections, one each
	ckpt    *checkpointer
}

var _ ledger.Ledger = (*Store)(nil)

// schemaVersion is the version the migrations below bring a database to.
const schemaVersion = 11

// migrations returns the statements that move the schema from version i to
// i+1 at index i. Version 1 is written with IF NOT EXISTS so that it also
// adopts a database created before the version table existed.
func migrations() []string {
	return []string{`
CREATE TABLE IF NOT EXISTS operations (
	id                 TEXT    PRIMARY KEY,
	name               TEXT    NOT NULL,
	api_name           TEXT    NOT NULL,
	kind               TEXT    NOT NULL,
	state              TEXT    NOT NULL,
	update_time        INTEGER NOT NULL,
	version            INTEGER NOT NULL,
	submitted_at       INTEGER NOT NULL,
	settled_at         INTEGER,
	settled_by         TEXT    NOT NULL,
	next_check_at      INTEGER, -- NULL once settled: out of the due query
	pending_since      INTEGER, -- submitted_at while not terminal: the stuck query
	checks             INTEGER NOT NULL,
	last_check         TEXT    NOT NULL,
	last_check_at      INTEGER,
	history            TEXT,    -- JSON
	conflicts          TEXT,    -- JSON
	user_metadata      TEXT,    -- JSON
	output             TEXT,    -- JSON
	error              TEXT,    -- JSON
	effect_status      TEXT    NOT NULL,
	effect_lease_until INTEGER,
	replays            TEXT     -- JSON
) STRICT;

-- No foreign key to operations: like the Firestore documents, a claim must
-- outlive its operation, so that a re-created operation still finds it.
CREATE TABLE IF NOT EXISTS claims (
	id          TEXT    PRIMARY KEY,
	key         TEXT    NOT NULL,
	operation   TEXT    NOT NULL,
	status      TEXT    NOT NULL,
	holder      TEXT    NOT NULL,
	lease_until INTEGER NOT NULL,
	attempts    INTEGER NOT NULL,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	done_at     INTEGER,
	expire_at   INTEGER NOT NULL,
	due_at      INTEGER, -- lease end or release time; NULL once DONE
	message     TEXT    NOT NULL, -- results.Message JSON, verbatim
	rev         INTEGER NOT NULL
) STRICT;

-- The queries order ties by id, as Firestore does by document name, so
-- every index ends with id and also serves the ORDER BY.
CREATE INDEX IF NOT EXISTS operations_next_check_at ON operations (next_check_at, id) WHERE next_check_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS operations_pending_since ON operations (pending_since, id) WHERE pending_since IS NOT NULL;
CREATE INDEX IF NOT EXISTS operations_state_submitted_at ON operations (state, submitted_at, id);
CREATE INDEX IF NOT EXISTS operations_submitted_at ON operations (submitted_at, id);
CREATE INDEX IF NOT EXISTS claims_due_at ON claims (due_at, id) WHERE due_at IS NOT NULL;
`, `
-- When the reconciler last raised the stuck alert (paces its repetitions).
ALTER TABLE operations ADD COLUMN stuck_alerted_at INTEGER;
`, `
-- Gemini's raw status string behind state (CONTRACT.md §6: gemini_status);
-- operations written before it have none.
ALTER TABLE operations ADD COLUMN gemini_status TEXT NOT NULL DEFAULT '';
`, `
-- The console's filtered pages and counts (PageOperations, CountOperations):
-- one index per combination of the kind, state and stuck filters, each
-- ending in the order column and id (state alone is served above).
CREATE INDEX IF NOT EXISTS operations_kind_submitted_at ON operations (kind, submitted_at, id);
CREATE INDEX IF NOT EXISTS operations_kind_state_submitted_at ON operations (kind, state, submitted_at, id);
CREATE INDEX IF NOT EXISTS operations_state_pending_since ON operations (state, pending_since, id) WHERE pending_since IS NOT NULL;
CREATE INDEX IF NOT EXISTS operations_kind_pending_since ON operations (kind, pending_since, id) WHERE pending_since IS NOT NULL;
CREATE INDEX IF NOT EXISTS operations_kind_state_pending_since ON operations (kind, state, pending_since, id) WHERE pending_since IS NOT NULL;
`, `
-- The stuck scan's key (ledger.StuckKey): submitted_at until the first
-- stuck alert, then moved by each alert to when the next one is due (less
-- LROSINK_STUCK_AFTER); NULL once terminal. Existing rows start from
-- pending_since; one alerted before this version is put back on its cadence
-- by the next pass that reads it.
ALTER TABLE operations ADD COLUMN stuck_from INTEGER;
UPDATE operations SET stuck_from = pending_since;
CREATE INDEX IF NOT EXISTS operations_stuck_from ON operations (stuck_from, id) WHERE stuck_from IS NOT NULL;
`, `
-- The delivery log (package deliverylog): one row per operation holding its
-- newest entries as a JSON array, apart from the operation so that logging
-- a delivery never writes the operation. expire_at is the newest entry's
-- time plus the TTL; expired rows are deleted on appends.
CREATE TABLE IF NOT EXISTS deliveries (
	op_id     TEXT    PRIMARY KEY,
	expire_at INTEGER NOT NULL,
	entries   TEXT    NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS deliveries_expire_at ON deliveries (expire_at);
`, `
-- Retention (LROSINK_RETENTION, PruneSettled): settled operations in
-- settlement order, and the published claims past their expire_at (what
-- Firestore's TTL policies delete there).
CREATE INDEX IF NOT EXISTS operations_settled_at ON operations (settled_at, id) WHERE settled_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS claims_done_expire_at ON claims (expire_at, id) WHERE status = 'DONE';
`, `
-- Virtual shards (package shard): an operation's bucket, a pure function of
-- its id written with the row, and the due and stuck orders per bucket for
-- a pass over a range of buckets. backfillBuckets fills existing rows in
-- the same transaction.
ALTER TABLE operations ADD COLUMN bucket INTEGER;
CREATE INDEX IF NOT EXISTS operations_bucket_next_check_at ON operations (bucket, next_check_at, id) WHERE next_check_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS operations_bucket_stuck_from ON operations (bucket, stuck_from, id) WHERE stuck_from IS NOT NULL;
`, `
-- The delivery log as one row per entry (deliveries.go): an append is an
-- insert at the table's end and into one index, where a row per operation
-- was read, merged, re-encoded and rewritten on every later delivery to it,
-- and moved in an expiry index. seq (the rowid) is the arrival order.
-- migrateDeliveries moves every log of version 6's table here and drops it.
CREATE TABLE IF NOT EXISTS delivery_entries (
	seq         INTEGER PRIMARY KEY,
	op_id       TEXT    NOT NULL,
	at_ns       INTEGER NOT NULL, -- unix nanoseconds: the entry's time exactly
	source      TEXT    NOT NULL,
	delivery_id TEXT    NOT NULL,
	status      TEXT    NOT NULL,
	auth        TEXT    NOT NULL,
	outcome     TEXT    NOT NULL,
	reason      TEXT    NOT NULL,
	answer      INTEGER NOT NULL,
	latency_ns  INTEGER NOT NULL
) STRICT;
-- One operation's log in order, newest last; the rowid (seq) ends every
-- index entry, so ties in at_ns are in arrival order.
CREATE INDEX IF NOT EXISTS delivery_entries_op ON delivery_entries (op_id, at_ns);
`, `
-- Intents (CONTRACT.md §5): a submission recorded before its Gemini create,
-- keyed by the caller's idempotency key (id), bound to its operation once
-- known (name; the operation names it back in operations.intent).
-- unbound_since is created_at while unbound (UnboundIntents, and its
-- count); alert_from the alert scan's key (ledger.IntentAlertKey); both
-- NULL once bound. bound_at orders the retention's deletes (PruneSettled).
CREATE TABLE IF NOT EXISTS intents (
	id            TEXT    PRIMARY KEY,
	kind          TEXT    NOT NULL,
	model         TEXT    NOT NULL,
	display_name  TEXT    NOT NULL,
	metadata      TEXT,    -- JSON
	created_at    INTEGER NOT NULL,
	name          TEXT    NOT NULL, -- '' while unbound
	api_name      TEXT    NOT NULL,
	bound_at      INTEGER,
	bound_by      TEXT    NOT NULL,
	alerted_at    INTEGER,
	alert_from    INTEGER,
	unbound_since INTEGER,
	version       INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS intents_unbound_since ON intents (unbound_since, id) WHERE unbound_since IS NOT NULL;
CREATE INDEX IF NOT EXISTS intents_alert_from ON intents (alert_from, id) WHERE alert_from IS NOT NULL;
CREATE INDEX IF NOT EXISTS intents_bound_at ON intents (bound_at, id) WHERE bound_at IS NOT NULL;
ALTER TABLE operations ADD COLUMN intent TEXT NOT NULL DEFAULT '';
`, `
-- Who asked for a console action (deliverylog.SourceConsole entries: the
-- signed-in session or the IAM principal); '' for every other entry.
-- addActor adds the column delivery_entries.actor, unless it is there.
`}
}

// afterMigration is the Go code the migration to version runs after its
// statements, in the same transaction, or nil.
func afterMigration(version int) func(context.Context, *sql.Tx) error {
	switch version {
	case 8:
		return backfillBuckets
	case 9:
		return migrateDeliveries
	case 11:
		return addActor
	}
	return nil
}

// addActor adds delivery_entries.actor (text, empty by default): SQLite
// has no ADD COLUMN IF NOT EXISTS, and a database put back to an older
// version by hand may have it already.
func addActor(ctx context.Context, tx *sql.Tx) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('delivery_entries') WHERE name = 'actor'`).Scan(&n); err != nil {
		return fmt.Errorf("add delivery_entries.actor: %w", err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `ALTER TABLE delivery_entries ADD COLUMN actor TEXT NOT NULL DEFAULT ''`); err != nil {
		return fmt.Errorf("add delivery_entries.actor: %w", err)
	}
	return nil
}

// backfillBuckets writes the bucket of every row written before the column
// existed: SQL cannot compute shard.Of. The bucket never changes, so it
// does not count as a write of the operation (no version bump).
func backfillBuckets(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM operations WHERE bucket IS NULL`)
	if err != nil {
		return fmt.Errorf("backfill buckets: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return errors.Join(fmt.Errorf("backfill buckets: %w", err), rows.Close())
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("backfill buckets: %w", err)
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `UPDATE operations SET bucket = ? WHERE id = ?`, shard.Of(id), id); err != nil {
			return fmt.Errorf("backfill buckets: %s: %w", id, err)
		}
	}
	return nil
}

// Open opens (creating if needed) the ledger database at path, a file path,
// and brings its schema up to date.
func Open(ctx context.Context, path string) (*Store, error) {
	// Two pools on one private in-memory database would see two databases.
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlite: open %q: need the path of a database file", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	writer, err := openPool(ctx, dsn(abs, false), 1)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	// Migrate before the reader pool exists, so no reader ever sees a
	// half-built schema (the migration is one transaction anyway).
	if err := migrate(ctx, writer); err != nil {
		return nil, errors.Join(fmt.Errorf("sqlite: migrate %s: %w", abs, err), writer.Close())
	}
	conns := max(2, runtime.GOMAXPROCS(0))
	reader, err := openPool(ctx, dsn(abs, true), conns)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sqlite: open %s: %w", abs, err), writer.Close())
	}
	points, err := openPool(ctx, dsn(abs, true), conns)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sqlite: open %s: %w", abs, err), reader.Close(), writer.Close())
	}
	ckpt, err := openPool(ctx, dsn(abs, false), 1)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sqlite: open %s: %w", abs, err), points.Close(), reader.Close(), writer.Close())
	}
	rd, err := startReaders(ctx, points, conns)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sqlite: open %s: %w", abs, err), ckpt.Close(), points.Close(), reader.Close(), writer.Close())
	}
	cp := startCheckpointer(ckpt)
	return &Store{writer: writer, reader: reader, points: points, group: startGroup(writer, cp.committed), readers: rd, ckpt: cp}, nil
}

// Close finishes the writes already queued, stops the writer goroutine and
// the checkpointer and closes the pools; a write after Close fails. The
// last connection to close (the writer's) checkpoints the WAL into the
// database file.
func (s *Store) Close() error {
	s.group.close()
	cerr := s.ckpt.close()
	s.readers.close()
	perr := s.points.Close()
	rerr := s.reader.Close()
	werr := s.writer.Close()
	if err := errors.Join(cerr, perr, rerr, werr); err != nil {
		return fmt.Errorf("sqlite: close: %w", err)
	}
	return nil
}

// dsn is the modernc.org/sqlite DSN for the file at abs. It is a file: URI
// so that a path containing '?' or '#' cannot be mistaken for parameters.
// The driver runs every _pragma on each new connection (busy_timeout first).
func dsn(abs string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	// SQLite keeps a page's content from before a savepoint (a group run
	// again in savepoints, groupcommit.go) or a multi-row statement in a
	// statement journal: a temporary file by default, so one pwrite per
	// page per write (a sixth of the writer goroutine's CPU under load when
	// every write had a savepoint, docs/BENCHMARKS.md). In memory it costs
	// the pages the writes changed, for the group's transaction.
	q.Add("_pragma", "temp_store(MEMORY)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return "file:" + r.Replace(filepath.ToSlash(abs)) + "?" + q.Encode()
}

// openPool opens a pool of conns connections whose statements are kept
// prepared (stmtcache.go).
func openPool(ctx context.Context, dsn string, conns int) (*sql.DB, error) {
	c, err := newConnector(dsn)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return db, nil
}

// migrate applies the migrations the database lacks, in one transaction
// (BEGIN IMMEDIATE, so two processes opening a new file do not both apply
// them).
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		id      INTEGER PRIMARY KEY CHECK (id = 1),
		version INTEGER NOT NULL
	) STRICT`); err != nil {
		return err
	}
	var v int
	switch err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version WHERE id = 1`).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
		v = 0
	case err != nil:
		return err
	}
	if v > schemaVersion {
		return fmt.Errorf("database schema version %d is newer than this binary's %d", v, schemaVersion)
	}
	steps := migrations()
	for ; v < schemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, steps[v]); err != nil {
			return fmt.Errorf("to version %d: %w", v+1, err)
		}
		if after := afterMigration(v + 1); after != nil {
			if err := after(ctx, tx); err != nil {
				return fmt.Errorf("to version %d: %w", v+1, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (id, version) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version`, v); err != nil {
		return err
	}
	return tx.Commit()
}

// write runs fn in a write transaction (BEGIN IMMEDIATE on the single writer
// connection), which it may share with other writes queued at the same time,
// each in its own savepoint (groupcommit.go), and returns once that
// transaction committed. fn returns ledger.ErrConflict or ledger.ErrFenced
// unwrapped when it is fenced out; what fn wrote is then rolled back, and
// only this write fails. fn may run more than once (again in a new
// transaction when another write's failure lost the one it ran in), so it
// must only read and write through tx.
func (s *Store) write(ctx context.Context, what fmt.Stringer, fn writeFn) error {
	return s.group.write(ctx, what, fn)
}

// label names a write in its errors.
type label string

func (l label) String() string { return string(l) }

// fail wraps an error of the store being unavailable. When ctx ended, the
// driver may report it as an interrupted statement; the context's error is
// wrapped too so callers can tell with errors.Is.
func fail(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("sqlite: %s: %w: %w", what, cerr, err)
	}
	return fmt.Errorf("sqlite: %s: %w", what, err)
}

// affected returns fenced unless a statement changed exactly one row (n).
func affected(n int64, fenced error) error {
	if n != 1 {
		return fenced
	}
	return nil
}
