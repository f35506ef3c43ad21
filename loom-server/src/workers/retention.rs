//! The retention sweep: deletes the ledger, exposure and audit rows older
//! than `LOOM_LEDGER_RETENTION_DAYS`, `LOOM_EXPOSURE_RETENTION_DAYS` and
//! `LOOM_AUDIT_RETENTION_DAYS` keep them, stored idempotent answers past
//! `LOOM_IDEMPOTENCY_TTL_SECS` (never replayed again) and MCP sessions
//! unused for longer than the ledger keeps calls, once at start
//! and then every [`EVERY`] (`loom_ops::store::Store::prune` says how).
//! Every replica may sweep: a row is deleted once whoever gets to it.

use std::sync::Arc;
use std::time::Duration;

use loom_core::LoomError;
use loom_ops::store::{Pruned, now_ms};
use tokio::task::JoinHandle;

use crate::app::App;

/// How often the sweep runs. Rows live for days: an hour late costs an
/// hour's share of a table, and a sweep finding nothing reads a batch of
/// each table's oldest rows (`Store::prune`).
pub const EVERY: Duration = Duration::from_secs(3_600);

/// How long `app`'s deployment keeps `pruned`'s rows; `None`: for ever.
fn kept(app: &App, pruned: Pruned) -> Option<Duration> {
    match pruned {
        Pruned::Ledger => app.config.ledger_retention,
        Pruned::Exposures => app.config.exposure_retention,
        Pruned::Audit => app.config.audit_retention,
        Pruned::Idempotency => Some(app.config.idempotency_ttl),
        // A session unused for as long as the ledger keeps calls answers
        // 404, and its client opens another.
        Pruned::McpSessions => app.config.ledger_retention,
    }
}

/// One sweep at `now_ms`: the rows it deleted, table by table (those it
/// deleted any of).
pub async fn sweep_once(app: &App, now_ms: i64) -> Result<Vec<(Pruned, u64)>, LoomError> {
    let mut deleted = Vec::new();
    for pruned in Pruned::ALL {
        let Some(kept) = kept(app, pruned) else {
            continue;
        };
        let kept_ms = i64::try_from(kept.as_millis()).unwrap_or(i64::MAX);
        let n = app
            .store
            .prune(pruned, now_ms.saturating_sub(kept_ms))
            .await?;
        if n > 0 {
            tracing::info!(
                table = pruned.table(),
                deleted = n,
                "deleted rows past their retention"
            );
            deleted.push((pruned, n));
        }
    }
    Ok(deleted)
}

/// Starts the sweep: now, then every [`EVERY`].
pub fn start(app: Arc<App>) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Err(e) = sweep_once(&app, now_ms()).await {
                tracing::warn!(
                    cause = e.internal_message().unwrap_or(e.message()),
                    "retention sweep failed; the next one tries again"
                );
            }
            tokio::time::sleep(EVERY).await;
        }
    })
}
