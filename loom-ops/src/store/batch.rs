//! Batched background writers: rows a call produces but need not wait for
//! (the call ledger, recall counts and exposure rows) are queued on a
//! bounded channel and written by one task, many rows per transaction.
//!
//! Why: on SQLite every write queues behind the one writer connection and
//! commits with `synchronous=FULL`, so a read that wrote its own telemetry
//! row inside the request cost a commit per read. Batched, a few hundred
//! reads share one commit and reads never wait for the writer.
//!
//! Nothing is dropped while the server runs: when the channel is full a
//! call waits for room. A failed batch is retried with a growing pause (up
//! to [`ATTEMPTS`] times) before it is logged as lost. [`BatchWriter::close`]
//! writes everything queued, then stops the task: shutdown calls it after
//! the last call finished. A sink may hold part of its rows back to write
//! them later in fewer, larger writes ([`BatchSink::holds`]); a flush, a
//! close and a quiet spell write what it holds. A `kill -9` loses what was still queued (at most
//! a batch's worth of telemetry; never a memory write, which commits inside
//! its call).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use loom_core::{BoxFuture, LoomError};
use tokio::sync::{Notify, mpsc, oneshot};

/// Rows the channel holds before calls wait.
pub const CAPACITY: usize = 10_000;
/// Rows written per batch, at most: a batch reaches it only when rows
/// arrive faster than the writer writes them. Under memory.get's full load
/// the usage log's recall counts land on random rows, one page each, and a
/// commit per 500 rows (the former bound) wrote and checkpointed so many
/// pages that the writer fell behind, the channel filled and reads waited
/// for it (p99 17.7 ms at 10.8k requests/s; with 2000: 7.9 ms at 13.0k). A
/// batch of 2000 holds the writer ~30 ms.
pub const BATCH: usize = 2000;
/// Tries per batch.
pub const ATTEMPTS: u32 = 5;
/// How long a short batch waits, from its first row, for more rows before
/// it is written. Every batch is a transaction (on SQLite a commit and an
/// fsync), so a writer that wrote whatever had queued the moment it was
/// free spent more on commits the faster its statements ran. And on SQLite
/// every commit costs each reader: a read that finds the database changed
/// since its connection's last read drops that connection's page cache and
/// memory map and reads its pages again. Paired 10 s runs: at 50 ms rather
/// than 10, search served ~12% more requests a second and memory.get 1-7%
/// more; at 100 ms rather than 50, memory.get 9-12% more (250 ms: 13%, 500
/// ms: 5-10%, as the longer batches hold the writer longer). Nothing a
/// caller reads waits on it: a caller's own recall counts are remembered
/// until written (`memory::usage`), and the reads that report telemetry
/// flush first. A flush or a close does not wait.
pub const LINGER: Duration = Duration::from_millis(100);

/// The call ledger's writer (`agent_events`, one row per call), started
/// by the server. A service in `OpCx` where a server runs, so an op that
/// reads the ledger can first wait for the rows of the calls answered
/// before it ([`BatchWriter::flush`]).
pub type Ledger = BatchWriter<loom_core::AgentEvent>;

/// Where a writer's rows go, a batch at a time.
pub trait BatchSink<T>: Send + Sync + 'static {
    /// Writes every row of the batch, or none. The batch is shared, so a
    /// sink may hand it to another thread (SQLite's direct writer) without
    /// copying it.
    fn write_batch<'a>(&'a self, rows: &'a Arc<[T]>) -> BoxFuture<'a, Result<(), LoomError>>;

    /// The batch failed its last try and is dropped (it was logged as lost).
    fn given_up(&self, _rows: &[T]) {}

    /// Whether the sink holds back part of what it was handed, to write it
    /// later in fewer, larger writes (the usage log's recall counts), and
    /// if so how long it may wait for the next batch before
    /// [`BatchSink::write_held`].
    fn holds(&self) -> Option<Duration> {
        None
    }

    /// Writes what the sink holds back: on a flush, on close, and when no
    /// row came for [`BatchSink::holds`]. On an error the sink keeps it.
    fn write_held(&self) -> BoxFuture<'_, Result<(), LoomError>> {
        Box::pin(async { Ok(()) })
    }
}

enum Msg<T> {
    Row(Box<T>),
    Flush(oneshot::Sender<()>),
    Close(oneshot::Sender<()>),
}

