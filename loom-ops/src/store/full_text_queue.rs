//! SQLite's full-text queue: what the triggers on `memories` queue for the
//! index (migration 0011 says why), handed to FTS5 once per commit.
//!
//! Every commit of the store's writers runs [`DRAIN_PENDING`] just before
//! its `COMMIT`, outside any call's savepoint: the direct writer
//! ([`super::direct`]) and sqlx's group ([`super::group`]), which every
//! other write of the store goes through. Rows another program queued
//! (a bulk insert straight into the tables, as the benchmark's pre-fill
//! does) are drained by the next commit, and when the store opens.
//!
//! A commit whose queue is empty (a batch of the call ledger's rows, of
//! exposures or of recall counts) skips the drain. Its `DELETE` alone
//! wrote the queue's root page even then (SQLite empties a table through
//! its root page without looking at what it holds), and a commit that
//! writes a page of the file makes every reader drop its page cache and
//! memory map at its next read.

use loom_core::OpResult;

use super::group::BeforeCommit;
use super::{Backend, Store, db_error};

/// Whether anything is queued: one row, 1 or 0.
const QUEUED: &str = "SELECT EXISTS (SELECT 1 FROM memories_fts_pending)";

/// The queue drained into FTS5, then emptied, in one transaction with the
/// writes that queued it, when it holds anything. In FTS5's rowid order,
/// each row's changes in the order they were made: FTS5 then holds the
/// whole commit in its pending terms and writes one segment (a rowid lower
/// than the last one handed to it makes it write what it holds first).
pub(super) const DRAIN_PENDING: BeforeCommit = BeforeCommit {
    when: QUEUED,
    statements: &[
        "INSERT INTO memories_fts (memories_fts, rowid, memory_key, content, labels) \
         SELECT CASE WHEN remove = 1 THEN 'delete' END, fts_rowid, memory_key, content, labels \
         FROM memories_fts_pending ORDER BY fts_rowid, seq",
        "DELETE FROM memories_fts_pending",
    ],
};

impl Store {
    /// Drains what was queued for the full-text index around the store's
    /// writers (another program, a bulk insert straight into the tables)
    /// by committing an empty write, as every commit drains the queue
    /// (SQLite; nothing on PostgreSQL, whose search column is generated).
    /// The store runs it when it opens; an empty queue takes no write lock,
    /// so a CLI opening the store never waits behind a busy server for it.
    pub async fn drain_full_text_queue(&self) -> OpResult<()> {
        if self.backend() != Backend::Sqlite {
            return Ok(());
        }
        let queued: i64 = sqlx::query_scalar(QUEUED)
            .fetch_one(self.reader())
            .await
            .map_err(db_error)?;
        if queued == 0 {
            return Ok(());
        }
        self.begin_write().await?.commit_unaudited().await
    }
}
