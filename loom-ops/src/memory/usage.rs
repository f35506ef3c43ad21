//! What serving a memory leaves behind: an exposure row per served row
//! (`memory_exposures`: who was served which version, by which op and run)
//! and, for `memory.get`, one more recall on the row (`recall_count`,
//! `last_recall_ms`, which ranking reads).
//!
//! Reads queue these on the [`UsageLog`] instead of writing them inside the
//! request, so a read never waits for the writer (on SQLite, the one writer
//! connection and its commit); the log writes them in batches, and shutdown
//! writes what is queued. A read's own answer already counts its recall.
//!
//! A caller's own count never stands still: the log remembers, per row and
//! caller, the count it last answered until that recall is written (and a
//! batch longer, for a read that began before the write was visible), and
//! a `memory.get` answers the larger of that and the stored count, plus
//! one ([`UsageLog::recalls_seen`]). So one caller's gets in a row count 1,
//! 2, 3 without waiting for the writer; another caller's recalls still
//! queued show once written (a batch's few milliseconds). Reads of
//! exposure counts (a recall breakdown, `memory.inspect`,
//! `memory.aggregate`) wait for the log first ([`UsageLog::flush`]): they
//! are rare, and a flush costs one batch's commit.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

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
    /// With `recall`: the row's recall count as answered to the caller,
    /// this recall included ([`UsageLog::recalls_seen`]).
    pub answered_recalls: i64,
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
            answered_recalls: 0,
        }
    }
}

/// The writer reads queue their servings on; a service in `OpCx`. Cheap
/// to clone.
#[derive(Clone, Debug)]
pub struct UsageLog {
    writer: BatchWriter<Served>,
    queued: Arc<QueuedRecalls>,
}

/// Starts the usage writer on the current runtime, writing into `store`.
pub fn start(store: Store) -> UsageLog {
    let queued = Arc::new(QueuedRecalls::default());
    UsageLog {
        writer: BatchWriter::start(
            "memory_exposures",
            Arc::new(Sink {
                store,
                queued: queued.clone(),
            }),
        ),
        queued,
    }
}

impl UsageLog {
    /// Queues one serving.
    pub async fn record(&self, served: Served) {
        if served.recall {
            self.queued.add(&served);
        }
        self.writer.record(served).await;
    }

    /// The recall count of `row` as `cx`'s caller has seen it: the stored
    /// count, or more when a recall answered to this caller is not written
    /// yet (the module doc).
    pub fn recalls_seen(&self, cx: &OpCx, row: &super::store::Row) -> i64 {
        self.queued
            .answered(&RecallBy::of(cx, row))
            .map_or(row.recall_count, |n| n.max(row.recall_count))
    }

    /// Waits until every serving queued before this call is written.
    pub async fn flush(&self) {
        self.writer.flush().await;
    }

    /// Writes everything queued and stops the writer.
    pub async fn close(&self) {
        self.writer.close().await;
    }
}

/// Queues servings on the call's [`UsageLog`].
pub async fn record(cx: &OpCx, served: Vec<Served>) -> OpResult<()> {
    let log = cx.service::<UsageLog>()?;
    for s in served {
        log.record(s).await;
    }
    Ok(())
}

/// A row and who recalled it: what [`QueuedRecalls`] files a recall under.
#[derive(Hash)]
struct RecallBy<'a> {
    org: &'a str,
    namespace: &'a str,
    agent: &'a str,
    memory_key: &'a str,
    subject: &'a str,
    served_to: &'a str,
}

impl<'a> RecallBy<'a> {
    fn of(cx: &'a OpCx, row: &'a super::store::Row) -> RecallBy<'a> {
        RecallBy {
            org: &row.org,
            namespace: &row.namespace,
            agent: &row.agent,
            memory_key: &row.memory_key,
            subject: &cx.caller.subject,
            served_to: &cx.scope.agent,
        }
    }

    fn served(s: &'a Served) -> RecallBy<'a> {
        RecallBy {
            org: &s.org,
            namespace: &s.namespace,
            agent: &s.agent,
            memory_key: &s.memory_key,
            subject: &s.subject,
            served_to: &s.served_to,
        }
    }
}

/// Recalls queued and not yet written, per row and caller, with the count
/// last answered. Each is filed under a hash: a lookup allocates nothing,
/// and two sharing a hash at worst see each other's count.
#[derive(Debug, Default)]
struct QueuedRecalls {
    hasher: std::hash::RandomState,
    rows: Mutex<HashMap<u64, Queued>>,
}

#[derive(Debug, Default)]
struct Queued {
    /// Recalls queued and not written.
    recalls: u32,
    /// The largest count answered.
    answered: i64,
    /// Batches written since `recalls` fell to 0.
    idle: u8,
}

impl QueuedRecalls {
    fn answered(&self, by: &RecallBy<'_>) -> Option<i64> {
        let slot = self.hasher.hash_one(by);
        self.lock().get(&slot).map(|q| q.answered)
    }

    /// One more recall of `s`'s row is queued.
    fn add(&self, s: &Served) {
        let slot = self.hasher.hash_one(RecallBy::served(s));
        let mut rows = self.lock();
        let q = rows.entry(slot).or_default();
        q.recalls += 1;
        q.answered = q.answered.max(s.answered_recalls);
        q.idle = 0;
    }

    /// The batch's recalls are written (or dropped). A row whose recalls
    /// are all written is remembered one batch more: a read that took its
    /// row before this batch's commit showed may still look it up.
    fn settle(&self, rows: &[Served]) {
        let mut queued = self.lock();
        for s in rows.iter().filter(|s| s.recall) {
            let slot = self.hasher.hash_one(RecallBy::served(s));
            if let Some(q) = queued.get_mut(&slot) {
                q.recalls = q.recalls.saturating_sub(1);
            }
        }
        queued.retain(|_, q| q.recalls > 0 || q.idle == 0);
        for q in queued.values_mut().filter(|q| q.recalls == 0) {
            q.idle = 1;
        }
    }

    /// A panic elsewhere while holding the lock leaves counts, not a
    /// broken map: keep using it.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Queued>> {
        self.rows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

struct Sink {
    store: Store,
    queued: Arc<QueuedRecalls>,
}

impl BatchSink<Served> for Sink {
    fn write_batch<'a>(&'a self, rows: &'a [Served]) -> BoxFuture<'a, Result<(), LoomError>> {
        Box::pin(async move {
            write(&self.store, rows).await?;
            self.queued.settle(rows);
            Ok(())
        })
    }

    fn given_up(&self, rows: &[Served]) {
        self.queued.settle(rows);
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
