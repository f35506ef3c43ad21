//! What serving a memory leaves behind: an exposure row per served row
//! (`memory_exposures`: who was served which version, by which op and run)
//! and, for `memory.get`, one more recall on the row (`recall_count`,
//! `last_recall_ms`, which ranking reads).
//!
//! Reads queue these on the [`UsageLog`] instead of writing them inside the
//! request, so a read never waits for the writer (on SQLite, the one writer
//! connection and its commit); the log writes the exposure rows in batches
//! and holds the recall and exposure counts, summed per row, for five
//! seconds (`store::fold::FOLD`) before they go out in slices of
//! neighbouring rows, a slice with each batch (`store::fold` says why).
//! Shutdown writes everything queued and held. A read's own answer already
//! counts its recall.
//!
//! A caller's own count never stands still: the log remembers, per row and
//! caller, the count it last answered until that recall is written (and a
//! batch longer, for a read that began before the write was visible), and
//! a `memory.get` answers the larger of that and the stored count, plus
//! one ([`UsageLog::recalls_seen`]). So one caller's gets in a row count 1,
//! 2, 3 without waiting for the writer; another caller's recalls show once
//! written (within about six seconds). Reads of exposure counts (a recall
//! breakdown, `memory.inspect`, `memory.aggregate`) wait for the log first
//! ([`UsageLog::flush`], which writes what it holds too): they are rare,
//! and a flush costs one batch's commit (under load, with up to a fold's
//! held counts in it).

use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loom_core::{BoxFuture, LoomError, OpCx, OpResult};

use super::store as sql;
use crate::store::fold::{Fold, SLICE, Sum};
use crate::store::packed::Packed;
use crate::store::{Backend, BatchSink, BatchWriter, Store};

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
    /// The row, when this serving also counts as a recall of it.
    pub recalled: Option<Recalled>,
    /// With `recalled`: the row's recall count as answered to the caller,
    /// this recall included ([`UsageLog::recalls_seen`]).
    pub answered_recalls: i64,
    /// With `recalled`: where [`QueuedRecalls`] filed it, once queued.
    slot: u64,
}

impl Served {
    /// A serving of (namespace, agent, key, version) in `cx`'s org to
    /// `cx`'s caller; with `recall_of`, the row's `id`, it also counts as a
    /// recall of the row (the id is how the recall count finds it).
    pub fn new(
        cx: &OpCx,
        (namespace, agent, key, version): (&str, &str, &str, i64),
        at_ms: i64,
        recall_of: Option<Recalled>,
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
            recalled: recall_of,
            answered_recalls: 0,
            slot: 0,
        }
    }
}

/// The row a serving also recalls: its `id` and when it was created (a key
/// set again after a delete is a new memory with its own count: the
/// recalls queued of the deleted one are not answered for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recalled {
    /// The row's `id`.
    pub id: i64,
    /// The row's `created_ms`.
    pub born_ms: i64,
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
                held: Mutex::default(),
            }),
        ),
        queued,
    }
}

