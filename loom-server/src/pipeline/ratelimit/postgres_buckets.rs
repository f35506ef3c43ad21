//! Shared buckets in the server's PostgreSQL database (the SQL is in
//! `loom_ops::store`, beside the other gates' tables).

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use loom_core::{BoxFuture, RateClass, RateKey};
use loom_ops::store::{RateBudget, Store, now_ms};

use super::shared::SharedBuckets;

/// How often idle rows are deleted (a bucket idle for a minute is full).
const PRUNE_EVERY_MS: i64 = 5 * 60 * 1000;

/// The `rate_buckets` table.
pub struct PostgresBuckets {
    store: Store,
    last_prune_ms: AtomicI64,
}

impl PostgresBuckets {
    /// Buckets in `store` (which must be PostgreSQL; `Config::check` says so at start).
    pub fn new(store: Store) -> Self {
        PostgresBuckets {
            store,
            last_prune_ms: AtomicI64::new(now_ms()),
        }
    }

    /// Now and then, deletes idle rows off the request path.
    fn maybe_prune(&self) {
        let now = now_ms();
        let last = self.last_prune_ms.load(Ordering::Relaxed);
        if now - last < PRUNE_EVERY_MS
            || self
                .last_prune_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let store = self.store.clone();
        tokio::spawn(async move {
            match store.rate_prune().await {
                Ok(n) => tracing::debug!(pruned = n, "idle rate-limit buckets deleted"),
                Err(e) => tracing::warn!(
                    cause = e.internal_message().unwrap_or(e.message()),
                    "idle rate-limit buckets not deleted"
                ),
            }
        });
    }
}

impl SharedBuckets for PostgresBuckets {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn take<'a>(
        &'a self,
        key: &'a RateKey,
        class: RateClass,
        budget: RateBudget,
    ) -> BoxFuture<'a, Result<Result<(), Duration>, String>> {
        Box::pin(async move {
            self.maybe_prune();
            self.store
                .rate_take(&key.org, &key.subject, class.as_str(), budget)
                .await
                .map_err(|e| e.internal_message().unwrap_or(e.message()).to_owned())
        })
    }
}
