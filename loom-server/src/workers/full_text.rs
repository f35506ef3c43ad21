//! Merges SQLite's full-text index once nobody has written it for a while
//! (why and how: loom-ops `store::full_text`). It looks every
//! `LOOM_FTS_MERGE_IDLE_SECS`; an index unchanged between two looks, and
//! in enough segments or grown enough to be worth it, is merged into one,
//! step by step through the writer. Several replicas may run it: a
//! replica's steps are writes like any other, and the first to merge
//! leaves the others nothing to do.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::app::App;

/// Starts the worker, looking every `every`.
pub fn start(app: Arc<App>, every: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut watch = loom_ops::store::FullTextWatch::default();
        loop {
            tokio::time::sleep(every).await;
            let started = std::time::Instant::now();
            match app.store.merge_full_text_if_quiet(&mut watch).await {
                Ok(Some(merged)) => tracing::info!(
                    from = merged.from,
                    to = merged.to,
                    steps = merged.steps,
                    interrupted = merged.interrupted,
                    ms = started.elapsed().as_millis() as u64,
                    "merged the full-text index"
                ),
                Ok(None) => {}
                Err(e) => tracing::warn!(
                    cause = e.internal_message().unwrap_or(e.message()),
                    "full-text index merge failed"
                ),
            }
        }
    })
}
