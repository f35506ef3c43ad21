//! Step 8 (ledger): one `agent_events` row per call, written off the
//! request path by a [`BatchWriter`] (bounded channel, batches, retries,
//! drained on shutdown; see `loom_ops::store::batch`) into an
//! [`EventSink`], the store by default.

use std::sync::Arc;

use loom_core::{AgentEvent, BoxFuture, EventSink, LoomError};
use loom_ops::store::{BatchSink, BatchWriter};

pub use loom_ops::store::Ledger;

/// Starts the ledger writer on the current runtime.
pub fn start(sink: Arc<dyn EventSink>) -> Ledger {
    BatchWriter::start("agent_events", Arc::new(Events(sink)))
}

/// An [`EventSink`] as the batch writer's sink.
struct Events(Arc<dyn EventSink>);

impl BatchSink<AgentEvent> for Events {
    fn write_batch<'a>(
        &'a self,
        rows: &'a Arc<[AgentEvent]>,
    ) -> BoxFuture<'a, Result<(), LoomError>> {
        self.0.write_events(rows)
    }
}
