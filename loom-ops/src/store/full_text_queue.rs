//! SQLite's full-text queue: what the triggers on `memories` queue for the
//! index (migration 0011 says why), handed to FTS5 in batches.
//!
//! The queue is drained by a commit of the store's writers, just before
//! its `COMMIT`, outside any call's savepoint ([`DRAIN_PENDING`]):
//!
//! - the direct writer's ([`super::direct`]), which every `memory.set`
//!   goes through, once the queue holds [`DRAIN_BATCH`] rows: FTS5 then
//!   writes one segment for a few hundred writes instead of one for each
//!   commit of a dozen or two, and the commits between do no full-text
//!   work at all (under the `memory.set` benchmark FTS5's flush and merge
//!   at each commit were a quarter of the writer thread's time); and, in
//!   a transaction of its own, whatever is queued once it has had no
//!   write for a moment (`direct::IDLE`), so that the first search after a
//!   burst of writes seldom finds their batch to hand over;
//! - every other commit (sqlx's group, [`super::group`]: the multi-step
//!   writes, the merge worker's steps) whenever it holds anything;
//! - a search, before it reads the index ([`Store::index_queued_writes`]):
//!   when anything is queued, it commits an empty write through the group,
//!   which drains the queue. So a search finds every write committed before
//!   it began, as if each commit had been indexed, and pays for the batch
//!   only when writes came since the last one;
//! - the store's open, when a batch or more is queued (rows another program
//!   queued, as the benchmark's pre-fill does by a bulk insert straight into
//!   the tables): left for the first write, a bulk load would make one of
//!   the server's commits index it all. Less than a batch is left to the
//!   writes and searches to come, so a CLI opening the store while a server
//!   writes never waits behind the server for the write lock.
//!
//! Queued rows are durable with the writes that queued them, in the same
//! transaction: nothing a crash or a stop leaves queued is lost.
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

/// How many rows are queued, at most: the span of the queue's sequence
/// numbers (rows leave it only all at once, or with a savepoint rolled
/// back from its end), two lookups of its primary key however long it is.
///
/// Each bound in a subquery of its own: SQLite reads a lone `MIN` or `MAX`
/// off the end of the index, but `MAX(seq) - MIN(seq)` in one `SELECT`
/// walked the whole queue, every row's record read, and the direct writer
/// asks at every commit: ~210,000 instructions a `memory.set` (17% of
/// them) when each commits alone (`bench/instructions.sh`), with up to a
/// batch ([`DRAIN_BATCH`]) of writes' contents queued.
const QUEUED: &str = "SELECT COALESCE((SELECT MAX(seq) FROM memories_fts_pending) \
                      - (SELECT MIN(seq) FROM memories_fts_pending) + 1, 0)";

/// Rows (an update queues two, an insert one) the direct writer lets the
/// queue gather before a commit of its hands them to FTS5: ~512 sets, a
/// few dozen of its commits under load. Paired 10 s runs of the set
/// workload and full benchmark runs (bench/RESULTS.md, after 8925dce):
/// sets served more a second than with the queue drained at every commit
/// in 12 of 13 pairs (a median of +16%), at less of the server's CPU a
/// set in 10 of 12 (a median of -13%).
/// Other sizes were not measured; a larger batch leaves the first search
/// after the writes more to index.
pub(super) const DRAIN_BATCH: i64 = 1024;

/// The queue drained into FTS5, then emptied, in one transaction with the
/// writes that queued it. In FTS5's rowid order, each row's changes in the
/// order they were made: FTS5 then holds the whole batch in its pending
/// terms and writes one segment (a rowid lower than the last one handed to
/// it makes it write what it holds first).
///
/// First, a row handed to the index without its size for search (one
/// another program inserted; Loom's writes count it, migration 0017) is
/// given it: only rows queued as `unsized` are looked up, by their id.
pub(super) const DRAIN_PENDING: BeforeCommit = BeforeCommit {
    when: QUEUED,
    batch: DRAIN_BATCH,
    statements: &[
        SIZE_UNCOUNTED,
        "INSERT INTO memories_fts (memories_fts, rowid, memory_key, content, labels) \
         SELECT CASE WHEN remove = 1 THEN 'delete' END, fts_rowid, memory_key, content, labels \
         FROM memories_fts_pending ORDER BY fts_rowid, seq",
        "DELETE FROM memories_fts_pending",
    ],
};

