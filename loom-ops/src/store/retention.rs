//! Retention: the rows calls leave behind, deleted once they are older than
//! the deployment keeps them (`loom-server`'s retention worker decides
//! when and how old).
//!
//! Why: every call writes a ledger row, every read of a memory an exposure
//! row, every audited call an audit row, and every call with an
//! idempotency key its stored answer. Kept for ever, a busy store grows by
//! millions of rows a day that nothing reads again (a stored answer is
//! never replayed past its time to live).
//!
//! How: a batch at a time, oldest rows first, each batch its own short
//! write, so the calls' writes go on between batches ([`Store::prune`]
//! says which rows a batch reads). On SQLite the batch is found on a
//! reader (a read holds no lock a writer waits for) and deleted by a range
//! of row ids on the writer; on PostgreSQL one statement finds and
//! deletes it, holding only the rows it deletes. Pruning is idempotent:
//! replicas may all prune at once.

use loom_core::OpResult;
// The statements name only this module's tables and columns ([`Pruned`]).
use sqlx::AssertSqlSafe;

use super::{Backend, Store, db_error};

/// The rows one batch deletes at most.
pub const PRUNE_BATCH: i64 = 2_000;

/// What retention prunes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pruned {
    /// The call ledger (`agent_events`): a run's calls are read from it.
    Ledger,
    /// Who was served which memory (`memory_exposures`); the counts kept
    /// per memory (`memory_exposure_counts`) are not pruned.
    Exposures,
    /// The audit log (`audit_log`).
    Audit,
    /// Stored answers of idempotent calls (`idempotency_keys`).
    Idempotency,
    /// MCP sessions (`mcp_sessions`), by when a server last found them in
    /// use.
    McpSessions,
}

impl Pruned {
    /// Every kind, in the order a sweep prunes them.
    pub const ALL: [Pruned; 5] = [
        Pruned::Ledger,
        Pruned::Exposures,
        Pruned::Audit,
        Pruned::Idempotency,
        Pruned::McpSessions,
    ];

    /// The table.
    pub const fn table(self) -> &'static str {
        match self {
            Pruned::Ledger => "agent_events",
            Pruned::Exposures => "memory_exposures",
            Pruned::Audit => "audit_log",
            Pruned::Idempotency => "idempotency_keys",
            Pruned::McpSessions => "mcp_sessions",
        }
    }

    /// The column that says when a row was written.
    const fn written(self) -> &'static str {
        match self {
            Pruned::Idempotency => "created_ms",
            Pruned::McpSessions => "seen_ms",
            _ => "at_ms",
        }
    }

    /// The column whose order is the order the rows were written in, on
    /// `backend`, if there is one: append-only rows get rising ids (SQLite's
    /// rowid, PostgreSQL's `id`), so their oldest are the lowest and a
    /// batch reads only them. (A stored answer's row is rewritten when its
    /// key is used again, a session is pruned by its last use, and
    /// PostgreSQL's exposures have no id.)
    const fn in_order(self, backend: Backend) -> Option<&'static str> {
        match (self, backend) {
            (Pruned::Idempotency | Pruned::McpSessions, _)
            | (Pruned::Exposures, Backend::Postgres) => None,
            (_, Backend::Sqlite) => Some("rowid"),
            (_, Backend::Postgres) => Some("id"),
        }
    }
}

