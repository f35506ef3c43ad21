//! Step 8 (ledger): one `agent_events` row per call, written off the
//! request path. Calls push events into a bounded channel (when it is full
//! a call waits for room, so nothing is dropped); one background task
//! writes them in batches of up to [`BATCH`] to the [`EventSink`]. A failed
//! batch is retried with a growing pause (up to [`ATTEMPTS`] times) before
//! it is logged as lost. [`Ledger::close`] writes everything queued, then
//! stops the task: shutdown calls it after the last call finished.

use std::sync::Arc;
use std::time::Duration;

use loom_core::{AgentEvent, EventSink};
use tokio::sync::{mpsc, oneshot};

/// Events the channel holds before calls wait.
pub const CAPACITY: usize = 10_000;
/// Events written per batch.
pub const BATCH: usize = 500;
/// Tries per batch.
pub const ATTEMPTS: u32 = 5;

enum Msg {
    Event(Box<AgentEvent>),
    Flush(oneshot::Sender<()>),
    Close(oneshot::Sender<()>),
}

/// The handle calls record events through.
#[derive(Debug)]
pub struct Ledger {
    tx: mpsc::Sender<Msg>,
}

impl Ledger {
    /// Starts the writer task on the current runtime.
    pub fn start(sink: Arc<dyn EventSink>) -> Ledger {
        let (tx, rx) = mpsc::channel(CAPACITY);
        tokio::spawn(run(sink, rx));
        Ledger { tx }
    }

    /// Queues one event.
    pub async fn record(&self, event: AgentEvent) {
        if self.tx.send(Msg::Event(Box::new(event))).await.is_err() {
            tracing::error!("the ledger writer has stopped: one agent_events row was not written");
        }
    }

    /// Waits until every event queued before this call is written.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }

    /// Writes everything queued and stops the writer.
    pub async fn close(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Close(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

async fn write(sink: &dyn EventSink, batch: &mut Vec<AgentEvent>) {
    if batch.is_empty() {
        return;
    }
    let mut pause = Duration::from_millis(100);
    for attempt in 1..=ATTEMPTS {
        match sink.write_events(batch).await {
            Ok(()) => {
                batch.clear();
                return;
            }
            Err(e) if attempt < ATTEMPTS => {
                tracing::warn!(error = %e, cause = e.internal_message().unwrap_or(""), attempt, "ledger batch failed; retrying");
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            Err(e) => {
                tracing::error!(error = %e, cause = e.internal_message().unwrap_or(""), lost = batch.len(), "ledger batch lost");
            }
        }
    }
    batch.clear();
}

async fn run(sink: Arc<dyn EventSink>, mut rx: mpsc::Receiver<Msg>) {
    let mut batch: Vec<AgentEvent> = Vec::with_capacity(BATCH);
    while let Some(msg) = rx.recv().await {
        let mut acks = Vec::new();
        let mut close = None;
        let mut next = Some(msg);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Event(e) => batch.push(*e),
                Msg::Flush(ack) => acks.push(ack),
                Msg::Close(ack) => {
                    close = Some(ack);
                    break;
                }
            }
            if batch.len() >= BATCH {
                write(sink.as_ref(), &mut batch).await;
            }
            next = rx.try_recv().ok();
        }
        write(sink.as_ref(), &mut batch).await;
        for ack in acks {
            let _ = ack.send(());
        }
        if let Some(ack) = close {
            rx.close();
            while let Ok(msg) = rx.try_recv() {
                if let Msg::Event(e) = msg {
                    batch.push(*e);
                }
            }
            write(sink.as_ref(), &mut batch).await;
            let _ = ack.send(());
            return;
        }
    }
}
