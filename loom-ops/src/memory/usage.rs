//! What serving a memory leaves behind: an exposure row per served row
//! (`memory_exposures`: who was served which version, by which op and run)
//! and, for `memory.get`, one more recall on the row (`recall_count`,
//! `last_recall_ms`, which ranking reads).
//!
//! Reads queue these on the [`UsageLog`] instead of writing them inside the
//! request, so a read never waits for the writer (on SQLite, the one writer
//! connection and its commit); the log writes them in batches. A read's own
//! answer already counts its recall; the stored count catches up when the
//! batch commits, and shutdown writes what is queued.

use std::collections::BTreeMap;
use std::sync::Arc;

use loom_core::{BoxFuture, LoomError, OpCx, OpResult};

use super::store as sql;
use crate::store::{BatchSink, BatchWriter, Store};

/// One serving of one memory version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The org of the row.
    pub org: String,
    /// The namespace of the row.
    pub namespace: String,
    /// The agent the row belongs to.
    pub agent: String,
    /// The key.
    pub memory_key: String,
    /// The version served.
    pub version: i64,
    /// The calling agent.
    pub served_to: String,
    /// The calling token subject.
    pub subject: String,
    /// The op that served it.
    pub op: &'static str,
    /// The caller's run.
    pub run_id: Option<String>,
    /// The request.
    pub request_id: String,
    /// When (milliseconds since the Unix epoch).
    pub at_ms: i64,
    /// Whether this serving also counts as a recall of the row.
    pub recall: bool,
}

impl Served {
    /// A serving of (namespace, agent, key, version) in `cx`'s org to `cx`'s caller.
    pub fn new(
        cx: &OpCx,
        (namespace, agent, key, version): (&str, &str, &str, i64),
        at_ms: i64,
        recall: bool,
    ) -> Served {
        Served {
            org: cx.scope.org.clone(),
            namespace: namespace.to_owned(),
            agent: agent.to_owned(),
            memory_key: key.to_owned(),
            version,
            served_to: cx.scope.agent.clone(),
            subject: cx.caller.subject.clone(),
            op: cx.op,
            run_id: cx.run_id.clone(),
            request_id: cx.request_id.clone(),
            at_ms,
            recall,
        }
    }
}

/// The writer reads queue their servings on; a service in `OpCx`.
pub type UsageLog = BatchWriter<Served>;

/// Starts the usage writer on the current runtime, writing into `store`.
pub fn start(store: Store) -> UsageLog {
    BatchWriter::start("memory_exposures", Arc::new(Sink(store)))
}

/// Queues servings on the call's [`UsageLog`].
pub async fn record(cx: &OpCx, served: Vec<Served>) -> OpResult<()> {
    let log = cx.service::<UsageLog>()?;
    for s in served {
        log.record(s).await;
    }
    Ok(())
}

struct Sink(Store);

impl BatchSink<Served> for Sink {
    fn write_batch<'a>(&'a self, rows: &'a [Served]) -> BoxFuture<'a, Result<(), LoomError>> {
        Box::pin(write(&self.0, rows))
    }
}

/// Writes a batch in one transaction: the exposure rows, then the recall
/// counts (rows in key order, so two writers lock them in the same order).
async fn write(store: &Store, rows: &[Served]) -> OpResult<()> {
    let mut recalls: BTreeMap<(&str, &str, &str, &str), (i64, i64)> = BTreeMap::new();
    for s in rows.iter().filter(|s| s.recall) {
        let entry = recalls
            .entry((&s.org, &s.namespace, &s.agent, &s.memory_key))
            .or_insert((0, s.at_ms));
        entry.0 += 1;
        entry.1 = entry.1.max(s.at_ms);
    }
    let mut tx = store.begin_write().await?;
    sql::insert_exposures(tx.conn(), rows).await?;
    let recalls: Vec<sql::Recall<'_>> = recalls
        .into_iter()
        .map(|(row, (count, last))| (row, count, last))
        .collect();
    sql::add_recalls(tx.conn(), &recalls).await?;
    tx.commit_unaudited().await
}