/// The handle calls queue rows through. Cheap to clone.
pub struct BatchWriter<T> {
    what: &'static str,
    tx: mpsc::Sender<Msg<T>>,
    /// How the writer is woken while it lingers over a short batch.
    linger: Arc<Linger>,
}

/// What senders wake a lingering writer with: a batch's worth of rows (the
/// rows queued on the channel and those the writer holds), a flush or a
/// close. A row alone does not wake it (see [`run`]).
#[derive(Default)]
struct Linger {
    wake: Notify,
    /// Rows of the batch the writer holds while it lingers.
    held: AtomicUsize,
}

impl<T> Clone for BatchWriter<T> {
    fn clone(&self) -> Self {
        BatchWriter {
            what: self.what,
            tx: self.tx.clone(),
            linger: self.linger.clone(),
        }
    }
}

impl<T> std::fmt::Debug for BatchWriter<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BatchWriter({})", self.what)
    }
}

impl<T: Send + Sync + 'static> BatchWriter<T> {
    /// Starts the writer task on the current runtime; `what` names the rows
    /// in log lines.
    pub fn start(what: &'static str, sink: Arc<dyn BatchSink<T>>) -> BatchWriter<T> {
        let (tx, rx) = mpsc::channel(CAPACITY);
        let linger = Arc::new(Linger::default());
        tokio::spawn(run(what, sink, rx, linger.clone()));
        BatchWriter { what, tx, linger }
    }

    /// Queues one row.
    pub async fn record(&self, row: T) {
        if self.tx.send(Msg::Row(Box::new(row))).await.is_err() {
            tracing::error!(
                what = self.what,
                "the batch writer has stopped: one row was not written"
            );
        } else {
            let queued = self.tx.max_capacity() - self.tx.capacity();
            if queued + self.linger.held.load(Ordering::Relaxed) >= BATCH {
                self.linger.wake.notify_one();
            }
        }
    }

    /// Waits until every row queued before this call is written.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Flush(done)).await.is_ok() {
            self.linger.wake.notify_one();
            let _ = wait.await;
        }
    }

    /// Writes everything queued and stops the writer.
    pub async fn close(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Close(done)).await.is_ok() {
            self.linger.wake.notify_one();
            let _ = wait.await;
        }
    }
}

async fn write<T: Sync + 'static>(what: &'static str, sink: &dyn BatchSink<T>, batch: &mut Vec<T>) {
    if batch.is_empty() {
        return;
    }
    let started = std::time::Instant::now();
    // Moved out, not copied; the batch keeps its capacity for the next.
    let rows: Arc<[T]> = batch.drain(..).collect();
    if retried(what, Some(rows.len()), || sink.write_batch(&rows)).await {
        tracing::debug!(
            what,
            rows = rows.len(),
            ms = started.elapsed().as_millis() as u64,
            "batch written"
        );
    } else {
        sink.given_up(&rows);
    }
}

/// Writes what the sink holds; what still fails stays with it.
async fn write_held<T: Sync + 'static>(what: &'static str, sink: &dyn BatchSink<T>) {
    if sink.holds().is_some() {
        let started = std::time::Instant::now();
        if retried(what, None, || sink.write_held()).await {
            tracing::debug!(
                what,
                ms = started.elapsed().as_millis() as u64,
                "held rows written"
            );
        }
    }
}