/// [`DRAIN_PENDING`]'s count of the sizes the queued rows lack.
const SIZE_UNCOUNTED: &str = "UPDATE memories SET fts_tokens = loom_fts_tokens(memory_key, content, labels) \
     WHERE id IN (SELECT -fts_rowid FROM memories_fts_pending WHERE unsized = 1) \
     AND fts_tokens IS NULL";

impl Store {
    /// Hands FTS5 what is queued for the full-text index (SQLite; nothing
    /// on PostgreSQL, whose search column is generated), by committing an
    /// empty write through the group, whose commits drain any queue. A
    /// search runs it before reading the index. An empty queue takes no
    /// write lock: a search after no writes pays one lookup.
    pub async fn index_queued_writes(&self) -> OpResult<()> {
        self.index_queued(1).await
    }

    /// [`Store::index_queued_writes`] when at least `rows` are queued: the
    /// store's open, with [`DRAIN_BATCH`] (the module doc says why).
    pub(super) async fn index_queued(&self, rows: i64) -> OpResult<()> {
        if self.backend() != Backend::Sqlite {
            return Ok(());
        }
        if self.queued_for_full_text().await? < rows.max(1) {
            return Ok(());
        }
        self.begin_write().await?.commit_unaudited().await
    }

    /// How many rows are queued for the full-text index, at most ([`QUEUED`]):
    /// read on the calling thread where it can be.
    pub(super) async fn queued_for_full_text(&self) -> OpResult<i64> {
        if let Some(queued) =
            self.read_inline(|c| c.prepare_cached(QUEUED)?.query_row([], |row| row.get(0)))
        {
            return queued;
        }
        sqlx::query_scalar(QUEUED)
            .fetch_one(self.reader())
            .await
            .map_err(db_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    /// How long the queue is, read off the ends of its primary key
    /// ([`QUEUED`]): the plan searches the table twice and never scans it,
    /// and the answer is the span of the sequence numbers queued.
    #[tokio::test]
    async fn the_queue_is_measured_at_its_ends() {
        let test = testing::sqlite().await;
        let plan = test.query_plan(QUEUED, []);
        let on_queue = |how: &str| {
            plan.iter()
                .filter(|step| step.starts_with(&format!("{how} memories_fts_pending")))
                .count()
        };
        assert_eq!((on_queue("SEARCH"), on_queue("SCAN")), (2, 0), "{plan:?}");

        let path = test.options.url.strip_prefix("sqlite://").unwrap();
        let conn = rusqlite::Connection::open(path).unwrap();
        let queued = || -> i64 { conn.query_row(QUEUED, [], |row| row.get(0)).unwrap() };
        assert_eq!(queued(), 0);
        conn.execute_batch(
            "INSERT INTO memories_fts_pending (seq, fts_rowid, remove, memory_key, content, labels) \
             VALUES (7, -1, 0, 'k', 'c', '[]'), (8, -1, 1, 'k', 'c', '[]'), (9, -2, 0, 'j', 'c', '[]')",
        )
        .unwrap();
        assert_eq!(queued(), 3);
    }

    /// A row another program inserted (no size for search) is given its
    /// size when it is handed to the index, each queued row found by its
    /// id (the plan never scans `memories`).
    #[tokio::test]
    async fn a_row_written_by_another_program_is_given_its_size() {
        let test = testing::sqlite().await;
        let plan = test.query_plan(SIZE_UNCOUNTED, []);
        assert!(
            plan.iter()
                .any(|s| s.starts_with("SEARCH memories USING INTEGER PRIMARY KEY")),
            "{plan:?}"
        );
        assert!(
            !plan
                .iter()
                .any(|s| s.split_whitespace().take(2).eq(["SCAN", "memories"])),
            "{plan:?}"
        );

        let path = test.options.url.strip_prefix("sqlite://").unwrap();
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch(
            "INSERT INTO memories (org, namespace, agent, memory_key, content, kind, labels, source, \
             content_hash, version, created_ms, updated_ms) VALUES ('default', 'default', 'a', \
             'deploy-notes', 'the deploy window is friday', 'note', '[\"ops\"]', '', 'h', 1, 1, 1)",
        )
        .unwrap();
        let size = || -> Option<i64> {
            conn.query_row(
                "SELECT fts_tokens FROM memories WHERE memory_key = 'deploy-notes'",
                [],
                |row| row.get(0),
            )
            .unwrap()
        };
        assert_eq!(size(), None);
        test.store.index_queued_writes().await.unwrap();
        // deploy, notes; the, deploy, window, is, friday; ops
        assert_eq!(size(), Some(8));
    }
}