impl UsageLog {
    /// Queues one serving.
    pub async fn record(&self, mut served: Served) {
        if served.recalled.is_some() {
            served.slot = self.queued.add(&served);
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

    /// Forgets every count answered so far: after a [`UsageLog::flush`]
    /// the stored counts hold every recall answered before it, and a
    /// demotion that reset some of them must not be outrun by what a
    /// caller was answered before it (each caller would otherwise see its
    /// own count from before the reset, and callers differ). A recall
    /// queued meanwhile is still written; only its count's memo goes.
    pub fn forget_answered(&self) {
        let mut queue = self.queued.lock();
        queue.by_slot.clear();
        queue.idle.clear();
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
    born_ms: i64,
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
            born_ms: row.created_ms,
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
            born_ms: s.recalled.map_or(0, |r| r.born_ms),
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
    hasher: foldhash::fast::RandomState,
    rows: Mutex<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    by_slot: foldhash::HashMap<u64, Queued>,
    /// The slots whose recalls were all written by the last settle.
    idle: Vec<u64>,
}

#[derive(Debug, Default)]
struct Queued {
    /// Recalls queued and not written.
    recalls: u32,
    /// The largest count answered.
    answered: i64,
}

impl QueuedRecalls {
    fn answered(&self, by: &RecallBy<'_>) -> Option<i64> {
        let slot = self.hasher.hash_one(by);
        self.lock().by_slot.get(&slot).map(|q| q.answered)
    }

    /// One more recall of `s`'s row is queued: filed under the slot
    /// answered.
    fn add(&self, s: &Served) -> u64 {
        let slot = self.hasher.hash_one(RecallBy::served(s));
        let mut queue = self.lock();
        let q = queue.by_slot.entry(slot).or_default();
        q.recalls += 1;
        q.answered = q.answered.max(s.answered_recalls);
        slot
    }

    /// A recall per slot listed is written (or dropped). A row whose
    /// recalls are all written is remembered one settle more: a read that
    /// took its row before this batch's commit showed may still look it up.
    /// The work is the slots', not the whole map's: under load the map
    /// holds every row recalled in the last fold and more, and the lock is
    /// the one each get's count takes.
    fn settle(&self, slots: impl IntoIterator<Item = u64>) {
        let mut queue = self.lock();
        let Queue { by_slot, idle } = &mut *queue;
        for slot in std::mem::take(idle) {
            if by_slot.get(&slot).is_some_and(|q| q.recalls == 0) {
                by_slot.remove(&slot);
            }
        }
        for slot in slots {
            if let Some(q) = by_slot.get_mut(&slot) {
                q.recalls = q.recalls.saturating_sub(1);
                if q.recalls == 0 {
                    idle.push(slot);
                }
            }
        }
    }

    /// A panic elsewhere while holding the lock leaves counts, not a
    /// broken map: keep using it.
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.rows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

struct Sink {
    store: Store,
    queued: Arc<QueuedRecalls>,
    held: Mutex<Held>,
}

/// Where a row's recalls are filed while held: its `id` first on SQLite
/// (0 on PostgreSQL, whose rows are then in key order, so two writers
/// lock them in the same order), then its coordinates (org, namespace,
/// agent, key), then when it was created: a key set again after a delete
/// is another memory, whose recalls are its own.
type RowAt = (i64, Packed<4>, i64);

/// A row's exposures to one calling agent: (org, namespace, agent, key,
/// served_to), the key of `memory_exposure_counts`.
type SeenBy = Packed<5>;

/// One row's held recalls.
#[derive(Clone, Debug, Default)]
struct HeldRow {
    /// How many.
    n: i64,
    /// The latest.
    last_ms: i64,
    /// The [`QueuedRecalls`] slot of each, settled once it is written.
    slots: Vec<u64>,
}

impl Sum for HeldRow {
    fn absorb(&mut self, other: HeldRow) {
        self.n += other.n;
        self.last_ms = self.last_ms.max(other.last_ms);
        self.slots.extend(other.slots);
    }
}

/// What the log writes after the exposure rows, summed.
#[derive(Debug, Default)]
struct Held {
    recalls: Fold<RowAt, HeldRow>,
    seen: Fold<SeenBy, i64>,
}

/// One transaction's share of [`Held`].
#[derive(Clone)]
struct Slice {
    recalls: Vec<(RowAt, HeldRow)>,
    seen: Vec<(SeenBy, i64)>,
}

/// The first `n` items of `v` (all when fewer), taken out of it.
fn split_off_front<T>(v: &mut Vec<T>, n: usize) -> Vec<T> {
    let rest = v.split_off(n.min(v.len()));
    std::mem::replace(v, rest)
}

impl Slice {
    fn is_empty(&self) -> bool {
        self.recalls.is_empty() && self.seen.is_empty()
    }

    /// The first `n` recall counts and the first `n` exposure counts, taken
    /// out of this slice.
    fn split_off_front(&mut self, n: usize) -> Slice {
        Slice {
            recalls: split_off_front(&mut self.recalls, n),
            seen: split_off_front(&mut self.seen, n),
        }
    }

    /// The recall counts, as [`sql::add_recalls`] takes them.
    fn recalls(&self) -> Vec<sql::Recall<'_>> {
        self.recalls
            .iter()
            .map(|((id, at, born_ms), row)| {
                let [o, n, a, k] = at.parts();
                (*id, (o, n, a, k), *born_ms, row.n, row.last_ms)
            })
            .collect()
    }

    /// The exposure counts, as [`sql::add_exposure_counts`] takes them.
    fn seen(&self) -> Vec<sql::Seen<'_>> {
        self.seen
            .iter()
            .map(|(by, count)| {
                let [o, n, a, k, to] = by.parts();
                ((o, n, a, k, to), *count)
            })
            .collect()
    }
}

impl Held {
    fn gather(&mut self, by_id: bool, rows: &[Served]) {
        for s in rows {
            let (org, namespace, agent, key) = (&*s.org, &*s.namespace, &*s.agent, &*s.memory_key);
            *self
                .seen
                .at(Packed::new([org, namespace, agent, key, &s.served_to])) += 1;
            if let Some(recalled) = s.recalled {
                let id = if by_id { recalled.id } else { 0 };
                let row = self.recalls.at((
                    id,
                    Packed::new([org, namespace, agent, key]),
                    recalled.born_ms,
                ));
                row.n += 1;
                row.last_ms = row.last_ms.max(s.at_ms);
                row.slots.push(s.slot);
            }
        }
    }

    fn next_slice(&mut self) -> Slice {
        Slice {
            recalls: self.recalls.next_slice(),
            seen: self.seen.next_slice(),
        }
    }

    fn take_all(&mut self) -> Slice {
        Slice {
            recalls: self.recalls.take_all(),
            seen: self.seen.take_all(),
        }
    }

    fn put_back(&mut self, slice: Slice) {
        self.recalls.put_back(slice.recalls);
        self.seen.put_back(slice.seen);
    }

    fn wait(&self) -> Option<Duration> {
        self.recalls
            .wait()
            .into_iter()
            .chain(self.seen.wait())
            .min()
    }
}

impl Sink {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn by_id(&self) -> bool {
        self.store.backend() == Backend::Sqlite
    }

    /// Writes `rows`' exposures and `slice`'s sums in one transaction: on
    /// SQLite's direct writer where there is one.
    async fn write(&self, rows: &Arc<[Served]>, slice: &Arc<Slice>) -> OpResult<()> {
        let (batch, shared) = (rows.clone(), slice.clone());
        let direct = self.store.write_direct(move |conn| {
            sql::write_usage_direct(conn, &batch, &shared.seen(), &shared.recalls())
        });
        if let Some(done) = direct.await {
            return done.map(drop);
        }
        let (recalls, seen) = (slice.recalls(), slice.seen());
        let mut tx = self.store.begin_write().await?;
        sql::insert_exposures(tx.conn(), rows).await?;
        sql::add_exposure_counts(tx.conn(), &seen).await?;
        sql::add_recalls(tx.conn(), &recalls).await?;
        tx.commit_unaudited().await
    }

    /// The slice's recalls are written: their callers' counts can rest on
    /// the stored ones. Also ages the rows settled before.
    fn settle(&self, slice: &Slice) {
        let slots = slice.recalls.iter().flat_map(|(_, row)| &row.slots);
        self.queued.settle(slots.copied());
    }
}

impl BatchSink<Served> for Sink {
    /// Writes the batch's exposure rows, and in the same transaction the
    /// next slice of what is held; gathers the batch's sums.
    fn write_batch<'a>(&'a self, rows: &'a Arc<[Served]>) -> BoxFuture<'a, Result<(), LoomError>> {
        Box::pin(async move {
            // Only the writer task touches `held`, a batch at a time, and
            // never holds the lock across an await.
            let slice = Arc::new(self.held().next_slice());
            let result = self.write(rows, &slice).await;
            match &result {
                Ok(()) => {
                    self.held().gather(self.by_id(), rows);
                    self.settle(&slice);
                }
                // The batch is retried as it was; the slice waits for the
                // next. (The direct writer has let go of its share by now:
                // the copy is never made in practice.)
                Err(_) => self.held().put_back(Arc::unwrap_or_clone(slice)),
            }
            result
        })
    }

    fn given_up(&self, rows: &[Served]) {
        // The exposures are lost, and with them their recalls.
        let slots = rows.iter().filter(|s| s.recalled.is_some());
        self.queued.settle(slots.map(|s| s.slot));
    }

    fn holds(&self) -> Option<Duration> {
        self.held().wait()
    }

    /// Writes everything held, a slice per transaction: a get load leaves
    /// up to two folds of counts held (tens of thousands of rows), and
    /// written at once they held SQLite's one writer for up to half a
    /// second while every write queued behind them (memory.set's p99 right
    /// after a get load: 251-698 ms, against 34-38 ms in slices).
    fn write_held(&self) -> BoxFuture<'_, Result<(), LoomError>> {
        Box::pin(async move {
            let mut rest = self.held().take_all();
            let none: Arc<[Served]> = Arc::from([]);
            while !rest.is_empty() {
                let slice = Arc::new(rest.split_off_front(SLICE));
                if let Err(e) = self.write(&none, &slice).await {
                    let mut held = self.held();
                    held.put_back(Arc::unwrap_or_clone(slice));
                    held.put_back(rest);
                    return Err(e);
                }
                self.settle(&slice);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(id: i64, at_ms: i64) -> Served {
        Served {
            org: "o".into(),
            namespace: "n".into(),
            agent: "a".into(),
            memory_key: format!("k{id}"),
            version: 1,
            served_to: "a".into(),
            subject: "s".into(),
            op: "memory.get",
            run_id: None,
            request_id: "r".into(),
            at_ms,
            recalled: Some(Recalled { id, born_ms: 0 }),
            answered_recalls: id,
            slot: 0,
        }
    }

    fn recall(queued: &QueuedRecalls, held: &mut Held, id: i64, at_ms: i64) {
        let mut s = served(id, at_ms);
        s.slot = queued.add(&s);
        held.gather(true, std::slice::from_ref(&s));
    }

    fn ids(slice: &Slice) -> Vec<i64> {
        slice.recalls.iter().map(|((id, _, _), _)| *id).collect()
    }

    fn keys(slice: &Slice) -> Vec<(&str, i64)> {
        slice
            .seen
            .iter()
            .map(|(by, n)| (by.parts()[3], *n))
            .collect()
    }

    /// As if the gathered sums had waited a fold.
    fn due(held: &mut Held) {
        held.recalls.as_if_waited();
        held.seen.as_if_waited();
    }

    #[test]
    fn held_sums_go_out_after_a_fold_in_row_order_a_slice_at_a_time() {
        let queued = QueuedRecalls::default();
        let mut held = Held::default();
        for id in (1..=SLICE as i64 + 5).rev() {
            recall(&queued, &mut held, id, 10);
        }
        recall(&queued, &mut held, 3, 20);
        let none = held.next_slice();
        assert!(
            none.recalls.is_empty() && none.seen.is_empty(),
            "gathered for a fold first"
        );

        due(&mut held);
        let first = held.next_slice();
        assert_eq!(ids(&first), (1..=SLICE as i64).collect::<Vec<_>>());
        let three = &first.recalls[2].1;
        assert_eq!((three.n, three.last_ms, three.slots.len()), (2, 20, 2));
        // Exposure counts in key order: "k1", "k10", "k100", ...
        assert_eq!(first.seen.len(), SLICE);
        assert_eq!(keys(&first)[..3], [("k1", 1), ("k10", 1), ("k100", 1)]);
        assert!(keys(&first).contains(&("k3", 2)));

        // Sums gathered meanwhile wait for the last second's to be out.
        recall(&queued, &mut held, 1, 30);
        due(&mut held);
        assert_eq!(
            ids(&held.next_slice()),
            (SLICE as i64 + 1..=SLICE as i64 + 5).collect::<Vec<_>>()
        );
        let last = held.next_slice();
        assert_eq!((ids(&last), keys(&last)), (vec![1], vec![("k1", 1)]));
        assert!(held.next_slice().recalls.is_empty());
        assert_eq!(held.wait(), None, "nothing held");
    }

    #[test]
    fn everything_held_splits_into_slices_in_row_order() {
        let queued = QueuedRecalls::default();
        let mut held = Held::default();
        let n = 2 * SLICE as i64 + 3;
        for id in (1..=n).rev() {
            recall(&queued, &mut held, id, 10);
        }
        let mut rest = held.take_all();
        let first = rest.split_off_front(SLICE);
        assert_eq!(ids(&first), (1..=SLICE as i64).collect::<Vec<_>>());
        assert_eq!(first.seen.len(), SLICE);
        let second = rest.split_off_front(SLICE);
        assert_eq!(ids(&second)[0], SLICE as i64 + 1);
        let last = rest.split_off_front(SLICE);
        assert_eq!((last.recalls.len(), last.seen.len()), (3, 3));
        assert_eq!(*ids(&last).last().unwrap(), n);
        assert!(rest.is_empty() && !last.is_empty());
    }

    #[test]
    fn take_all_sums_a_row_across_the_slices_and_put_back_keeps_it() {
        let queued = QueuedRecalls::default();
        let mut held = Held::default();
        recall(&queued, &mut held, 7, 10);
        due(&mut held);
        let slice = held.next_slice();
        held.put_back(slice);
        assert_eq!(held.wait(), Some(crate::store::LINGER), "a slice waits");
        recall(&queued, &mut held, 7, 40);
        recall(&queued, &mut held, 2, 5);
        let all = held.take_all();
        assert_eq!(ids(&all), [2, 7]);
        assert_eq!(
            (
                all.recalls[1].1.n,
                all.recalls[1].1.last_ms,
                all.recalls[1].1.slots.len()
            ),
            (2, 40, 2)
        );
        assert_eq!(keys(&all), [("k2", 1), ("k7", 2)]);
        assert!(held.take_all().recalls.is_empty());
        assert_eq!(held.wait(), None);
    }

    #[test]
    fn a_written_recall_is_remembered_one_settle_more() {
        let queued = QueuedRecalls::default();
        let s = served(7, 10);
        let by = RecallBy::served(&s);
        let slot = queued.add(&s);
        assert_eq!(queued.add(&s), slot, "one row and caller, one slot");
        queued.settle([slot]);
        assert_eq!(queued.answered(&by), Some(7), "one recall still queued");
        queued.settle([slot]);
        assert_eq!(queued.answered(&by), Some(7), "written: kept a settle more");
        queued.settle([]);
        assert_eq!(queued.answered(&by), None, "then forgotten");

        // Recalled again while kept: it stays until that recall is written.
        queued.add(&s);
        queued.settle([slot]);
        queued.add(&s);
        queued.settle([]);
        assert_eq!(queued.answered(&by), Some(7));
        queued.settle([slot]);
        queued.settle([]);
        assert_eq!(queued.answered(&by), None);
        assert!(queued.lock().by_slot.is_empty() && queued.lock().idle.is_empty());
    }
}
