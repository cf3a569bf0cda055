package sqliteledger

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"
)

// The checkpointer copies the WAL into the database file on a connection
// of its own, after the writer's commits, so that the writer's COMMIT
// seldom checkpoints, and finds little left to copy when it does. SQLite
// checkpoints on the committing connection once the
// WAL holds wal_autocheckpoint (1,000) pages, and that COMMIT returns only
// after the copy and its two fsyncs: every write of the group waits ~5 ms
// (docs/BENCHMARKS.md: this took 1–2 ms off p99 at 50 senders).
// A PASSIVE checkpoint here takes no lock a writer or reader waits on, and
// copies what was committed before it began; the writer restarts the WAL
// from its start once everything was copied. The writer's own
// autocheckpoint stays as it is: if this one falls behind or fails, the
// WAL is still bounded as before.
type checkpointer struct {
	db     *sql.DB // one read-write connection
	kick   chan struct{}
	stop   chan struct{}
	exited chan struct{}
	// pause is the least time between two checkpoints: under load they
	// would otherwise run back to back, each with its fsyncs.
	pause time.Duration

	runs     atomic.Int64 // checkpoints run (tests, Stats)
	failures atomic.Int64 // of which failed (Stats)
	backlog  atomic.Int64 // WAL frames not yet copied after the last run
}

// checkpointPause spaces checkpoints out under load: a checkpoint's cost is
// mostly its two fsyncs. 2 ms apart they cost serve 3–4 % of its rate at
// 500 senders; 10 ms kept most of the gain at 50 (docs/BENCHMARKS.md).
const checkpointPause = 10 * time.Millisecond

func startCheckpointer(db *sql.DB) *checkpointer {
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), stop: make(chan struct{}),
		exited: make(chan struct{}), pause: checkpointPause}
	go c.loop()
	return c
}

// CheckpointFailures is the number of the checkpointer's checkpoints that
// failed (metrics.CheckpointCounter: lrosink_sqlite_checkpoint_failures_total).
func (s *Store) CheckpointFailures() int64 { return s.ckpt.failures.Load() }

// committed tells the checkpointer the WAL grew; it never blocks the writer.
func (c *checkpointer) committed() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) loop() {
	defer close(c.exited)
	pause := time.NewTimer(c.pause)
	pause.Stop() // started after each run
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		if err := c.run(); err != nil {
			c.failures.Add(1)
		}
		pause.Reset(c.pause)
		select {
		case <-c.stop:
			return
		case <-pause.C:
		}
	}
}

// run is one PASSIVE checkpoint. Its "busy" answer (another checkpoint was
// running: the writer's own) is not a failure.
func (c *checkpointer) run() error {
	c.runs.Add(1)
	var busy, frames, copied int64
	if err := c.db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied); err != nil {
		return fmt.Errorf("sqlite: checkpoint: %w", err)
	}
	c.backlog.Store(max(frames-copied, 0))
	return nil
}

// close stops the checkpointer (a checkpoint under way finishes) and
// closes its connection.
func (c *checkpointer) close() error {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.exited
	return c.db.Close()
}
