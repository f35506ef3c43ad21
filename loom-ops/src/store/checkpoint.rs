//! SQLite's WAL checkpoints, run on a thread of their own.
//!
//! Why: by default the connection whose commit takes the WAL past 1,000
//! pages copies them into the database file there and then, two fsyncs
//! included, before its next statement. That connection is the store's one
//! writer, so every write queued behind it waited for the copy: under the
//! `memory.set` benchmark checkpoints were a fifth of the writer thread's
//! time. Here the writers only ring [`Checkpoints::committed`] after a
//! commit, and this thread checkpoints (PASSIVE: it never waits for a
//! reader or the writer, and they never wait for it) at most once per
//! [`PACE`] while commits come. Paired 10 s runs of the set workload on 2
//! cores (four pairs, bench/RESULTS.md): 3,930-4,615 sets a second with
//! the writer checkpointing, 4,784-5,616 with this thread at a 50 ms pace
//! (5,017-5,582 at 20 ms and 4,592-4,957 checkpointing after every
//! commit, which copied the indexes' hot pages far more often, in the
//! pairs where 50 ms served 5,234-5,616).
//!
//! Durability is unchanged: a commit is durable once its WAL frames are
//! synced (`synchronous = FULL`), whoever copies them later, and a
//! checkpoint syncs the database file before the WAL is reused.
//!
//! The writers keep SQLite's own checkpoint as a backstop, at a WAL ten
//! times its default size (`open::SQLITE_WRITER_SETTINGS`): should this
//! thread fall behind or stop, the WAL still does not grow without bound.
//!
//! Under a steady stream of commits the backstop is also what starts the
//! WAL over. SQLite starts it over at a commit that finds every frame
//! copied and no reader holding a place in it, and this thread never
//! leaves it so: it copies the frames committed before it began (~3,000
//! a checkpoint under the set benchmark) while the writer commits more.
//! So the WAL grows to the backstop's 10,000 frames, about once a second
//! under that load, and the writer copies the rest itself: ~14% of its
//! samples in `perf`; with no backstop at all (the WAL growing without
//! bound, an experiment) 6-8% more sets a second and a p99 ~7 ms lower in
//! two pairs (bench/RESULTS.md). Measured and not kept: this thread
//! copying again until little was left and then checkpointing with
//! RESTART (the writer waits meanwhile) held the writer 8-40 ms each
//! time; a backstop at 50,000 frames did no better than at 10,000, within
//! the host's noise.

use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::inline::Inline;
use super::worker::{Worker, open};

/// The shortest time between two checkpoints while commits come. Longer,
/// a checkpoint copies once a page rewritten many times meanwhile (the
/// indexes' hot pages are); shorter, readers find more of what they read
/// in the database file, through the memory map, and less in the WAL.
/// 100 ms served as many sets as 50 but at a higher p99 (46 ms against 35).
pub(super) const PACE: Duration = Duration::from_millis(50);

/// The checkpoint thread of one database file.
pub(super) struct Checkpoints {
    /// Rung after each commit; one pending ring is enough.
    worker: Worker<SyncSender<()>>,
    /// The file's inline readers, told of every commit.
    readers: Arc<Inline>,
}

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Checkpoints")
    }
}

impl Checkpoints {
    /// Opens a connection to the file `readers` read and starts the
    /// thread, which ends their idle snapshots after each checkpoint.
    pub(super) fn start(readers: Arc<Inline>) -> Result<Checkpoints, String> {
        let conn = open(readers.path(), false)
            .map_err(|e| format!("cannot open the checkpointer: {e}"))?;
        let (ring, rung) = mpsc::sync_channel(1);
        let told = readers.clone();
        let worker = Worker::spawn("loom-sqlite-checkpoint", ring, move || {
            run(&conn, &rung, &told);
        })?;
        Ok(Checkpoints { worker, readers })
    }

    /// A commit added to the WAL: the readers' snapshots are stale, and a
    /// checkpoint is due within [`PACE`]. Never blocks.
    pub(super) fn committed(&self) {
        self.readers.committed();
        if let Some(ring) = self.worker.sender().as_ref() {
            // Full: a checkpoint is due already.
            let _ = ring.try_send(());
        }
    }

    /// Stops the thread after a last checkpoint and waits for it.
    pub(super) async fn stop(&self) {
        self.worker.stop().await;
    }
}

/// A checkpoint per ring, at most one per [`PACE`], and a last one when
/// the writers are gone.
fn run(conn: &Connection, rung: &Receiver<()>, readers: &Inline) {
    while rung.recv().is_ok() {
        let stopped = pace(rung);
        checkpoint(conn, readers);
        if stopped {
            return;
        }
    }
    checkpoint(conn, readers);
}

/// Waits out [`PACE`] from a ring, parked rather than on the channel, so
/// the commits that come meanwhile ring into the full channel without
/// waking the thread each; stopping unparks it ([`Worker::stop`]). True
/// when the channel closed.
fn pace(rung: &Receiver<()>) -> bool {
    let due = Instant::now() + PACE;
    loop {
        if rung.try_recv() == Err(TryRecvError::Disconnected) {
            return true;
        }
        let now = Instant::now();
        if now >= due {
            return false;
        }
        std::thread::park_timeout(due - now);
    }
}

/// One PASSIVE checkpoint: as much of the WAL as no reader still needs;
/// then the idle readers' snapshots are ended, so that none holds a place
/// in the WAL it copied (the writer starts the WAL over only when no
/// reader has one; those begun next read the database file).
fn checkpoint(conn: &Connection, readers: &Inline) {
    copy(conn);
    readers.end_idle();
}

/// The checkpoint itself.
fn copy(conn: &Connection) {
    let done = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        Ok((row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
    });
    match done {
        Ok((wal, copied)) => tracing::trace!(wal, copied, "checkpoint"),
        Err(e) => tracing::warn!(cause = %e, "WAL checkpoint failed; the next commit retries it"),
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::OpenFlags;

    use super::*;

    /// Rows a writer commits with its own checkpoints off reach the
    /// database file itself (read with the WAL ignored) by this thread.
    #[tokio::test]
    async fn commits_reach_the_database_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ck.db");
        let writer = Connection::open(&path).unwrap();
        writer
            .execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; \
                 CREATE TABLE t (v INTEGER)",
            )
            .unwrap();
        let checkpoints = Checkpoints::start(Arc::new(Inline::new(path.clone()))).unwrap();
        for v in 0..100 {
            writer
                .execute("INSERT INTO t (v) VALUES (?1)", [v])
                .unwrap();
            checkpoints.committed();
        }
        let in_file = || -> i64 {
            let uri = format!("file:{}?immutable=1", path.display());
            Connection::open_with_flags(
                uri,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
            )
            .unwrap()
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap_or(0)
        };
        checkpoints.stop().await;
        assert_eq!(in_file(), 100);
        // Stopped, it takes rings without blocking.
        checkpoints.committed();
    }
}