impl Store {
    /// Deletes `pruned`'s rows written before `cutoff_ms` ([`PRUNE_BATCH`]
    /// rows a write at most); answers how many.
    ///
    /// Rows in write order ([`Pruned::in_order`]) go from the lowest id up,
    /// a batch of the [`PRUNE_BATCH`] lowest at a time, until one holds no
    /// old row: a sweep that finds nothing reads one batch, not the table.
    /// A row written out of order (an id after a newer row's) waits, for
    /// a later sweep; rows are written seconds out of order at most. Other
    /// tables are searched for old rows, [`PRUNE_BATCH`] at a time (on
    /// PostgreSQL the exposures through a BRIN index on their time).
    pub async fn prune(&self, pruned: Pruned, cutoff_ms: i64) -> OpResult<u64> {
        let backend = self.backend();
        let order = pruned.in_order(backend);
        let mut deleted = 0;
        loop {
            let batch = match backend {
                Backend::Sqlite => self.prune_batch_sqlite(pruned, order, cutoff_ms).await?,
                Backend::Postgres => self.prune_batch_postgres(pruned, order, cutoff_ms).await?,
            };
            deleted += batch;
            let more = match order {
                Some(_) => batch > 0,
                None => batch == PRUNE_BATCH as u64,
            };
            if !more {
                return Ok(deleted);
            }
            // Each batch is its own write: let the calls' writes in between.
            tokio::task::yield_now().await;
        }
    }

    /// One batch on SQLite: the highest row id of the batch's old rows,
    /// read on a reader (a scan there holds no lock), then the old rows up
    /// to it deleted on the writer. The time is checked again in the
    /// delete, so a row that is not old is never deleted.
    async fn prune_batch_sqlite(
        &self,
        pruned: Pruned,
        order: Option<&str>,
        cutoff_ms: i64,
    ) -> OpResult<u64> {
        let (table, written) = (pruned.table(), pruned.written());
        let find = match order {
            Some(_) => format!(
                "SELECT MAX(rowid) FROM (SELECT rowid, {written} AS written FROM {table} \
                 ORDER BY rowid LIMIT {PRUNE_BATCH}) WHERE written < $1"
            ),
            None => format!(
                "SELECT MAX(rowid) FROM (SELECT rowid FROM {table} WHERE {written} < $1 \
                 ORDER BY rowid LIMIT {PRUNE_BATCH})"
            ),
        };
        let (last,): (Option<i64>,) = sqlx::query_as(AssertSqlSafe(find))
            .bind(cutoff_ms)
            .fetch_one(self.reader())
            .await
            .map_err(db_error)?;
        let Some(last) = last else {
            return Ok(0);
        };
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(AssertSqlSafe(format!(
            "DELETE FROM {table} WHERE rowid <= $1 AND {written} < $2"
        )))
        .bind(last)
        .bind(cutoff_ms)
        .execute(tx.conn())
        .await
        .map_err(db_error)?;
        tx.commit_unaudited().await?;
        Ok(done.rows_affected())
    }

