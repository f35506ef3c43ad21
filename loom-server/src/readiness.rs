//! `/readyz`'s question to the store, answered at most once a
//! [`FRESH`] period.
//!
//! Why: a load balancer or an orchestrator sends calls only to replicas
//! that say they are ready. A replica whose PostgreSQL is unreachable
//! answers every call 503 or 504 after waiting out its budget, yet it
//! said ready as long as its revocation list had loaded once. Now it says
//! not ready while the store does not answer, within a probe's usual
//! one-second timeout ([`WITHIN`]).
//!
//! `/readyz` needs no credentials, so a flood of it must not become a
//! flood of queries: one check runs at a time, and its outcome answers
//! every probe for [`FRESH`].

use std::time::{Duration, Instant};

use loom_ops::store::Store;
use tokio::sync::Mutex;

/// How long one check's outcome answers probes.
const FRESH: Duration = Duration::from_secs(1);

/// How long a check waits for the store: under a probe's usual
/// one-second timeout, so a store that hangs is reported, not waited out.
const WITHIN: Duration = Duration::from_millis(800);

/// The last check: when it ended and whether the store answered (else
/// why not, for the log).
#[derive(Debug, Default)]
pub struct StoreCheck {
    last: Mutex<Option<(Instant, Result<(), String>)>>,
}

impl StoreCheck {
    /// Whether `store` answers, checked now unless a check ended within
    /// [`FRESH`]. A change either way is logged, with the cause.
    pub async fn answers(&self, store: &Store) -> bool {
        let mut last = self.last.lock().await;
        if let Some((at, outcome)) = last.as_ref()
            && at.elapsed() < FRESH
        {
            return outcome.is_ok();
        }
        let outcome = match tokio::time::timeout(WITHIN, store.ping()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.internal_message().unwrap_or(e.message()).to_owned()),
            Err(_) => Err(format!("no answer within {} ms", WITHIN.as_millis())),
        };
        let was_ok = last.as_ref().is_none_or(|(_, before)| before.is_ok());
        match (&outcome, was_ok) {
            (Err(cause), true) => tracing::warn!(%cause, "not ready: the store does not answer"),
            (Ok(()), false) => tracing::info!("ready: the store answers again"),
            _ => {}
        }
        let ok = outcome.is_ok();
        *last = Some((Instant::now(), outcome));
        ok
    }
}