/// Runs `attempt` up to [`ATTEMPTS`] times, pausing longer after each
/// failure; false when the last one failed too, logged with the `lost`
/// rows (`None`: what the sink holds, which it keeps for the next try).
async fn retried<'a>(
    what: &'static str,
    lost: Option<usize>,
    mut attempt: impl FnMut() -> BoxFuture<'a, Result<(), LoomError>>,
) -> bool {
    let mut pause = Duration::from_millis(100);
    for n in 1..=ATTEMPTS {
        match attempt().await {
            Ok(()) => return true,
            Err(e) if n < ATTEMPTS => {
                tracing::warn!(what, error = %e, cause = e.internal_message().unwrap_or(""), attempt = n, "batch failed; retrying");
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            Err(e) => match lost {
                Some(lost) => {
                    tracing::error!(what, error = %e, cause = e.internal_message().unwrap_or(""), lost, "batch lost");
                }
                None => {
                    tracing::error!(what, error = %e, cause = e.internal_message().unwrap_or(""), "held rows not written; kept for the next try");
                }
            },
        }
    }
    false
}

/// The writer task. Idle, it waits for a row; with a short batch it
/// lingers until [`LINGER`] after the batch's first row, then takes what
/// has queued meanwhile. It lingers asleep, not waiting on the channel:
/// waiting there, every row sent woke it (a schedule and a poll of this
/// task per call, and its timer set again each time), where now only a
/// batch's worth of rows, a flush or a close does ([`BatchWriter`]'s
/// `linger`).
async fn run<T: Send + Sync + 'static>(
    what: &'static str,
    sink: Arc<dyn BatchSink<T>>,
    mut rx: mpsc::Receiver<Msg<T>>,
    linger: Arc<Linger>,
) {
    let mut batch: Vec<T> = Vec::new();
    loop {
        let msg = match sink.holds() {
            // Nothing came for a while: write what the sink holds back.
            Some(wait) => match tokio::time::timeout(wait, rx.recv()).await {
                Ok(msg) => msg,
                Err(_) => {
                    write_held(what, sink.as_ref()).await;
                    continue;
                }
            },
            None => rx.recv().await,
        };
        let Some(msg) = msg else {
            // Every handle is gone.
            write_held(what, sink.as_ref()).await;
            return;
        };
        // Take everything already queued: under load a batch fills while the
        // previous one commits, so commits per row fall as load rises.
        let mut acks = Vec::new();
        let mut close = None;
        let mut next = Some(msg);
        let deadline = tokio::time::Instant::now() + LINGER;
        'fill: loop {
            while let Some(msg) = next.take() {
                match msg {
                    Msg::Row(row) => batch.push(*row),
                    Msg::Flush(ack) => {
                        // Write what came before it now: under load rows
                        // never stop arriving, and a flush that waited for
                        // a quiet moment waited a hundred milliseconds and
                        // more.
                        acks.push(ack);
                        break 'fill;
                    }
                    Msg::Close(ack) => {
                        close = Some(ack);
                        break 'fill;
                    }
                }
                if batch.len() >= BATCH {
                    write(what, sink.as_ref(), &mut batch).await;
                }
                next = rx.try_recv().ok();
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            linger.held.store(batch.len(), Ordering::Relaxed);
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = linger.wake.notified() => {}
            }
            linger.held.store(0, Ordering::Relaxed);
            next = rx.try_recv().ok();
        }
        write(what, sink.as_ref(), &mut batch).await;
        if !acks.is_empty() {
            write_held(what, sink.as_ref()).await;
        }
        for ack in acks {
            let _ = ack.send(());
        }
        if let Some(ack) = close {
            rx.close();
            while let Ok(msg) = rx.try_recv() {
                if let Msg::Row(row) = msg {
                    batch.push(*row);
                }
            }
            write(what, sink.as_ref(), &mut batch).await;
            write_held(what, sink.as_ref()).await;
            let _ = ack.send(());
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Keeps every batch it was handed; fails the first `fail` writes.
    struct Keep {
        batches: Mutex<Vec<Vec<u32>>>,
        fail: Mutex<u32>,
    }

    impl BatchSink<u32> for Keep {
        fn write_batch<'a>(&'a self, rows: &'a Arc<[u32]>) -> BoxFuture<'a, Result<(), LoomError>> {
            Box::pin(async move {
                let mut fail = self.fail.lock().unwrap();
                if *fail > 0 {
                    *fail -= 1;
                    return Err(LoomError::internal("down"));
                }
                self.batches.lock().unwrap().push(rows.to_vec());
                Ok(())
            })
        }
    }

    fn keep(fail: u32) -> Arc<Keep> {
        Arc::new(Keep {
            batches: Mutex::new(Vec::new()),
            fail: Mutex::new(fail),
        })
    }

    #[tokio::test]
    async fn flush_writes_everything_queued_in_order_and_in_bounded_batches() {
        let sink = keep(0);
        let w = BatchWriter::start("test", sink.clone());
        for i in 0..1_234 {
            w.record(i).await;
        }
        w.flush().await;
        let batches = sink.batches.lock().unwrap().clone();
        assert!(batches.iter().all(|b| !b.is_empty() && b.len() <= BATCH));
        let all: Vec<u32> = batches.into_iter().flatten().collect();
        assert_eq!(all, (0..1_234).collect::<Vec<_>>());
    }

    /// Keeps when (on the runtime's clock) each batch came, and its size.
    #[derive(Default)]
    struct Stamp {
        batches: Mutex<Vec<(tokio::time::Instant, usize)>>,
    }

    impl BatchSink<u32> for Stamp {
        fn write_batch<'a>(&'a self, rows: &'a Arc<[u32]>) -> BoxFuture<'a, Result<(), LoomError>> {
            let now = tokio::time::Instant::now();
            self.batches.lock().unwrap().push((now, rows.len()));
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_batch_lingers_and_a_full_one_goes_at_once() {
        let sink = Arc::new(Stamp::default());
        let w = BatchWriter::start("test", sink.clone());
        let start = tokio::time::Instant::now();
        let written = |n: usize| sink.batches.lock().unwrap().len() >= n;
        // One row waits out the linger (the paused clock moves only when
        // every task waits: a millisecond per nap here, until the writer's
        // deadline comes).
        w.record(1).await;
        while !written(1) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let (at, rows) = sink.batches.lock().unwrap()[0];
        assert_eq!(rows, 1);
        assert!(at - start >= LINGER, "written after {:?}", at - start);
        // A batch's worth wakes the writer: it goes before the linger ends.
        let start = tokio::time::Instant::now();
        for i in 0..BATCH as u32 {
            w.record(i).await;
        }
        while !written(2) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let (at, rows) = sink.batches.lock().unwrap()[1];
        assert_eq!(rows, BATCH);
        assert!(at - start < LINGER, "written after {:?}", at - start);
    }

    /// Writes nothing at once: holds every row until asked.
    #[derive(Default)]
    struct Hold {
        held: Mutex<Vec<u32>>,
        written: Mutex<Vec<u32>>,
    }

    impl BatchSink<u32> for Hold {
        fn write_batch<'a>(&'a self, rows: &'a Arc<[u32]>) -> BoxFuture<'a, Result<(), LoomError>> {
            self.held.lock().unwrap().extend_from_slice(rows);
            Box::pin(async { Ok(()) })
        }

        fn holds(&self) -> Option<Duration> {
            let held = !self.held.lock().unwrap().is_empty();
            held.then_some(Duration::from_secs(1))
        }

        fn write_held(&self) -> BoxFuture<'_, Result<(), LoomError>> {
            let held = std::mem::take(&mut *self.held.lock().unwrap());
            self.written.lock().unwrap().extend(held);
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn what_a_sink_holds_is_written_when_no_row_comes_for_its_wait() {
        let sink = Arc::new(Hold::default());
        let w = BatchWriter::start("test", sink.clone());
        w.record(1).await;
        // The clock stands still until every task waits: the writer has
        // lingered, handed the batch over and begun its wait by then.
        tokio::time::sleep(LINGER * 2).await;
        assert_eq!(*sink.held.lock().unwrap(), vec![1], "held, not written");
        assert!(sink.written.lock().unwrap().is_empty());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(*sink.written.lock().unwrap(), vec![1]);
        assert!(sink.held.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn flush_and_close_write_what_a_sink_holds() {
        let sink = Arc::new(Hold::default());
        let w = BatchWriter::start("test", sink.clone());
        w.record(1).await;
        w.flush().await;
        assert_eq!(*sink.written.lock().unwrap(), vec![1], "flushed");
        w.record(2).await;
        w.close().await;
        assert_eq!(*sink.written.lock().unwrap(), vec![1, 2], "closed");
    }

    #[tokio::test]
    async fn a_failed_batch_is_retried() {
        let sink = keep(2);
        let w = BatchWriter::start("test", sink.clone());
        w.record(7).await;
        w.flush().await;
        assert_eq!(*sink.batches.lock().unwrap(), vec![vec![7]]);
    }

    #[tokio::test]
    async fn close_writes_what_is_queued_and_later_rows_are_refused_quietly() {
        let sink = keep(0);
        let w = BatchWriter::start("test", sink.clone());
        w.record(1).await;
        w.record(2).await;
        w.close().await;
        w.record(3).await;
        w.flush().await;
        assert_eq!(
            sink.batches.lock().unwrap().concat(),
            vec![1, 2],
            "rows queued before close are written, none after"
        );
    }
}
