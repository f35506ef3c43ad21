//! The MCP session-run sweep: closes each session's implicit run once no
//! call of it has been ledgered for `LOOM_MCP_SESSION_RUN_IDLE_SECONDS`.
//! It runs at least every `min(60 s, idle / 2)`. The close is one
//! conditional `UPDATE`, so sweeps on several replicas never close a run
//! twice; a run with a call inside the idle window is never closed. (The
//! ledger is written a moment after each call, so a call in the last
//! instant before the cutoff can be missed by at most that moment.)

use std::sync::Arc;

use loom_ops::store::now_ms;
use tokio::task::JoinHandle;

use crate::app::App;

/// One sweep at `now_ms`: the runs it closed.
pub async fn sweep_once(app: &App, now_ms: i64) -> Result<Vec<String>, loom_core::LoomError> {
    let idle_ms = i64::try_from(app.config.mcp.session_run_idle.as_millis()).unwrap_or(i64::MAX);
    // A run's last call may still be queued for the ledger, which is what
    // the sweep reads: write it first, so a run in use is never idle.
    app.ledger.flush().await;
    let closed = app.store.sweep_idle_session_runs(now_ms, idle_ms).await?;
    if !closed.is_empty() {
        tracing::info!(
            closed = closed.len(),
            runs = %closed.join(","),
            "closed idle MCP session runs"
        );
    }
    Ok(closed)
}

/// Starts the sweep; `on_closed` hears every run it closes (the MCP
/// transport forgets them, so a session's next call begins a new run).
pub fn start(
    app: Arc<App>,
    on_closed: impl Fn(&[String]) + Send + Sync + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let every = app.config.mcp.sweep_interval();
        loop {
            tokio::time::sleep(every).await;
            match sweep_once(&app, now_ms()).await {
                Ok(closed) if !closed.is_empty() => on_closed(&closed),
                Ok(_) => {}
                Err(e) => tracing::warn!(
                    cause = e.internal_message().unwrap_or(e.message()),
                    "session-run sweep failed"
                ),
            }
        }
    })
}