    /// One batch on PostgreSQL: the rows found and deleted by one statement,
    /// which holds only the rows it deletes.
    async fn prune_batch_postgres(
        &self,
        pruned: Pruned,
        order: Option<&str>,
        cutoff_ms: i64,
    ) -> OpResult<u64> {
        let (table, written) = (pruned.table(), pruned.written());
        let delete = match order {
            Some(id) => format!(
                "DELETE FROM {table} WHERE {id} IN (SELECT {id} FROM (SELECT {id}, {written} \
                 FROM {table} ORDER BY {id} LIMIT {PRUNE_BATCH}) oldest WHERE {written} < $1)"
            ),
            None => format!(
                "DELETE FROM {table} WHERE ctid = ANY(ARRAY(\
                 SELECT ctid FROM {table} WHERE {written} < $1 LIMIT {PRUNE_BATCH}))"
            ),
        };
        let done = sqlx::query(AssertSqlSafe(delete))
            .bind(cutoff_ms)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        Ok(done.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    /// `n` rows of `pruned`'s table written at `at_ms` (keys from `tag`,
    /// unique where the table needs them to be).
    async fn insert(store: &Store, pruned: Pruned, n: i64, at_ms: i64, tag: &str) {
        let rows = match pruned {
            Pruned::Ledger => {
                "INSERT INTO agent_events (org, namespace, subject, agent, op, transport, \
                 request_id, outcome, status, latency_ms, at_ms) \
                 SELECT 'o', 'n', 's', 'a', 'memory.get', 'http', $3 || i, 'ok', 200, 1, $2 FROM n"
            }
            Pruned::Exposures => {
                "INSERT INTO memory_exposures (org, namespace, agent, memory_key, version, \
                 served_to, subject, op, request_id, at_ms) \
                 SELECT 'o', 'n', 'a', 'k', 1, 'a', 's', 'memory.get', $3 || i, $2 FROM n"
            }
            Pruned::Audit => {
                "INSERT INTO audit_log (org, namespace, subject, agent, op, args_digest, \
                 outcome, request_id, at_ms) \
                 SELECT 'o', 'n', 's', 'a', 'memory.set', '', 'ok', $3 || i, $2 FROM n"
            }
            Pruned::Idempotency => {
                "INSERT INTO idempotency_keys (org, subject, idem_key, op, request_hash, \
                 state, created_ms) \
                 SELECT 'o', 's', $3 || i, 'memory.set', '', 'done', $2 FROM n"
            }
            Pruned::McpSessions => {
                "INSERT INTO mcp_sessions (session_id, agent, revision, created_ms, seen_ms) \
                 SELECT $3 || i, 'a', '2025-11-25', $2, $2 FROM n"
            }
        };
        let sql = format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1) {rows}"
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(n)
            .bind(at_ms)
            .bind(tag)
            .execute(store.writer())
            .await
            .expect("rows");
    }

    async fn count(store: &Store, pruned: Pruned, written: &str) -> i64 {
        let sql = format!(
            "SELECT COUNT(*) FROM {} WHERE {} {written}",
            pruned.table(),
            pruned.written()
        );
        let (n,): (i64,) = sqlx::query_as(AssertSqlSafe(sql))
            .fetch_one(store.reader())
            .await
            .expect("a count");
        n
    }

    /// Rows older than the cutoff go, more than a batch of them, also a
    /// few written after newer ones; rows from the cutoff on stay; a
    /// second prune finds nothing.
    #[tokio::test]
    async fn old_rows_go_in_batches_and_newer_rows_stay() {
        for test in testing::all().await {
            let store = &test.store;
            for pruned in Pruned::ALL {
                insert(store, pruned, 3, 10, "old-first-").await;
                insert(store, pruned, PRUNE_BATCH + 500, 999, "old-").await;
                insert(store, pruned, 3, 5_000, "new-").await;
                insert(store, pruned, 2, 1_000, "at-cutoff-").await;
                insert(store, pruned, 4, 20, "old-late-").await;

                let what = format!("{} on {}", pruned.table(), test.name());
                let deleted = store.prune(pruned, 1_000).await.unwrap();
                assert_eq!(deleted, PRUNE_BATCH as u64 + 507, "{what}");
                assert_eq!(count(store, pruned, "< 1000").await, 0, "{what}");
                assert_eq!(count(store, pruned, ">= 1000").await, 5, "{what}");
                assert_eq!(store.prune(pruned, 1_000).await.unwrap(), 0, "{what}");
            }
        }
    }

    /// Where rows are pruned in write order, a prune reads the lowest
    /// batch of ids only: old rows behind a whole batch of newer ones wait
    /// until those are old too (rows are written seconds out of order, not
    /// a batch). Elsewhere old rows are searched for wherever they are.
    #[tokio::test]
    async fn in_write_order_a_prune_reads_one_batch_when_none_is_old() {
        for test in testing::all().await {
            let store = &test.store;
            for pruned in Pruned::ALL {
                insert(store, pruned, PRUNE_BATCH, 5_000, "new-").await;
                insert(store, pruned, 3, 10, "old-late-").await;
                let what = format!("{} on {}", pruned.table(), test.name());
                let waits = pruned.in_order(store.backend()).is_some();
                let deleted = store.prune(pruned, 1_000).await.unwrap();
                assert_eq!(deleted, if waits { 0 } else { 3 }, "{what}");
                let deleted = store.prune(pruned, 6_000).await.unwrap();
                let all = PRUNE_BATCH as u64 + 3;
                assert_eq!(deleted, if waits { all } else { all - 3 }, "{what}");
            }
        }
    }
}
